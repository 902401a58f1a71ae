"""ONNX import (docs/import.md): models built here with onnx.helper, imported through the CLI
(`gearbox import`) and the module, evaluated with gearbox and compared with NumPy."""
import os
import subprocess

import numpy as np
import pytest

import gearbox

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def save(model_graph, path):
    model = helper.make_model(model_graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def gbx_import(cli, env, model, out):
    return subprocess.run([cli, "import", model, "-o", str(out)], capture_output=True, text=True,
                          env=env)


def run(g, *inputs):
    s = gearbox.Session(g, mode="static")
    return s.run(*inputs)


def test_add_matmul_concat_gather_constants_symbols(tmp_path, cli, env):
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 8
    nodes = [
        helper.make_node("Add", ["x", "x"], ["s"], name="add0"),
        helper.make_node("MatMul", ["s", "w"], ["m"], name="mm"),
        helper.make_node("Constant", [], ["bias"], name="c0",
                         value=numpy_helper.from_array(np.full((3,), 0.5, np.float32))),
        helper.make_node("Add", ["m", "bias"], ["mb"], name="add1"),
        helper.make_node("Concat", ["mb", "s"], ["c"], name="cat", axis=1),
        # ONNX negative indices count from the end: -1 is the last column.
        helper.make_node("Gather", ["c", "idx"], ["o"], name="gather", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "demo",
        [helper.make_tensor_value_info("x", F, ["batch", 4])],
        [helper.make_tensor_value_info("o", F, ["batch", 3])],
        initializer=[numpy_helper.from_array(w, "w"),
                     numpy_helper.from_array(np.array([-1, 0, 3], np.int64), "idx")],
    )
    model = save(graph, tmp_path / "demo.onnx")
    out = tmp_path / "demo.gbx"
    proc = gbx_import(cli, env, model, out)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "%x: f32[batch, 4]" in text  # dim_param -> a named symbol
    assert sorted(p for p in os.listdir(tmp_path) if p.endswith(".npy")) == [
        "demo.bias.npy", "demo.idx.npy", "demo.idx.wrapped.npy", "demo.w.npy"]
    g = gearbox.load(str(out))
    for rows in (1, 2, 5):
        x = np.random.default_rng(rows).standard_normal((rows, 4)).astype(np.float32)
        s = x + x
        c = np.concatenate([s @ w + 0.5, s], axis=1)
        expect = c[:, [6, 0, 3]]
        (y,) = run(g, x)
        np.testing.assert_allclose(y, expect, rtol=1e-5, atol=1e-5)


def test_gemm_folds_transpose_and_scales(tmp_path):
    b = np.arange(6, dtype=np.float32).reshape(3, 2)  # [N, K], used transposed
    c = np.array([1.0, -1.0, 2.0], np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="fc", transB=1, alpha=0.5,
                          beta=2.0)],
        "gemm",
        [helper.make_tensor_value_info("a", F, ["N", 2])],
        [helper.make_tensor_value_info("y", F, ["N", 3])],
        initializer=[numpy_helper.from_array(b, "b"), numpy_helper.from_array(c, "c")],
    )
    model = save(graph, tmp_path / "gemm.onnx")
    from gearbox import onnx_import

    onnx_import.import_model(model, str(tmp_path / "gemm.gbx"))
    g = gearbox.load(str(tmp_path / "gemm.gbx"))
    a = np.random.default_rng(0).standard_normal((5, 2)).astype(np.float32)
    (y,) = run(g, a)
    np.testing.assert_allclose(y, 0.5 * a @ b.T + 2.0 * c, rtol=1e-5, atol=1e-5)


def test_unsupported_nodes_all_listed_nothing_written(tmp_path, cli, env):
    nodes = [
        helper.make_node("Sin", ["x"], ["a"], name="sin"),
        helper.make_node("Floor", ["a"], ["b"], name="floor"),
        helper.make_node("Add", ["b", "x"], ["y"], name="ok"),
    ]
    graph = helper.make_graph(nodes, "bad", [helper.make_tensor_value_info("x", F, [2, 3])],
                              [helper.make_tensor_value_info("y", F, [2, 3])])
    model = save(graph, tmp_path / "bad.onnx")
    outdir = tmp_path / "out"
    outdir.mkdir()
    proc = gbx_import(cli, env, model, outdir / "bad.gbx")
    assert proc.returncode == 2
    assert "2 unsupported node(s)" in proc.stderr
    assert "sin (Sin" in proc.stderr and "floor (Floor" in proc.stderr
    assert proc.stderr.startswith("gearbox: parse error: ")
    assert os.listdir(outdir) == []


def test_missing_model_is_an_io_error(tmp_path, cli, env):
    proc = gbx_import(cli, env, str(tmp_path / "none.onnx"), tmp_path / "x.gbx")
    assert proc.returncode == 2
    assert proc.stderr.startswith("gearbox: I/O error: cannot read")
    assert os.listdir(tmp_path) == []


def test_gather_negative_index_out_of_range_listed(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Gather", ["x", "idx"], ["y"], name="g", axis=0)], "g",
        [helper.make_tensor_value_info("x", F, [3, 2])],
        [helper.make_tensor_value_info("y", F, [1, 2])],
        initializer=[numpy_helper.from_array(np.array([-4], np.int64), "idx")],
    )
    model = save(graph, tmp_path / "g.onnx")
    from gearbox import onnx_import

    with pytest.raises(onnx_import.ImportFailure, match=r"g \(Gather: an index outside \[-3, 3\)"):
        onnx_import.import_model(model, str(tmp_path / "g.gbx"))
    assert not (tmp_path / "g.gbx").exists()


# Ops that come from the "one op, one place" stream: mapped when this build has them, and
# otherwise reported as unsupported naming the gearbox op they need.
NEW_OPS = {
    "mul": (helper.make_node("Mul", ["x", "x"], ["y"], name="n"), [2, 3], lambda x: x * x),
    "relu": (helper.make_node("Relu", ["x"], ["y"], name="n"), [2, 3], lambda x: np.maximum(x, 0)),
    "transpose": (helper.make_node("Transpose", ["x"], ["y"], name="n", perm=[1, 0]), [3, 2],
                  lambda x: x.T),
    "reshape": (helper.make_node("Reshape", ["x", "shape"], ["y"], name="n"), [3, 2],
                lambda x: x.reshape(3, 2)),
}


@pytest.mark.parametrize("op", sorted(NEW_OPS))
def test_new_ops_mapped_or_reported(op, tmp_path):
    node, out_shape, fn = NEW_OPS[op]
    inits = [numpy_helper.from_array(np.array([-1, 2], np.int64), "shape")] if op == "reshape" else []
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info("x", F, [2, 3])],
                              [helper.make_tensor_value_info("y", F, out_shape)],
                              initializer=inits)
    model = save(graph, tmp_path / f"{op}.onnx")
    from gearbox import onnx_import

    out = str(tmp_path / f"{op}.gbx")
    if op not in gearbox.op_names():
        with pytest.raises(onnx_import.ImportFailure, match=f"needs gearbox op {op}"):
            onnx_import.import_model(model, out)
        return
    onnx_import.import_model(model, out)
    x = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
    (y,) = run(gearbox.load(out), x)
    np.testing.assert_allclose(y, fn(x), rtol=1e-6)


def test_matmul_1d(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["v", "w"], ["y"], name="mv")], "mv",
        [helper.make_tensor_value_info("v", F, [4])],
        [helper.make_tensor_value_info("y", F, [3])],
        initializer=[numpy_helper.from_array(np.ones((4, 3), np.float32), "w")],
    )
    model = save(graph, tmp_path / "mv.onnx")
    from gearbox import onnx_import

    out = str(tmp_path / "mv.gbx")
    try:
        onnx_import.import_model(model, out)
    except onnx_import.ImportFailure as e:
        # This build's matmul needs rank >= 2: reported as unsupported, nothing written.
        assert "mv (MatMul: a 1-D input" in str(e)
        assert not os.path.exists(out)
        return
    v = np.arange(4, dtype=np.float32)
    (y,) = run(gearbox.load(out), v)
    np.testing.assert_allclose(y, v @ np.ones((4, 3), np.float32))


def test_torch_shufflenet_unit(tmp_path):
    """A ShuffleNet-like unit exported by torch.onnx.export, imported and evaluated equal to
    PyTorch. Runs where Debian's python3-torch is installed (not installed by
    install-deps.sh: several hundred MB)."""
    torch = pytest.importorskip("torch")
    # Relu comes with the "one op, one place" work; before it lands the unit runs without it.
    act = torch.relu if "relu" in gearbox.op_names() else (lambda t: t)

    class Unit(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = torch.nn.Parameter(torch.randn(8, 8) / 4)
            self.w2 = torch.nn.Parameter(torch.randn(8, 8) / 4)

        def forward(self, x):  # x: [N, 16]; split, transform one half, concat, shuffle
            # The split as index_select (exported as Gather): gearbox has no Slice.
            a = torch.index_select(x, 1, torch.arange(0, 8))
            b = torch.index_select(x, 1, torch.arange(8, 16))
            b = act(b @ self.w1) @ self.w2
            y = torch.cat([a, b], dim=1)
            perm = torch.tensor([i * 2 + j for j in range(2) for i in range(8)])
            return torch.index_select(y, 1, perm)

    unit = Unit().eval()
    x = torch.randn(3, 16)
    path = str(tmp_path / "unit.onnx")
    torch.onnx.export(unit, (x,), path, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "N"}}, opset_version=13)
    from gearbox import onnx_import

    onnx_import.import_model(path, str(tmp_path / "unit.gbx"))
    g = gearbox.load(str(tmp_path / "unit.gbx"))
    for n in (1, 3, 5):
        xv = torch.randn(n, 16)
        (y,) = run(g, xv.numpy())
        np.testing.assert_allclose(y, unit(xv).detach().numpy(), rtol=1e-5, atol=1e-5)
