"""ONNX's own backend node tests (Debian's libonnx-testdata) for every ONNX op type the importer
maps: each case's model.onnx is imported and run on test_data_set_0's inputs, and compared with
its outputs (onnx's backend-test tolerances: rtol=1e-3, atol=1e-7).

A case belongs to op X when its directory is test_<x>[_...] (the ONNX naming, NODE_PREFIXES) and
its model has an X node. Each case runs two ways:

  test_node_import   the importer alone: the IR text is evaluated with torch.nn.functional
                     (test_import_models.evaluate_ir), as if this build had every gearbox op;
  test_node_gearbox  `import_model` + gearbox.Session (static mode): skipped, naming the ops,
                     while this build lacks an op the case needs.

Many node tests feed what gearbox takes as attributes (Reshape's shape, Slice's starts, Clip's
min, Pad's pads, ...) as graph inputs. Such a case runs as is (the import refuses it: a run-time
shape) and again as "<case>[frozen]": those inputs become initializers holding the test's
values, which is what a real export has (Constant nodes).

EXPECTED_FAIL lists every case that does not pass, with the ONNX feature it needs; docs/import.md
carries the same list. A listed case that passes fails the test (the list must shrink), as does
an unlisted case that fails.
"""
import glob
import os
import re

import numpy as np
import pytest

import gearbox

onnx = pytest.importorskip("onnx")
from onnx import numpy_helper  # noqa: E402

from gearbox import onnx_import  # noqa: E402

NODE_DIR = "/usr/share/libonnx-testdata/data/node"
RTOL, ATOL = 1e-3, 1e-7

# ONNX op type -> the directory prefixes of its node tests.
NODE_PREFIXES = {
    "Add": ["add"], "Mul": ["mul"], "Sub": ["sub"], "Div": ["div"], "Relu": ["relu"],
    "Sigmoid": ["sigmoid"], "MatMul": ["matmul"], "Gemm": ["gemm"], "Gather": ["gather"],
    "Concat": ["concat"], "Reshape": ["reshape"], "Transpose": ["transpose"], "Conv": ["conv"],
    "MaxPool": ["maxpool"], "AveragePool": ["averagepool"],
    "GlobalAveragePool": ["globalaveragepool"], "ReduceMean": ["reduce_mean"],
    "BatchNormalization": ["batchnorm"], "Clip": ["clip"], "Flatten": ["flatten"],
    "Slice": ["slice"], "Split": ["split"], "Squeeze": ["squeeze"], "Unsqueeze": ["unsqueeze"],
    "Pad": ["pad", "constant_pad"], "Identity": ["identity"], "Cast": ["cast"],
    "Constant": ["constant"], "Shape": ["shape"], "ConstantOfShape": ["constantofshape"],
    # issue 24
    "Pow": ["pow"], "Sqrt": ["sqrt"], "Erf": ["erf"], "Tanh": ["tanh"], "Softmax": ["softmax"],
    "LayerNormalization": ["layer_normalization"], "ReduceSum": ["reduce_sum"],
    "Where": ["where"], "Expand": ["expand"], "Trilu": ["tril", "triu"], "Equal": ["equal"],
}

# Inputs gearbox takes as attributes: (op type, input index). Frozen in the [frozen] variant.
PARAM_INPUTS = {("Reshape", 1), ("Slice", 1), ("Slice", 2), ("Slice", 3), ("Slice", 4),
                ("Split", 1), ("Squeeze", 1), ("Unsqueeze", 1), ("Pad", 1), ("Pad", 2),
                ("Pad", 3), ("Clip", 1), ("Clip", 2), ("ConstantOfShape", 0),
                ("ReduceMean", 1), ("ReduceSum", 1), ("Expand", 1), ("Trilu", 1)}

# Why a case fails: (the ONNX feature it needs, a text its failure must contain, so a listed case
# failing for another reason is caught too).
RUNTIME_SHAPE = ("an attribute-like input (shape, starts, axes, pads, min/max, split) fed at run "
                 "time; gearbox takes it as an attribute", "is not a constant (a graph input)")
UINT8 = ("uint8 tensors (gearbox has f32, i32, i64)", "element type 2")
INT8 = ("int8 tensors", "element type 3")
OPTIONAL = ("optional and sequence values", "element type 0")
DOUBLE = ("float64 tensors", "element type 11")
F16 = ("float16 / bfloat16 tensors", "element type 1")
STRING = ("string tensors", "element type 8")
CAST_TO = ("Cast to a type gearbox lacks (float16, bfloat16, float64, string)", "Cast: to=")
WINDOW_RANK = ("1-D and 3-D windows (gearbox conv2d and pools are 2-D)", "takes 2-D kernels only")
TRAINING = ("BatchNormalization training_mode=1", "training_mode=1")
ARGMAX = ("MaxPool's Indices output", "the Indices output")
BOOL = ("bool tensors (gearbox has no bool dtype)", "element type 9")
RUNTIME_BOOL = ("a bool result computed at run time (gearbox has no bool dtype)",
                "gearbox has no bool dtype")
UINT32 = ("uint32 / uint64 tensors", "element type 1")
INT_POW = ("Pow with an integer base or a run-time integer exponent (gearbox's pow is f32)",
           "gearbox pow takes f32")
RUNTIME_FILL = ("ConstantOfShape of a run-time shape", "a shape computed at run time")
EMPTY = ("an empty tensor from allowzero=1", "allowzero=1 with a 0 in shape")
BIG_POOL_PADS = ("pool pads larger than half the kernel (gearbox's pools take PyTorch's limit)",
                 "exceed half the kernel")

EXPECTED_FAIL = {
    "test_add_uint8": UINT8,
    "test_averagepool_1d_default": WINDOW_RANK,
    "test_averagepool_2d_pads": BIG_POOL_PADS,
    "test_averagepool_2d_pads_count_include_pad": BIG_POOL_PADS,
    "test_averagepool_3d_default": WINDOW_RANK,
    "test_batchnorm_epsilon_training_mode": TRAINING,
    "test_batchnorm_example_training_mode": TRAINING,
    "test_cast_BFLOAT16_to_FLOAT": F16,
    "test_cast_DOUBLE_to_FLOAT": DOUBLE,
    "test_cast_DOUBLE_to_FLOAT16": DOUBLE,
    "test_cast_FLOAT16_to_DOUBLE": F16,
    "test_cast_FLOAT16_to_FLOAT": F16,
    "test_cast_FLOAT_to_BFLOAT16": CAST_TO,
    "test_cast_FLOAT_to_DOUBLE": CAST_TO,
    "test_cast_FLOAT_to_FLOAT16": CAST_TO,
    "test_cast_FLOAT_to_STRING": CAST_TO,
    "test_cast_STRING_to_FLOAT": STRING,
    "test_clip": RUNTIME_SHAPE,
    "test_clip_default_int8_inbounds": INT8,
    "test_clip_default_int8_max": INT8,
    "test_clip_default_int8_max[frozen]": INT8,
    "test_clip_default_int8_min": INT8,
    "test_clip_default_int8_min[frozen]": INT8,
    "test_clip_default_max": RUNTIME_SHAPE,
    "test_clip_default_min": RUNTIME_SHAPE,
    "test_clip_example": RUNTIME_SHAPE,
    "test_clip_inbounds": RUNTIME_SHAPE,
    "test_clip_outbounds": RUNTIME_SHAPE,
    "test_clip_splitbounds": RUNTIME_SHAPE,
    "test_constant_pad": RUNTIME_SHAPE,
    "test_constantofshape_float_ones": RUNTIME_FILL,
    "test_constantofshape_int_shape_zero": RUNTIME_FILL,
    "test_constantofshape_int_zeros": RUNTIME_FILL,
    "test_div_uint8": UINT8,
    "test_equal": RUNTIME_BOOL,
    "test_equal_bcast": RUNTIME_BOOL,
    "test_expand_dim_changed": RUNTIME_SHAPE,
    "test_expand_dim_unchanged": RUNTIME_SHAPE,
    "test_identity_opt": OPTIONAL,
    "test_identity_sequence": OPTIONAL,
    "test_maxpool_1d_default": WINDOW_RANK,
    "test_maxpool_2d_pads": BIG_POOL_PADS,
    "test_maxpool_2d_uint8": UINT8,
    "test_maxpool_3d_default": WINDOW_RANK,
    "test_maxpool_with_argmax_2d_precomputed_pads": ARGMAX,
    "test_maxpool_with_argmax_2d_precomputed_strides": ARGMAX,
    "test_mul_uint8": UINT8,
    "test_pow_types_float": INT_POW,
    "test_pow_types_float32_int32": INT_POW,
    "test_pow_types_float32_int64": INT_POW,
    "test_pow_types_float32_uint32": UINT32,
    "test_pow_types_float32_uint64": UINT32,
    "test_pow_types_int": INT_POW,
    "test_pow_types_int32_float32": INT_POW,
    "test_pow_types_int32_int32": INT_POW,
    "test_pow_types_int64_float32": INT_POW,
    "test_pow_types_int64_int64": INT_POW,
    "test_reduce_sum_default_axes_keepdims_example": RUNTIME_SHAPE,
    "test_reduce_sum_default_axes_keepdims_random": RUNTIME_SHAPE,
    "test_reduce_sum_do_not_keepdims_example": RUNTIME_SHAPE,
    "test_reduce_sum_do_not_keepdims_random": RUNTIME_SHAPE,
    "test_reduce_sum_empty_axes_input_noop_example": RUNTIME_SHAPE,
    "test_reduce_sum_empty_axes_input_noop_random": RUNTIME_SHAPE,
    "test_reduce_sum_keepdims_example": RUNTIME_SHAPE,
    "test_reduce_sum_keepdims_random": RUNTIME_SHAPE,
    "test_reduce_sum_negative_axes_keepdims_example": RUNTIME_SHAPE,
    "test_reduce_sum_negative_axes_keepdims_random": RUNTIME_SHAPE,
    "test_reshape_allowzero_reordered": RUNTIME_SHAPE,
    "test_reshape_allowzero_reordered[frozen]": EMPTY,
    "test_reshape_extended_dims": RUNTIME_SHAPE,
    "test_reshape_negative_dim": RUNTIME_SHAPE,
    "test_reshape_negative_extended_dims": RUNTIME_SHAPE,
    "test_reshape_one_dim": RUNTIME_SHAPE,
    "test_reshape_reduced_dims": RUNTIME_SHAPE,
    "test_reshape_reordered_all_dims": RUNTIME_SHAPE,
    "test_reshape_reordered_last_dims": RUNTIME_SHAPE,
    "test_reshape_zero_and_negative_dim": RUNTIME_SHAPE,
    "test_reshape_zero_dim": RUNTIME_SHAPE,
    "test_slice": RUNTIME_SHAPE,
    "test_slice_default_axes": RUNTIME_SHAPE,
    "test_slice_default_steps": RUNTIME_SHAPE,
    "test_slice_end_out_of_bounds": RUNTIME_SHAPE,
    "test_slice_neg": RUNTIME_SHAPE,
    "test_slice_neg_steps": RUNTIME_SHAPE,
    "test_slice_negative_axes": RUNTIME_SHAPE,
    "test_slice_start_out_of_bounds": RUNTIME_SHAPE,
    "test_split_variable_parts_1d": RUNTIME_SHAPE,
    "test_split_variable_parts_2d": RUNTIME_SHAPE,
    "test_split_variable_parts_default_axis": RUNTIME_SHAPE,
    "test_split_zero_size_splits": RUNTIME_SHAPE,
    "test_squeeze": RUNTIME_SHAPE,
    "test_squeeze_negative_axes": RUNTIME_SHAPE,
    "test_sub_uint8": UINT8,
    "test_tril_neg": RUNTIME_SHAPE,
    "test_tril_out_neg": RUNTIME_SHAPE,
    "test_tril_out_pos": RUNTIME_SHAPE,
    "test_tril_pos": RUNTIME_SHAPE,
    "test_tril_square_neg": RUNTIME_SHAPE,
    "test_tril_zero": RUNTIME_SHAPE,
    "test_triu_neg": RUNTIME_SHAPE,
    "test_triu_one_row": RUNTIME_SHAPE,
    "test_triu_out_neg_out": RUNTIME_SHAPE,
    "test_triu_out_pos": RUNTIME_SHAPE,
    "test_triu_pos": RUNTIME_SHAPE,
    "test_triu_square_neg": RUNTIME_SHAPE,
    "test_triu_zero": RUNTIME_SHAPE,
    "test_unsqueeze_axis_0": RUNTIME_SHAPE,
    "test_unsqueeze_axis_1": RUNTIME_SHAPE,
    "test_unsqueeze_axis_2": RUNTIME_SHAPE,
    "test_unsqueeze_negative_axes": RUNTIME_SHAPE,
    "test_unsqueeze_three_axes": RUNTIME_SHAPE,
    "test_unsqueeze_two_axes": RUNTIME_SHAPE,
    "test_unsqueeze_unsorted_axes": RUNTIME_SHAPE,
    "test_where_example": BOOL,
    "test_where_long_example": BOOL,
}


def _cases():
    if not os.path.isdir(NODE_DIR):
        return []
    out = []
    mapped = set(onnx_import.OPS)
    for d in sorted(glob.glob(os.path.join(NODE_DIR, "test_*"))):
        case = os.path.basename(d)
        ops = [op for op, prefixes in NODE_PREFIXES.items() if op in mapped and any(
            case == f"test_{p}" or case.startswith(f"test_{p}_") for p in prefixes)]
        if not ops:
            continue
        model = onnx.load(os.path.join(d, "model.onnx"))
        types = {n.op_type for n in model.graph.node}
        if not any(op in types for op in ops):
            continue  # test_gather_elements_0 is GatherElements, not Gather
        out.append(case)
        if _param_inputs(model):
            out.append(case + "[frozen]")
    return out


def _param_inputs(model):
    graph_inputs = {vi.name for vi in model.graph.input}
    names = []
    for n in model.graph.node:
        for i, name in enumerate(n.input):
            if (n.op_type, i) in PARAM_INPUTS and name in graph_inputs and name not in names:
                names.append(name)
    return names


def _load_case(case):
    frozen = case.endswith("[frozen]")
    d = os.path.join(NODE_DIR, case.replace("[frozen]", ""))
    model = onnx.load(os.path.join(d, "model.onnx"))
    data = os.path.join(d, "test_data_set_0")

    def read(kind):
        arrays = []
        for k in range(len(glob.glob(os.path.join(data, f"{kind}_*.pb")))):
            t = onnx.TensorProto()
            with open(os.path.join(data, f"{kind}_{k}.pb"), "rb") as f:
                t.ParseFromString(f.read())
            try:
                arrays.append(numpy_helper.to_array(t))
            except ValueError:  # an optional or sequence value, not a tensor
                arrays.append(None)
        return arrays

    inputs, outputs = read("input"), read("output")
    if frozen:
        params = _param_inputs(model)
        keep = []
        for vi, a in zip(list(model.graph.input), inputs):
            if vi.name in params:
                model.graph.initializer.append(numpy_helper.from_array(a, vi.name))
                model.graph.input.remove(vi)
            else:
                keep.append(a)
        inputs = keep
    return model, inputs, outputs


def _compare(got, expected):
    assert all(e is not None for e in expected), "an output that is not a tensor"
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape, f"shape {g.shape} != {e.shape}"
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL)


CASES = _cases()


def _outcome(run):
    """None if `run` passes, else the failure's text."""
    try:
        run()
        return None
    except Exception as e:  # any failure; _judge checks it is the listed one
        return f"{type(e).__name__}: {e}"


def _judge(case, failure):
    if case in EXPECTED_FAIL:
        reason, text = EXPECTED_FAIL[case]
        assert failure is not None, (f"{case} passes now: remove it from EXPECTED_FAIL (and "
                                     "docs/import.md)")
        assert text.lower() in failure.lower(), (
            f"{case} is listed as needing {reason}, but fails otherwise: {failure}")
        return
    assert failure is None, failure


@pytest.mark.skipif(not CASES, reason=f"no ONNX node tests at {NODE_DIR} (libonnx-testdata)")
@pytest.mark.parametrize("case", CASES)
def test_node_import(case, tmp_path):
    from test_import_models import ALL_OPS, evaluate_ir

    model, inputs, outputs = _load_case(case)

    def run():
        im = onnx_import._Importer(model, "model", None)
        im.ops = set(ALL_OPS)
        text = im.run()
        for fname, arr in im.files.items():
            np.save(tmp_path / fname, arr)
        (tmp_path / "model.gbx").write_text(text)
        _compare(evaluate_ir(str(tmp_path / "model.gbx"), inputs), outputs)

    _judge(case, _outcome(run))


@pytest.mark.skipif(not CASES, reason=f"no ONNX node tests at {NODE_DIR} (libonnx-testdata)")
@pytest.mark.parametrize("case", CASES)
def test_node_gearbox(case, tmp_path):
    from test_import_models import ALL_OPS

    model, inputs, outputs = _load_case(case)
    im = onnx_import._Importer(model, "model", None)
    im.ops = set(ALL_OPS)
    try:
        im.run()
    except onnx_import.ImportFailure as e:
        _judge(case, str(e))  # refused by the importer whatever this build has
        return
    path = tmp_path / "case.onnx"
    onnx.save(model, str(path))
    try:
        onnx_import._Importer(model, "case", None).run()  # this build's ops
    except onnx_import.ImportFailure as e:
        if "not in this build" not in str(e):
            raise

        missing = sorted(set(re.findall(r"needs gearbox op (\w+)", str(e))))
        pytest.skip(f"this build lacks gearbox op(s) {', '.join(missing)} (issue 20, C++ side)")

    def run():
        onnx_import.import_model(str(path), str(tmp_path / "case.gbx"))
        s = gearbox.Session(gearbox.load(str(tmp_path / "case.gbx")), mode="static")
        _compare(s.run(*inputs), outputs)

    _judge(case, _outcome(run))


def test_expected_failures_are_documented():
    """docs/import.md's node-test table lists exactly the cases EXPECTED_FAIL lists."""
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "import.md")).read()
    section = doc[doc.index("## ONNX node tests"):]
    rows = [line.split("|")[3] for line in section.splitlines()
            if line.startswith("| ") and line.count("|") == 4 and "omitted" not in line]
    listed = {"test_" + c for row in rows for c in re.findall(r"`([^`]+)`", row)}
    assert listed == set(EXPECTED_FAIL)
