"""The importer's transformer mappings (issue 24), on small hand-built ONNX graphs: the
decomposed LayerNorm and GELU patterns written as one layer_norm / gelu (and left alone when an
intermediate value is used elsewhere), Softmax before opset 13, the fills and masks torch writes
with ConstantOfShape / Trilu / Expand over symbolic sizes, Where, Cast and the Equal folding of
torch's expand. Each model is imported and checked against NumPy: through the IR evaluator
(test_import_models.evaluate_ir) and through gearbox.Session (every mode but geared, which
needs gears)."""
import numpy as np
import pytest

import gearbox

onnx = pytest.importorskip("onnx")
pytest.importorskip("torch")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gearbox import onnx_import  # noqa: E402
from test_import_models import ALL_OPS, evaluate_ir, op_counts, write_import  # noqa: E402


def _const(name, value, dtype=np.float32):
    return helper.make_node("Constant", [], [name], name=f"c_{name}",
                            value=numpy_helper.from_array(np.asarray(value, dtype), name))


def _model(tmp_path, nodes, inputs, outputs, initializers=(), opset=13, name="m"):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def _run_both(path, tmp_path, inputs, expected, rtol=1e-5, atol=1e-6):
    """The import through the IR evaluator and through gearbox in two modes; returns the IR."""
    gbx, text, im = write_import(path, str(tmp_path))
    outs = evaluate_ir(gbx, inputs)
    for o, e in zip(outs, expected):
        np.testing.assert_allclose(o, e, rtol=rtol, atol=atol)
    missing = set(op_counts(text)) - set(gearbox.op_names())
    if not missing:
        g = gearbox.load(gbx)
        for mode in (m for m in gearbox.MODES if m != "geared"):  # geared needs gears
            got = gearbox.Session(g, mode=mode).run(*inputs)
            for o, e in zip(got, expected):
                np.testing.assert_allclose(o, e, rtol=rtol, atol=atol, err_msg=mode)
    return text, im


def _ln_nodes(x="x", eps=1e-5, square="Pow", affine=True, out="y"):
    nodes = [
        helper.make_node("ReduceMean", [x], ["mean"], name="rm1", axes=[-1]),
        helper.make_node("Sub", [x, "mean"], ["d"], name="sub"),
    ]
    if square == "Pow":
        nodes += [_const("two", 2.0), helper.make_node("Pow", ["d", "two"], ["sq"], name="pow")]
    else:
        nodes += [helper.make_node("Mul", ["d", "d"], ["sq"], name="sq")]
    nodes += [
        helper.make_node("ReduceMean", ["sq"], ["var"], name="rm2", axes=[-1]),
        _const("eps", eps),
        helper.make_node("Add", ["var", "eps"], ["ve"], name="add_eps"),
        helper.make_node("Sqrt", ["ve"], ["std"], name="sqrt"),
        helper.make_node("Div", ["d", "std"], ["n" if affine else out], name="div"),
    ]
    if affine:
        nodes += [helper.make_node("Mul", ["n", "w"], ["nw"], name="scale"),
                  helper.make_node("Add", ["nw", "b"], [out], name="shift")]
    return nodes


def _ln_ref(x, w=None, b=None, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    y = (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps)
    return (y * w + b if w is not None else y).astype(np.float32)


X = (np.arange(2 * 5 * 8, dtype=np.float32).reshape(2, 5, 8) % 7 - 3) / 3
W = np.linspace(0.5, 1.5, 8).astype(np.float32)
B = np.linspace(-0.2, 0.2, 8).astype(np.float32)
XIN = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])
YOUT = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)


@pytest.mark.parametrize("square", ["Pow", "Mul"])
def test_decomposed_layer_norm_is_one_layer_norm(square, tmp_path):
    path = _model(tmp_path, _ln_nodes(square=square), [XIN], [YOUT],
                  [numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b")])
    text, im = _run_both(path, tmp_path, [X], [_ln_ref(X, W, B)])
    assert op_counts(text) == {"layer_norm": 1}, text
    assert "layer_norm(%x, %w, %b, epsilon=1e-05)" in text
    assert im.fusions_written == {"layer_norm": 1} and im.absorbed == 8


def test_layer_norm_without_affine(tmp_path):
    path = _model(tmp_path, _ln_nodes(affine=False), [XIN], [YOUT])
    text, _ = _run_both(path, tmp_path, [X], [_ln_ref(X)])
    assert op_counts(text) == {"layer_norm": 1}


def test_layer_norm_pattern_with_a_shared_intermediate_is_imported_op_by_op(tmp_path):
    """The mean is also a graph output: the pattern is not taken, and each node is the gearbox
    op it is (mean, sub, pow, add, sqrt, div, mul, add)."""
    mean_out = helper.make_tensor_value_info("mean", TensorProto.FLOAT, None)
    path = _model(tmp_path, _ln_nodes(), [XIN], [YOUT, mean_out],
                  [numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b")])
    text, im = _run_both(path, tmp_path, [X], [_ln_ref(X, W, B), X.mean(-1, keepdims=True)])
    assert op_counts(text) == {"mean": 2, "sub": 1, "pow": 1, "add": 2, "sqrt": 1, "div": 1,
                               "mul": 1}
    assert im.fusions_written == {}


def _erf(v):
    import math
    return np.vectorize(math.erf)(v).astype(np.float32)


def _gelu_ref(x, tanh=False):
    if tanh:
        return (0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))).astype(
            np.float32)
    return (0.5 * x * (1 + _erf(x / np.sqrt(2)))).astype(np.float32)


@pytest.mark.parametrize("order", ["torch", "bert"])
def test_gelu_erf_pattern(order, tmp_path):
    nodes = [_const("sqrt2", np.sqrt(2.0)), helper.make_node("Div", ["x", "sqrt2"], ["u"]),
             helper.make_node("Erf", ["u"], ["e"]), _const("one", 1.0),
             helper.make_node("Add", ["e", "one"], ["a"]), _const("half", 0.5)]
    if order == "torch":  # F.gelu: (x * (1 + erf)) * 0.5
        nodes += [helper.make_node("Mul", ["x", "a"], ["m"]),
                  helper.make_node("Mul", ["m", "half"], ["y"])]
    else:  # HF BERT: x * 0.5 * (1 + erf)
        nodes += [helper.make_node("Mul", ["x", "half"], ["h"]),
                  helper.make_node("Mul", ["h", "a"], ["y"])]
    path = _model(tmp_path, nodes, [XIN], [YOUT])
    text, _ = _run_both(path, tmp_path, [X], [_gelu_ref(X)])
    assert op_counts(text) == {"gelu": 1}, text


@pytest.mark.parametrize("cube", ["mul", "pow"])
def test_gelu_tanh_pattern(cube, tmp_path):
    if cube == "mul":  # torch's export: x * (x * x)
        nodes = [helper.make_node("Mul", ["x", "x"], ["x2"]),
                 helper.make_node("Mul", ["x", "x2"], ["x3"])]
    else:
        nodes = [_const("three", 3.0), helper.make_node("Pow", ["x", "three"], ["x3"])]
    nodes += [_const("k", 0.044715), helper.make_node("Mul", ["k", "x3"], ["kx3"]),
              helper.make_node("Add", ["x", "kx3"], ["inner"]),
              _const("c", np.sqrt(2 / np.pi)), helper.make_node("Mul", ["c", "inner"], ["arg"]),
              helper.make_node("Tanh", ["arg"], ["t"]), _const("one", 1.0),
              helper.make_node("Add", ["one", "t"], ["a"]),
              helper.make_node("Mul", ["x", "a"], ["m"]), _const("half", 0.5),
              helper.make_node("Mul", ["half", "m"], ["y"])]
    path = _model(tmp_path, nodes, [XIN], [YOUT])
    text, _ = _run_both(path, tmp_path, [X], [_gelu_ref(X, tanh=True)])
    assert op_counts(text) == {"gelu": 1}, text
    assert "approximate=1" in text


def test_erf_with_another_user_is_not_gelu(tmp_path):
    nodes = [_const("sqrt2", np.sqrt(2.0)), helper.make_node("Div", ["x", "sqrt2"], ["u"]),
             helper.make_node("Erf", ["u"], ["e"]), _const("one", 1.0),
             helper.make_node("Add", ["e", "one"], ["a"]),
             helper.make_node("Mul", ["x", "a"], ["m"]), _const("half", 0.5),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    e_out = helper.make_tensor_value_info("e", TensorProto.FLOAT, None)
    path = _model(tmp_path, nodes, [XIN], [YOUT, e_out])
    text, _ = _run_both(path, tmp_path, [X], [_gelu_ref(X), _erf(X / np.sqrt(2))])
    assert op_counts(text) == {"div": 1, "erf": 1, "add": 1, "mul": 2}


def test_softmax_before_opset_13_is_2d(tmp_path):
    """Opset 11 Softmax(axis=1) on [2, 3, 4] normalises over 12 elements per batch row."""
    x = (np.arange(24, dtype=np.float32).reshape(2, 3, 4) % 5) / 2
    node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    path = _model(tmp_path, [node], [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                    [2, 3, 4])], [YOUT], opset=11)
    flat = x.reshape(2, 12)
    e = np.exp(flat - flat.max(1, keepdims=True))
    text, _ = _run_both(path, tmp_path, [x], [(e / e.sum(1, keepdims=True)).reshape(2, 3, 4)])
    assert op_counts(text) == {"reshape": 2, "softmax": 1}


def test_causal_mask_over_a_symbolic_length(tmp_path):
    """torch.triu(torch.full((S, S), -inf), 1) exports as Shape -> Gather -> Concat ->
    ConstantOfShape -> Trilu: an expand of a scalar to [seq, seq], then trilu."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), _const("i1", [1], np.int64),
             helper.make_node("Gather", ["s", "i1"], ["len"]),
             helper.make_node("Concat", ["len", "len"], ["ss"], axis=0),
             helper.make_node("ConstantOfShape", ["ss"], ["full"],
                              value=numpy_helper.from_array(np.array([-np.inf], np.float32))),
             _const("k", 1, np.int64), helper.make_node("Trilu", ["full", "k"], ["mask"]),
             helper.make_node("Add", ["x", "mask"], ["y"])]
    xin = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", "seq"])
    path = _model(tmp_path, nodes, [xin], [YOUT], opset=14)
    x = np.ones((2, 4, 4), np.float32)
    text, _ = _run_both(path, tmp_path, [x], [x + np.triu(np.full((4, 4), -np.inf), 1)])
    assert "expand(%" in text and "shape=[seq, seq]" in text and "trilu(" in text
    assert op_counts(text) == {"expand": 1, "trilu": 1, "add": 1}


def test_torch_expand_with_minus_one_folds(tmp_path):
    """x.expand(-1, seq, -1) exports Where(Equal(shape, -1), ones, shape): the -1s fold to 1."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), _const("i1", [1], np.int64),
             helper.make_node("Gather", ["s", "i1"], ["len"]),
             _const("m1", [-1], np.int64),
             helper.make_node("Concat", ["m1", "len", "m1"], ["target"], axis=0),
             helper.make_node("Equal", ["target", "m1"], ["is_m1"]),
             _const("ones", [1, 1, 1], np.int64),
             helper.make_node("Where", ["is_m1", "ones", "target"], ["shape"]),
             helper.make_node("Expand", ["v", "shape"], ["y"])]
    xin = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])
    vin = helper.make_tensor_value_info("v", TensorProto.FLOAT, [3, 1, 2])
    path = _model(tmp_path, nodes, [xin, vin], [YOUT])
    x = np.zeros((2, 5), np.float32)
    v = np.arange(6, dtype=np.float32).reshape(3, 1, 2)
    text, _ = _run_both(path, tmp_path, [x, v], [np.broadcast_to(v, (3, 5, 2))])
    assert "expand(%v, shape=[1, seq, 1])" in text


def test_where_cast_and_runtime_bool(tmp_path):
    # A mask known at import becomes an i32 const; Cast of a run-time tensor is a cast op.
    mask = np.array([[True, False, True]])
    nodes = [helper.make_node("Cast", ["ids"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Where", ["mask", "f", "zero"], ["y"])]
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 3])
    path = _model(tmp_path, nodes, [ids], [YOUT],
                  [numpy_helper.from_array(mask, "mask"),
                   numpy_helper.from_array(np.array(0, np.float32), "zero")])
    v = np.array([[4, 5, 6], [7, 8, 9]], np.int64)
    text, _ = _run_both(path, tmp_path, [v], [np.where(mask, v.astype(np.float32), 0)])
    assert op_counts(text) == {"cast": 1, "where": 1}
    assert "const i32[1, 3]" in text
    # A condition computed at run time is a bool tensor gearbox cannot hold.
    nodes = [helper.make_node("Cast", ["ids"], ["b"], to=TensorProto.BOOL),
             helper.make_node("Where", ["b", "ids", "ids"], ["y"])]
    path = _model(tmp_path, nodes, [ids], [YOUT], name="bad")
    with pytest.raises(onnx_import.ImportFailure) as e:
        im = onnx_import._Importer(onnx.load(path), "bad", None)
        im.ops = set(ALL_OPS)
        im.run()
    assert "(Cast: to=9 of a run-time tensor of element type 7" in str(e.value)


@pytest.mark.parametrize("which", ["prefix", "at_past"])
def test_position_table_sliced_by_a_symbolic_length(which, tmp_path):
    """pos[:seq] (a prefill) and pos[past:past + 1] (a decode step) export as a Slice of the
    table with bounds read from Shape: written as index_select with run-time indices
    start + arange(end - start) (gearbox's slice takes integer bounds)."""
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    nodes = [helper.make_node("Shape", ["x"], ["s"]), _const("i1", [1], np.int64),
             helper.make_node("Gather", ["s", "i1"], ["len"])]
    if which == "prefix":
        nodes += [_const("zero", [0], np.int64),
                  helper.make_node("Slice", ["pos", "zero", "len"], ["rows"])]
    else:
        nodes += [_const("one", [1], np.int64), helper.make_node("Add", ["len", "one"], ["end"]),
                  helper.make_node("Slice", ["pos", "len", "end"], ["rows"])]
    nodes += [helper.make_node("Add", ["e", "rows"], ["y"])]
    xin = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])
    ein = helper.make_tensor_value_info("e", TensorProto.FLOAT,
                                        ["batch", "seq" if which == "prefix" else 1, 4])
    path = _model(tmp_path, nodes, [xin, ein], [YOUT],
                  [numpy_helper.from_array(table, "pos")])
    for seq in (1, 3, 7):
        x = np.zeros((2, seq), np.float32)
        if which == "prefix":
            e = np.ones((2, seq, 4), np.float32)
            want = e + table[:seq]
        else:
            e = np.ones((2, 1, 4), np.float32)
            want = e + table[seq:seq + 1]
        text, _ = _run_both(path, tmp_path, [x, e], [want])
    assert "slice(" not in text and "index_select(%pos" in text
    assert ("trilu(" in text) == (which == "prefix")


# ---- review findings (the importer's transformer mappings) --------------------------------------


def _import_error(path):
    with pytest.raises(onnx_import.ImportFailure) as e:
        from test_import_models import import_text
        import_text(path)
    return str(e.value)


def test_folding_past_the_constant_limit_names_the_node_before_allocating(tmp_path):
    """Expand, ConstantOfShape and a broadcasting Add of known inputs are folded at import; a
    result above the limit of a constant (an initializer's, 4 GiB) is refused before NumPy makes
    it (these would be 40, 40 and 32 GB), naming the node."""
    limit = onnx_import.MAX_CONSTANT_BYTES
    cases = {
        "expand": [_const("shape", [100000, 100000], np.int64),
                   helper.make_node("Expand", ["one", "shape"], ["y"], name="big_expand")],
        "fill": [_const("shape", [100000, 100000], np.int64),
                 helper.make_node("ConstantOfShape", ["shape"], ["y"], name="big_fill",
                                  value=numpy_helper.from_array(np.ones(1, np.float32)))],
        "add": [_const("col", np.zeros((65536, 1)), np.int64),
                _const("row", np.zeros((1, 65536)), np.int64),
                helper.make_node("Add", ["col", "row"], ["y"], name="big_add")],
    }
    for which, nodes in cases.items():
        path = _model(tmp_path, [_const("one", 1.0)] + nodes, [], [YOUT], name=which)
        msg = _import_error(path)
        assert f"big_{which} (" in msg and f"above the limit of {limit} bytes" in msg, msg
    # Below the limit the same fold still happens.
    nodes = [_const("one", 1.0), _const("shape", [3, 2], np.int64),
             helper.make_node("Expand", ["one", "shape"], ["e"]),
             helper.make_node("Add", ["x", "e"], ["y"])]
    xin = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])
    path = _model(tmp_path, nodes, [xin], [YOUT], name="small")
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    text, _ = _run_both(path, tmp_path, [x], [x + 1])
    assert "expand(" not in text


def _symbolic_slice_model(tmp_path, table_dims, name):
    nodes = [helper.make_node("Shape", ["x"], ["s"]), _const("i1", [1], np.int64),
             helper.make_node("Gather", ["s", "i1"], ["len"]), _const("zero", [0], np.int64),
             helper.make_node("Slice", ["pos", "zero", "len"], ["y"], name="rows")]
    xin = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])
    pos = helper.make_tensor_value_info("pos", TensorProto.FLOAT, table_dims)
    return _model(tmp_path, nodes, [xin, pos], [YOUT], name=name)


def test_a_symbolic_slice_of_a_dim_past_f32s_exact_integers_is_refused(tmp_path):
    """The slice's indices are computed in f32 (reduce_sum), exact up to 2^24: a sliced dim that
    is symbolic or above 2^24 could select the wrong rows, so it is refused, naming the limit."""
    for dims, name in (([2**24 + 1, 4], "huge"), (["rows", 4], "symbolic")):
        msg = _import_error(_symbolic_slice_model(tmp_path, dims, name))
        assert "rows (Slice: a slice of dim 0" in msg and "2^24 = 16777216" in msg, msg
    # At 2^24 exactly it is written (import only: the table would be 256 MB).
    from test_import_models import import_text
    text, _ = import_text(_symbolic_slice_model(tmp_path, [2**24, 4], "limit"))
    assert "index_select(%pos" in text


def test_expand_records_the_dims_gearbox_infers(tmp_path):
    """Where x's dim is a size and the target's a symbol (or the other way), gearbox's expand
    infers the size (graph/ops/expand.cpp): the importer's record of the output must too, or the
    shapes it folds downstream are not the model's. x [3, 4] to [n, 4] is [3, 4] (n is 1 or 3);
    v [n, 4] to [3, 4] is [3, 4]."""
    nodes = [helper.make_node("Shape", ["v"], ["s"]), _const("i0", [0], np.int64),
             helper.make_node("Gather", ["s", "i0"], ["n"]), _const("four", [4], np.int64),
             helper.make_node("Concat", ["n", "four"], ["target"], axis=0),
             helper.make_node("Expand", ["x", "target"], ["ex"]),
             _const("t34", [3, 4], np.int64), helper.make_node("Expand", ["v", "t34"], ["ev"]),
             helper.make_node("Add", ["ex", "ev"], ["y"])]
    xin = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
    vin = helper.make_tensor_value_info("v", TensorProto.FLOAT, ["n", 4])
    path = _model(tmp_path, nodes, [xin, vin], [YOUT])
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for n in (1, 3):
        v = np.ones((n, 4), np.float32)
        _, im = _run_both(path, tmp_path, [x, v], [x + np.broadcast_to(v, (3, 4))])
    assert im.shapes["ex"] == [3, 4] and im.shapes["ev"] == [3, 4]
    assert im.shapes["y"] == [3, 4]


def test_a_pattern_constant_of_a_higher_rank_than_x_is_not_fused(tmp_path):
    """0.5 as a [1, 1, 1, 1] constant makes the GELU of x [batch, seq, 8] a [1, batch, seq, 8]
    tensor; gelu(x) would keep rank 3. Such a pattern is imported node by node (and matches
    NumPy); of rank <= x's it is still one gelu / layer_norm."""
    def gelu(half_shape, eps_shape, name):
        nodes = [_const("sqrt2", np.sqrt(2.0)), helper.make_node("Div", ["x", "sqrt2"], ["u"]),
                 helper.make_node("Erf", ["u"], ["e"]), _const("one", 1.0),
                 helper.make_node("Add", ["e", "one"], ["a"]),
                 _const("half", np.full(half_shape, 0.5)),
                 helper.make_node("Mul", ["x", "a"], ["m"]),
                 helper.make_node("Mul", ["m", "half"], ["g"])]
        nodes += [n for n in _ln_nodes(x="g", affine=False) if n.output[0] != "eps"]
        nodes.insert(len(nodes) - 3, _const("eps", np.full(eps_shape, 1e-5)))
        return _model(tmp_path, nodes, [XIN], [YOUT], name=name)

    g = _gelu_ref(X)
    text, _ = _run_both(gelu([1, 1, 1, 1], [], "high_half"), tmp_path, [X],
                        [_ln_ref(g.reshape(1, 2, 5, 8))])
    assert "gelu" not in op_counts(text) and op_counts(text)["layer_norm"] == 1, text
    text, _ = _run_both(gelu([], [1, 1, 1, 1], "high_eps"), tmp_path, [X],
                        [_ln_ref(g).reshape(1, 2, 5, 8)])
    assert "layer_norm" not in op_counts(text) and op_counts(text)["gelu"] == 1, text
    text, _ = _run_both(gelu([1, 1, 1], [1, 1], "ok"), tmp_path, [X], [_ln_ref(g)])
    assert op_counts(text) == {"gelu": 1, "layer_norm": 1}, text


@pytest.mark.parametrize("eps", [0.0, -1.0, float("inf"), float("nan"), 1e300])
def test_layer_norm_epsilon_is_checked_at_import_naming_the_node(eps, tmp_path):
    """ONNX's LayerNormalization attribute (an f32: 1e300 is inf there) and the decomposed
    form's constant (here an f64 holding 1e300, finite but inf as the f32 the kernel adds): not
    > 0 and finite as an f32 is an error naming the node, not a model that fails to verify
    (or divides by sqrt(0))."""
    ln = helper.make_node("LayerNormalization", ["x", "w"], ["y"], name="ln", axis=-1,
                          epsilon=eps)
    path = _model(tmp_path, [ln], [XIN], [YOUT], [numpy_helper.from_array(W, "w")], opset=17,
                  name="ln17")
    msg = _import_error(path)
    assert "ln (LayerNormalization: attribute epsilon is " in msg and "finite as an f32" in msg, \
        msg
    nodes = [n if n.output[0] != "eps" else _const("eps", eps, np.float64)
             for n in _ln_nodes(affine=False)]
    msg = _import_error(_model(tmp_path, nodes, [XIN], [YOUT], name="decomposed"))
    assert "div (Div: epsilon (input 1, eps, of Add node 'add_eps') is " in msg, msg


def test_an_exception_in_a_pattern_matcher_names_the_node(tmp_path):
    """ReduceMean's axes (opset 18, an input) as a float constant holding NaN: the LayerNorm
    matcher cannot read them. The error names the node it matched from, not just the Python
    exception."""
    nodes = _ln_nodes(affine=False)
    nodes = [_const("axes", [np.nan])] + [
        helper.make_node("ReduceMean", [n.input[0], "axes"], n.output, name=n.name)
        if n.op_type == "ReduceMean" else n for n in nodes]
    msg = _import_error(_model(tmp_path, nodes, [XIN], [YOUT], opset=18))
    assert "node 'div' (Div): malformed where the layer_norm pattern was matched from it: " \
           "ValueError" in msg, msg
