#!/usr/bin/env python3
"""A NumPy evaluator of the ONNX ops scripts/export_models.py's transformer exports use, to
check an export runs and computes what torch computes, at shapes other than the traced one,
independently of gearbox. python3-onnx 1.12 (Debian 12) has no onnx.reference (1.13 added it)
and ONNX Runtime is not a Debian package, hence this.

    import onnx_numpy_eval
    g = onnx_numpy_eval.load("bert_encoder.onnx")
    outputs = onnx_numpy_eval.run(g, {"input_ids": ids, "attention_mask": mask})

Semantics are the ONNX operator specification's at opsets 13-14 (inputs, not attributes, for
Unsqueeze/Squeeze axes, ReduceSum axes and Slice bounds; ReduceMean's axes an attribute). An op outside OPS is
an error naming the node and op. Reference quality, not speed: Erf is math.erf per element.
"""
import math

import numpy as np


def load(path):
    import onnx

    return onnx.load(path)


def _attr(node, name, default=None):
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _ints(v):
    return [int(x) for x in np.asarray(v).reshape(-1)]


def _slice(node, x, starts, ends, axes=None, steps=None):
    starts, ends = _ints(starts), _ints(ends)
    axes = _ints(axes) if axes is not None else list(range(len(starts)))
    steps = _ints(steps) if steps is not None else [1] * len(starts)
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        # Python slicing clamps as ONNX does, for the int64 extremes torch writes too.
        index[a % x.ndim] = slice(s, e, st)
    return x[tuple(index)]


def _softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _trilu(node, x, k=None):
    k = int(np.asarray(k).reshape(())) if k is not None else 0
    return np.triu(x, k) if _attr(node, "upper", 1) else np.tril(x, k)


def _reduce_sum(node, x, axes=None):
    """ReduceSum at opset 13: axes an optional input; none (or empty) reduces every axis unless
    noop_with_empty_axes."""
    axes = _ints(axes) if axes is not None else []
    if not axes and _attr(node, "noop_with_empty_axes", 0):
        return x
    return np.sum(x, axis=tuple(axes) if axes else None,
                  keepdims=bool(_attr(node, "keepdims", 1))).astype(x.dtype)


_erf = np.vectorize(math.erf, otypes=[np.float64])

# op type -> fn(node, *inputs) -> output(s). Optional inputs left empty arrive as None.
OPS = {
    "Constant": lambda n: _constant(n),
    "Identity": lambda n, x: x,
    "Add": lambda n, a, b: a + b,
    "Sub": lambda n, a, b: a - b,
    "Mul": lambda n, a, b: a * b,
    "Div": lambda n, a, b: (a // b if np.issubdtype(a.dtype, np.integer) else a / b),
    "Pow": lambda n, a, b: np.power(a, b).astype(a.dtype),
    "Sqrt": lambda n, x: np.sqrt(x),
    "Neg": lambda n, x: -x,
    "Erf": lambda n, x: _erf(x).astype(x.dtype),
    "Tanh": lambda n, x: np.tanh(x),
    "MatMul": lambda n, a, b: np.matmul(a, b),
    "Softmax": lambda n, x: _softmax(x, _attr(n, "axis", -1)),
    "ReduceMean": lambda n, x: np.mean(x, axis=tuple(_attr(n, "axes")),
                                       keepdims=bool(_attr(n, "keepdims", 1))).astype(x.dtype),
    "ReduceSum": lambda n, x, axes=None: _reduce_sum(n, x, axes),
    "Transpose": lambda n, x: np.transpose(x, _attr(n, "perm")),
    "Reshape": lambda n, x, s: _reshape(x, _ints(s)),
    "Shape": lambda n, x: np.array(x.shape, np.int64),
    "Gather": lambda n, x, i: np.take(x, i, axis=_attr(n, "axis", 0)),
    "Unsqueeze": lambda n, x, axes: np.expand_dims(
        x, tuple(sorted(a % (x.ndim + len(_ints(axes))) for a in _ints(axes)))),
    "Squeeze": lambda n, x, axes=None: np.squeeze(x, None if axes is None else tuple(_ints(axes))),
    "Concat": lambda n, *xs: np.concatenate(xs, axis=_attr(n, "axis")),
    "Slice": _slice,
    "Cast": lambda n, x: x.astype(_np_type(_attr(n, "to"))),
    "ConstantOfShape": lambda n, s: _constant_of_shape(n, s),
    "Trilu": _trilu,
    "Where": lambda n, c, a, b: np.where(c, a, b),
    "Equal": lambda n, a, b: a == b,
    "Less": lambda n, a, b: a < b,
    "Expand": lambda n, x, s: x * np.ones(_ints(s), x.dtype),
    "Range": lambda n, s, e, d: np.arange(s, e, d).astype(np.asarray(s).dtype),
}


def _np_type(onnx_type):
    from onnx import mapping

    return mapping.TENSOR_TYPE_TO_NP_TYPE[onnx_type]


def _constant(node):
    from onnx import numpy_helper

    return numpy_helper.to_array(_attr(node, "value"))


def _constant_of_shape(node, shape):
    from onnx import numpy_helper

    v = _attr(node, "value")
    fill = numpy_helper.to_array(v).reshape(-1) if v is not None else np.zeros(1, np.float32)
    return np.full(_ints(shape), fill[0], fill.dtype)


def _reshape(x, shape):
    # ONNX: 0 copies the input's dim (allowzero=0, torch's exports), -1 is inferred.
    shape = [x.shape[k] if d == 0 else d for k, d in enumerate(shape)]
    return x.reshape(shape)


def run(model, inputs):
    """The graph's outputs (a list, in graph order) for `inputs` {name: numpy array}."""
    from onnx import numpy_helper

    env = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in env:
            continue
        if vi.name not in inputs:
            raise KeyError(f"input {vi.name} not given")
        env[vi.name] = inputs[vi.name]
    for node in model.graph.node:
        fn = OPS.get(node.op_type)
        if fn is None:
            raise NotImplementedError(f"node {node.name}: op {node.op_type} is not in "
                                      "onnx_numpy_eval.OPS")
        args = [env[i] if i else None for i in node.input]
        out = fn(node, *args)
        outs = out if isinstance(out, tuple) else (out,)
        for name, value in zip(node.output, outs):
            env[name] = np.asarray(value)
    return [env[o.name] for o in model.graph.output]
