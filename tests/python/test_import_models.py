"""Real PyTorch exports imported (issue 20): torchvision's shufflenet_v2_x0_5, resnet18 and
mobilenet_v2, exported by scripts/export_models.py (seeded random weights, small widths, 64x64
images), imported, and checked two ways against torch's own output:

  1. the importer alone: the .gbx text is run by evaluate_ir below, an evaluator of the IR written
     with torch.nn.functional, so an importer bug (pads in the wrong order, a wrong folded
     shape) shows up even where this build lacks the CNN ops. The node counts of each import are
     pinned: they say what folding removed.
  2. end to end: `gearbox import` (the CLI) and gearbox.Session in every mode. Skipped, saying
     which ops, while this build lacks ops the import needs.

Tolerances: float32 throughout; outputs agree with torch within rtol=1e-4, atol=1e-5 (the
models' outputs are O(1); a summation-order difference in a 576-term conv dot product is ~1e-6).
Skipped without python3-torch / python3-torchvision."""
import collections
import importlib.util
import json
import os
import re
import subprocess

import numpy as np
import pytest

import gearbox

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from gearbox import onnx_import  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RTOL, ATOL = 1e-4, 1e-5
SIZE, BATCH = 64, 2

# Every gearbox op the importer can write (python/gearbox/onnx_import.py's OPS rows): the
# importer-only checks pretend the build has all of them, since they never run gearbox.
ALL_OPS = sorted({op for needs, _ in onnx_import.OPS.values() for op in needs}
                 | {"const", "squeeze", "unsqueeze", "reshape", "flatten", "gather", "cast",
                    "expand", "layer_norm", "gelu"})

# Per model: ONNX nodes of the export, then the IR it imports to (ops by kind; consts apart).
# shufflenet: 700 of 886 nodes are shape arithmetic (Shape, Gather, Unsqueeze, Concat, Div,
# Cast, Mul, Add, Slice on shapes, Constant): all folded, none written.
EXPECTED = {
    "shufflenet_v2_x0_5": (886, {"conv2d": 56, "relu": 37, "max_pool2d": 1, "cat": 16,
                                 "reshape": 32, "transpose": 16, "slice": 26, "mean": 1,
                                 "matmul": 1, "add": 1}),
    "resnet18": (49, {"conv2d": 20, "relu": 17, "max_pool2d": 1, "add": 9, "mean": 1,
                      "flatten": 1, "matmul": 1}),
    "mobilenet_v2": (171, {"conv2d": 52, "clip": 35, "add": 12, "mean": 1, "flatten": 1,
                           "matmul": 1}),
}


def _export_module():
    spec = importlib.util.spec_from_file_location(
        "export_models", os.path.join(REPO, "scripts", "export_models.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """{(model, variant): directory}: variant "batch" (dim 0 dynamic), "hw" (dims 0, 2, 3),
    "bn" (dims 0, 2, 3 and BatchNormalization kept)."""
    em = _export_module()
    out = {}
    for variant, kw in (("batch", {}), ("hw", {"dynamic_hw": True}),
                        ("bn", {"dynamic_hw": True, "keep_batchnorm": True})):
        d = str(tmp_path_factory.mktemp(variant))
        for name in em.MODELS:
            em.export(name, d, kw.get("dynamic_hw", False), "small", SIZE, BATCH,
                      kw.get("keep_batchnorm", False))
            out[(name, variant)] = d
    return out


def import_text(path, stem="model"):
    """The importer's IR text and the _Importer (files, counts), with every op available."""
    im = onnx_import._Importer(onnx.load(path), stem, None)
    im.ops = set(ALL_OPS)
    return im.run(), im


def write_import(path, out_dir):
    text, im = import_text(path)
    for fname, arr in im.files.items():
        np.save(os.path.join(out_dir, fname), arr)
    gbx = os.path.join(out_dir, "model.gbx")
    with open(gbx, "w") as f:
        f.write(text)
    return gbx, text, im


def op_counts(text):
    ops = collections.Counter(re.findall(r"^  %\S+ = (\w+)", text, re.M))
    ops.pop("const", None)
    return dict(ops)


def torch_model(name):
    return _export_module().build(name, "small")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_import_counts_and_importer_numerics(name, exports, tmp_path):
    d = exports[(name, "batch")]
    nodes, expected_ops = EXPECTED[name]
    assert len(onnx.load(os.path.join(d, f"{name}.onnx")).graph.node) == nodes
    gbx, text, im = write_import(os.path.join(d, f"{name}.onnx"), str(tmp_path))
    assert op_counts(text) == expected_ops
    assert "%x: f32[batch, 3, 64, 64]" in text
    # Nothing of the shape arithmetic survives: no integer tensor is computed at run time.
    assert " i64[" not in text.replace("const i64[", "")
    x, y = (np.load(os.path.join(d, f"{name}.{k}.npy")) for k in "xy")
    (out,) = evaluate_ir(gbx, [x])
    np.testing.assert_allclose(out, y, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_importer_shapes_agree_with_onnx_shape_inference(name, exports):
    """The importer's own shape inference against onnx.shape_inference: every dim both know as
    a number, and every dim onnx knows as a symbol of the graph input, must agree."""
    from onnx import shape_inference

    path = os.path.join(exports[(name, "hw")], f"{name}.onnx")
    _, im = import_text(path)
    inferred = shape_inference.infer_shapes(onnx.load(path)).graph.value_info
    compared = 0
    for vi in inferred:
        mine = im.shapes.get(vi.name)
        if mine is None or not vi.type.tensor_type.HasField("shape"):
            continue  # folded away, or a rank onnx does not know
        theirs = vi.type.tensor_type.shape.dim
        assert len(theirs) == len(mine), vi.name
        for k, (a, b) in enumerate(zip(mine, theirs)):
            if b.HasField("dim_value"):
                assert a == b.dim_value, f"{vi.name} dim {k}: {a} vs onnx {b.dim_value}"
                compared += 1
            elif b.dim_param in ("batch", "height", "width"):
                assert repr(a) == b.dim_param, f"{vi.name} dim {k}: {a} vs onnx {b.dim_param}"
                compared += 1
    assert compared > 50


@pytest.mark.parametrize("name,variant", [(n, v) for n in sorted(EXPECTED) for v in ("hw", "bn")])
def test_dynamic_hw_imports_and_holds_at_other_sizes(name, variant, exports, tmp_path):
    """Dynamic batch, height and width: one import serves other image sizes. ShuffleNet's
    channel shuffle reshapes [N, C, H, W] -> [N, 2, C/2, H, W] with H and W symbolic: the
    target names them by their dim expressions, or, in a build without those, the importer
    aligns ranks with a size-1 dim (unsqueeze / squeeze) so both stay "the input's dim at this
    position"."""
    d = exports[(name, variant)]
    gbx, text, im = write_import(os.path.join(d, f"{name}.onnx"), str(tmp_path))
    assert "%x: f32[batch, 3, height, width]" in text
    if variant == "bn":
        assert op_counts(text)["batch_norm"] == op_counts(text)["conv2d"]
    if name == "shufflenet_v2_x0_5":
        ops = op_counts(text)
        if im.dim_exprs():  # the shuffle's H and W named by their expressions: plain reshapes
            assert "unsqueeze" not in ops and "squeeze" not in ops and ops["reshape"] == 32
            assert "(((height + 1) / 2 + 1) / 2 + 1) / 2" in text
        else:  # a build without dim expressions: ranks aligned with a size-1 dim
            assert ops["unsqueeze"] == 16 and ops["squeeze"] == 16
    model = torch_model(name)
    for batch, h, w in ((1, 64, 64), (3, 96, 80), (2, 33, 47)):
        x = np.random.default_rng(h * w).standard_normal((batch, 3, h, w)).astype(np.float32)
        with torch.no_grad():
            expect = model(torch.from_numpy(x)).numpy()
        (out,) = evaluate_ir(gbx, [x])
        np.testing.assert_allclose(out, expect, rtol=RTOL, atol=ATOL)


def _missing_ops(text):
    return sorted(set(op_counts(text)) - set(gearbox.op_names()))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_gearbox_runs_import_in_every_mode(name, exports, tmp_path, cli, env):
    d = exports[(name, "batch")]
    gbx = tmp_path / f"{name}.gbx"
    proc = subprocess.run([cli, "import", os.path.join(d, f"{name}.onnx"), "-o", str(gbx)],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0 and "not in this build" in proc.stderr:
        missing = sorted(set(re.findall(r"needs gearbox op (\w+)", proc.stderr)))
        pytest.skip(f"this build lacks gearbox op(s) {', '.join(missing)} (issue 20, C++ side)")
    assert proc.returncode == 0, proc.stderr
    g = gearbox.load(str(gbx))
    x, y = (np.load(os.path.join(d, f"{name}.{k}.npy")) for k in "xy")
    for mode in gearbox.MODES:
        s = gearbox.Session(g, mode=mode)
        if mode == "geared":
            gearbox.set_dim_gears(s, "x", {0: [1, BATCH]})
        (out,) = s.run(x)
        np.testing.assert_allclose(out, y, rtol=RTOL, atol=ATOL, err_msg=f"mode {mode}")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_batch_tiles_on_real_exports_match_torch(name, exports, tmp_path, cli, env):
    """A static plan at batch 8 runs its runs of convs whose activations outweigh their weights
    a tile of images at a time (compiler.cpp's planBatchTiles; MobileNetV2's inverted blocks at
    64 x 64 do, ResNet-18's and ShuffleNetV2's convs there do not pay): `print --plan` says
    which steps, and every model's outputs still match torch's."""
    d = exports[(name, "batch")]
    gbx = tmp_path / f"{name}.gbx"
    proc = subprocess.run([cli, "import", os.path.join(d, f"{name}.onnx"), "-o", str(gbx)],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    plan = subprocess.run([cli, "print", str(gbx), "--plan", "--threads", "1", "--shapes",
                           json.dumps({"x": [8, 3, SIZE, SIZE]})],
                          capture_output=True, text=True, env=env)
    assert plan.returncode == 0, plan.stderr
    tiles = re.findall(r"^# batch tile: steps (\d+)-(\d+) run (\d+) images? at a time",
                       plan.stdout, re.M)
    if name == "mobilenet_v2":
        assert tiles and all(int(e) > int(f) for f, e, _ in tiles), plan.stdout[:2000]
        assert "host arena" in plan.stdout.splitlines()[0]
    x = np.random.default_rng(8).standard_normal((8, 3, SIZE, SIZE)).astype(np.float32)
    with torch.no_grad():
        expect = torch_model(name)(torch.from_numpy(x)).numpy()
    for threads in (1, 2):
        (out,) = gearbox.Session(gearbox.load(str(gbx)), mode="static", threads=threads).run(x)
        np.testing.assert_allclose(out, expect, rtol=RTOL, atol=ATOL, err_msg=f"{threads}")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_gearbox_dynamic_hw_one_compile(name, exports, tmp_path, cli, env):
    """Dynamic batch, height and width through gearbox's dynamic mode: three image sizes and
    batches, fewer compiles than calls (2 today: with H and W fixed it is 1), torch's outputs."""
    d = exports[(name, "hw")]
    gbx = tmp_path / f"{name}.gbx"
    proc = subprocess.run([cli, "import", os.path.join(d, f"{name}.onnx"), "-o", str(gbx)],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0 and "not in this build" in proc.stderr:
        pytest.skip(f"this build lacks gearbox ops: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    s = gearbox.Session(gearbox.load(str(gbx)), mode="dynamic")
    model = torch_model(name)
    for batch, h, w in ((2, 64, 64), (1, 96, 80), (3, 40, 72)):
        x = np.random.default_rng(h).standard_normal((batch, 3, h, w)).astype(np.float32)
        with torch.no_grad():
            expect = model(torch.from_numpy(x)).numpy()
        (out,) = s.run(x)
        np.testing.assert_allclose(out, expect, rtol=RTOL, atol=ATOL, err_msg=f"x {x.shape}")
    assert s.stats["graph_compiles"] < 3


def test_gearbox_dynamic_hw_resnet_compiles(exports, tmp_path, cli, env):
    """ResNet-18 with dynamic batch, height and width over 10 image sizes: static compiles once
    per size, its recompile reasons name x's dims; dynamic compiles fewer times; both agree with
    the reference executor."""
    d = exports[("resnet18", "hw")]
    gbx = tmp_path / "resnet18.gbx"
    proc = subprocess.run([cli, "import", os.path.join(d, "resnet18.onnx"), "-o", str(gbx)],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0 and "not in this build" in proc.stderr:
        pytest.skip(f"this build lacks gearbox ops: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    g = gearbox.load(str(gbx))
    trace = [{"x": [1 + k % 3, 3, 32 + 8 * k, 40 + 8 * k]} for k in range(10)]
    static = "static"
    dynamic = "dynamic"
    assert static in gearbox.MODES and dynamic in gearbox.MODES
    recs = {r["mode"]: r for r in gearbox.compare(g, trace, modes=[static, dynamic],
                                                   on_recompile_limit="unlimited")}
    assert recs["static"]["graph_compiles"] == 10
    assert recs["dynamic"]["graph_compiles"] < 10
    for r in recs.values():
        assert r["max_abs_diff_vs_reference"] <= 1e-4
    # The batch fixed (above 1, which dynamic mode specialises): one dynamic compile for all 10
    # image sizes, 10 static ones, and static's summary names x dims 2 and 3.
    trace2 = [{"x": [2, 3, 32 + 8 * k, 40 + 8 * k]} for k in range(10)]
    recs2 = {r["mode"]: r for r in gearbox.compare(g, trace2, modes=[static, dynamic],
                                                    on_recompile_limit="unlimited")}
    assert recs2["dynamic"]["graph_compiles"] == 1
    assert recs2["static"]["graph_compiles"] == 10
    # The CLI's report groups static's recompiles by input and dim.
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(c) + "\n" for c in trace2))
    proc = subprocess.run([cli, "run", str(gbx), "--trace", str(tmp_path / "t.jsonl"), "-q",
                           "--mode", static, "--model-only", "--recompile-limit", "100", "--json",
                           str(tmp_path / "r.json")], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reasons = json.loads((tmp_path / "r.json").read_text())["recompile_summary"]
    named = {(r["input"], r["dim"]) for r in reasons["recompile_reasons"]}
    assert {("x", 2), ("x", 3)} <= named, reasons
    s = gearbox.Session(g, mode="static")
    s.run(np.zeros((1, 3, 32, 40), np.float32))
    s.run(np.zeros((1, 3, 40, 40), np.float32))
    assert "input 'x' size mismatch at dim 2" in s.history[1]["reason"]


def test_gearbox_channel_shuffle_over_dynamic_hw(tmp_path, cli, env):
    """A conv then ShuffleNet's channel shuffle (view / transpose / view), exported with dynamic
    batch, height and width: the reshape targets name the conv's output sizes by expression at
    new positions; gearbox resolves them and agrees with torch in every mode and size."""
    torch.manual_seed(0)

    class Unit(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)

        def forward(self, x):
            y = self.conv(x)
            b, c, h, w = y.shape
            y = y.view(b, 2, c // 2, h, w).transpose(1, 2).contiguous().view(b, -1, h, w)
            return torch.relu(y)

    model = Unit().eval()
    path = str(tmp_path / "unit.onnx")
    torch.onnx.export(model, torch.randn(1, 3, 16, 16), path, input_names=["x"],
                      output_names=["y"], opset_version=13,
                      dynamic_axes={"x": {0: "batch", 2: "height", 3: "width"}})
    gbx = tmp_path / "unit.gbx"
    proc = subprocess.run([cli, "import", path, "-o", str(gbx)], capture_output=True,
                          text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    text = gbx.read_text()
    if "unsqueeze" in text or "height_" in text:
        pytest.skip("this build has no dim expressions: the rank-aligned form is imported")
    assert "shape=[batch, 2, 4, (height + 1) / 2, (width + 1) / 2]" in text
    g = gearbox.load(str(gbx))
    for mode in gearbox.MODES:
        s = gearbox.Session(g, mode=mode)
        shapes = ((1, 3, 16, 16), (2, 3, 15, 9), (2, 3, 8, 21))
        if mode == "geared":  # gears on the batch only: H and W stay as exported
            gearbox.set_dim_gears(s, "x", {0: [1, 2]})
            shapes = ((1, 3, 16, 16), (2, 3, 16, 16))
        for shape in shapes:
            x = np.random.default_rng(shape[2]).standard_normal(shape).astype(np.float32)
            with torch.no_grad():
                expect = model(torch.from_numpy(x)).numpy()
            (out,) = s.run(x)
            np.testing.assert_allclose(out, expect, rtol=RTOL, atol=ATOL,
                                       err_msg=f"mode {mode}, x {shape}")


def test_unsupported_attribute_named(tmp_path):
    """A 1-D convolution and a reflect pad: one error naming both nodes, op and attribute.
    (A node reading an unsupported node's output is not checked: its input shape is unknown.)"""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((2, 2, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv1d", kernel_shape=[3]),
         helper.make_node("Pad", ["x", "p"], ["y"], name="pad", mode="reflect")],
        "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[w, numpy_helper.from_array(np.zeros(6, np.int64), "p")])
    path = str(tmp_path / "bad.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    with pytest.raises(onnx_import.ImportFailure) as e:
        import_text(path)
    msg = str(e.value)
    assert "2 unsupported node(s)" in msg
    assert "conv1d (Conv: kernel_shape=[3] (rank 1): gearbox conv2d takes 2-D kernels" in msg
    assert "pad (Pad: mode=reflect" in msg


def test_dim_expressions_canonical():
    """Equal sizes computed two ways compare equal; the reshape rules depend on it."""
    from gearbox.onnx_import import _sym, d_add, d_floordiv, d_mul, d_sub

    h, w = _sym("height"), _sym("width")
    conv = d_add(d_floordiv(d_add(h, 2 - 3), 2), 1)  # k3 s2 p1: (h + 2 - 3) // 2 + 1
    assert conv == d_floordiv(d_add(h, 1), 2) and repr(conv) == "(height + 1) // 2"
    assert d_floordiv(d_mul(h, 4), 2) == d_mul(2, h)
    assert d_floordiv(d_add(d_mul(h, 4), 3), 4) == h  # (4h + 3) // 4 == h
    assert d_mul(h, w) == d_mul(w, h)
    assert d_sub(d_add(h, w), w) == h
    assert d_floordiv(h, 2) != h and d_floordiv(d_add(h, 1), 2) != d_floordiv(h, 2)
    assert d_floordiv(7, 2) == 3 and d_sub(h, h) == 0


# Older opsets carry as attributes what opset 13 takes as inputs: each case is one node, checked
# through the importer and evaluate_ir against NumPy.
_X = np.arange(2 * 6 * 4, dtype=np.float32).reshape(2, 6, 4) / 7 - 3
OLD_OPSETS = {
    "clip6": (6, dict(op_type="Clip", min=-1.0, max=2.5), lambda x: np.clip(x, -1.0, 2.5)),
    "split11": (11, dict(op_type="Split", axis=1, split=[2, 4], outputs=["y", "z"]),
                lambda x: x[:, 2:]),
    "unsqueeze11": (11, dict(op_type="Unsqueeze", axes=[0, -1]), lambda x: x[None, ..., None]),
    "squeeze11": (11, dict(op_type="Squeeze", axes=[0]), None),
    "slice9": (9, dict(op_type="Slice", starts=[1, -3], ends=[100, -1], axes=[1, 2]),
               lambda x: x[:, 1:, -3:-1]),
    "pad2": (2, dict(op_type="Pad", pads=[0, 1, 0, 0, 2, 1], value=0.5),
             lambda x: np.pad(x, [(0, 0), (1, 2), (0, 1)], constant_values=0.5)),
    "reduce_mean13": (13, dict(op_type="ReduceMean", axes=[-1], keepdims=0),
                      lambda x: x.mean(axis=-1)),
}


@pytest.mark.parametrize("case", sorted(OLD_OPSETS))
def test_older_opset_attributes(case, tmp_path):
    from onnx import TensorProto, helper

    opset, spec, fn = OLD_OPSETS[case]
    spec = dict(spec)
    op_type, outputs = spec.pop("op_type"), spec.pop("outputs", ["y"])
    x = _X[None] if case == "squeeze11" else _X
    fn = fn or (lambda a: a[0])
    node = helper.make_node(op_type, ["x"], outputs, name="n", **spec)
    graph = helper.make_graph(
        [node], case, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info(outputs[-1], TensorProto.FLOAT, None)])
    path = str(tmp_path / f"{case}.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    gbx, text, _ = write_import(path, str(tmp_path))
    (out,) = evaluate_ir(gbx, [x])
    np.testing.assert_allclose(out, fn(x), rtol=1e-6)


def _shape_model(tmp_path, transpose, picks):
    """x [B, H, W] (optionally transposed to [H, B, W]) reshaped to a target gathered from
    Shape(x): picks are indices into x's shape, or -1 for a literal -1."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape")]
    parts = []
    for k, p in enumerate(picks):
        c = f"c{k}"
        nodes.append(helper.make_node("Constant", [], [c], name=f"const{k}",
                                      value=helper.make_tensor("v", TensorProto.INT64, [1], [p])))
        if p == -1:
            parts.append(c)
        else:
            nodes.append(helper.make_node("Gather", ["s", c], [f"g{k}"], name=f"gather{k}"))
            parts.append(f"g{k}")
    nodes.append(helper.make_node("Concat", parts, ["t"], name="cat", axis=0))
    src = "x"
    if transpose:
        nodes.append(helper.make_node("Transpose", ["x"], ["xt"], name="tr", perm=[1, 0, 2]))
        src = "xt"
    nodes.append(helper.make_node("Reshape", [src, "t"], ["y"], name="rs"))
    graph = helper.make_graph(
        nodes, "rs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = str(tmp_path / "rs.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_reshape_of_symbolic_dims(tmp_path):
    """A target dim that is the input's symbol at the same position is written as that name;
    one other non-static dim becomes -1. [B, H, W] -> [H, B, W] moves two symbols: named by
    expression where the build has dim expressions, else refused naming node and dims."""
    text, im = import_text(_shape_model(tmp_path, True, [1, -1]))
    assert "reshape(%xt, shape=[H, -1])" in text  # xt is [H, B, W]
    assert im.folded == 5 and "Shape" not in text and " i64[" not in text
    path = _shape_model(tmp_path, False, [1, 0, 2])  # [B, H, W] -> [H, B, W]
    if onnx_import._Importer(onnx.load(path), "m", None).dim_exprs():
        text, _ = import_text(path)
        assert "reshape(%x, shape=[H, B, W])" in text
        return
    with pytest.raises(onnx_import.ImportFailure) as e:
        import_text(path)
    assert ("rs (Reshape: shape: target [H, B, W] from input [B, H, W]: dim 0 = H, dim 1 = B "
            "needs a dim expression") in str(e.value)


def test_reshape_of_two_products_is_refused(tmp_path):
    """[B, H, W, D] -> [B*H, W*D]: products of two symbols are no dim expression, and only one
    target dim may be inferred: refused in any build, naming the node and both dims."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape")]
    for k in range(4):
        nodes += [helper.make_node("Constant", [], [f"i{k}"], name=f"c{k}",
                                   value=helper.make_tensor("v", TensorProto.INT64, [1], [k])),
                  helper.make_node("Gather", ["s", f"i{k}"], [f"d{k}"], name=f"g{k}")]
    nodes += [helper.make_node("Mul", ["d0", "d1"], ["p"], name="m0"),
              helper.make_node("Mul", ["d2", "d3"], ["q"], name="m1"),
              helper.make_node("Concat", ["p", "q"], ["t"], name="cat", axis=0),
              helper.make_node("Reshape", ["x", "t"], ["y"], name="rs")]
    graph = helper.make_graph(
        nodes, "rs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "H", "W", "D"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = str(tmp_path / "rs2.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    with pytest.raises(onnx_import.ImportFailure) as e:
        import_text(path)
    assert ("rs (Reshape: shape: target [(B) * (H), (D) * (W)] from input [B, H, W, D]: "
            "dim 0 = (B) * (H), dim 1 = (D) * (W) needs a dim expression") in str(e.value)


# ---- evaluate_ir: the IR text run with torch.nn.functional ---------------------------------------


_STMT = re.compile(r"^\s*%(\S+) = (\w+)(.*)$")


def _split_top(text):
    """Splits `a, b=[1, 2], c` at the commas outside brackets."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _attr_value(text):
    if text.startswith("["):
        return [_attr_value(t) for t in _split_top(text[1:-1])]
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text  # a name (reshape's "copy the input's dim")


def evaluate_ir(gbx_path, inputs):
    """Runs the model at gbx_path on `inputs` (list of arrays, graph input order); returns the
    outputs as numpy arrays."""
    import torch
    import torch.nn.functional as F

    text = open(gbx_path).read()
    base = os.path.dirname(gbx_path)
    env = {}
    header = re.search(r"graph \w+\((.*)\) \{", text).group(1)
    names = re.findall(r"%([A-Za-z0-9_.]+):", header)
    symbols = {}  # the graph input's symbols, bound to the sizes of this call
    for n, a, dims in zip(names, inputs, re.findall(r"\[([^\]]*)\]", header)):
        env[n] = torch.from_numpy(np.ascontiguousarray(a))
        for k, dim in enumerate(d.strip() for d in dims.split(",") if d.strip()):
            if re.fullmatch(r"[A-Za-z_]\w*", dim):
                symbols[dim] = a.shape[k]
    for line in text.splitlines():
        line = line.split("#")[0] if not line.strip().startswith("%") else line
        if line.strip().startswith("return"):
            return [env[v.strip()[1:]].numpy() for v in line.strip()[6:].split(",")]
        m = _STMT.match(line)
        if not m:
            continue
        out, op, rest = m.groups()
        if op == "const":
            c = re.match(r"\s*(\w+)\[([^\]]*)\]\s*(.*)$", rest)
            dt, shape, src = c.groups()
            dims = [int(d) for d in shape.split(",") if d.strip()]
            if src.startswith('"'):
                arr = np.load(os.path.join(base, src.strip('"')))
            else:
                vals = [float(v) for v in src.strip()[1:-1].split(",") if v.strip()]
                arr = np.asarray(vals, {"f32": np.float32, "i32": np.int32,
                                        "i64": np.int64}[dt]).reshape(dims)
            env[out] = torch.from_numpy(np.ascontiguousarray(arr))
            continue
        parts = _split_top(rest.strip()[1:-1])
        args = [env[p[1:]] for p in parts if p.startswith("%")]
        kw = {}
        for p in parts:
            if "=" in p and not p.startswith("%"):
                k, v = p.split("=", 1)
                kw[k.strip()] = _attr_value(v.strip())
        kw["_symbols"] = symbols
        env[out] = _OPS[op](F, torch, args, kw)
    raise ValueError("no return statement")


def _reshape(F, torch, a, kw):
    # A named target dim: a dim expression over a graph input symbol (docs/IR.md) is evaluated
    # ('/' floors); any other name copies the input's dim at the same position.
    x, symbols = a[0], kw["_symbols"]

    def size(i, d):
        if not isinstance(d, str):
            return d
        if set(re.findall(r"[A-Za-z_]\w*", d)) <= set(symbols):
            return eval(d.replace("/", "//"), {}, dict(symbols))
        return x.shape[i]

    return x.reshape([size(i, d) for i, d in enumerate(kw["shape"])])


def _conv(F, torch, a, kw):
    x, w = a[0], a[1]
    b = a[2] if len(a) > 2 else None
    t, left, bottom, right = kw.get("pads", [0, 0, 0, 0])
    x = F.pad(x, (left, right, t, bottom))
    return F.conv2d(x, w, b, stride=kw.get("strides", [1, 1]),
                    dilation=kw.get("dilations", [1, 1]), groups=kw.get("group", 1))


def _window_sums(F, torch, x, kw, value):
    """Sums over each pooling window of x padded with `value` ([top, left, bottom, right]):
    the pads are applied first, so they may be asymmetric and larger than half the kernel."""
    t, left, bottom, right = kw.get("pads", [0, 0, 0, 0])
    xp = F.pad(x, (left, right, t, bottom), value=value)
    return xp


def _max_pool(F, torch, a, kw):
    xp = _window_sums(F, torch, a[0], kw, float("-inf"))
    return F.max_pool2d(xp, kw["kernel"], kw.get("strides", [1, 1]), 0,
                        kw.get("dilations", [1, 1]), bool(kw.get("ceil_mode", 0)))


def _avg_pool(F, torch, a, kw):
    # Sum of the window over the count of the elements it covers: the input's only
    # (count_include_pad=0) or the padded extent's too (=1); divisor_override=1 makes
    # avg_pool2d a window sum.
    x = a[0]
    include = bool(kw.get("count_include_pad", 0))
    xp = _window_sums(F, torch, x, kw, 0.0)
    mask = _window_sums(F, torch, torch.ones_like(x), kw, 1.0 if include else 0.0)
    args = (kw["kernel"], kw.get("strides", [1, 1]), 0, bool(kw.get("ceil_mode", 0)), True, 1)
    return F.avg_pool2d(xp, *args) / F.avg_pool2d(mask, *args)


def _slice(F, torch, a, kw):
    x = a[0].numpy()
    index = [slice(None)] * x.ndim
    steps = kw.get("steps", [1] * len(kw["starts"]))
    axes = kw.get("axes", list(range(len(kw["starts"]))))
    for s, e, ax, st in zip(kw["starts"], kw["ends"], axes, steps):
        index[ax] = slice(s, e, st)
    return torch.from_numpy(np.ascontiguousarray(x[tuple(index)]))


def _squeeze(F, torch, a, kw):
    x = a[0]
    for ax in sorted(kw["axes"], reverse=True):
        x = x.squeeze(ax)
    return x


def _unsqueeze(F, torch, a, kw):
    x = a[0]
    for ax in sorted(kw["axes"]):
        x = x.unsqueeze(ax)
    return x


def _pad(F, torch, a, kw):
    x, pads = a[0], kw["pads"]
    r = x.dim()
    torch_pads = []
    for i in reversed(range(r)):
        torch_pads += [pads[i], pads[r + i]]
    return F.pad(x, torch_pads, value=kw.get("value", 0.0))


def _batch_norm(F, torch, a, kw):
    x, scale, bias, mean, var = a
    return F.batch_norm(x, mean, var, scale, bias, False, 0.0, kw.get("epsilon", 1e-5))


def _layer_norm(F, torch, a, kw):
    x = a[0]
    axis = kw.get("axis", -1) % x.dim()
    shape = list(x.shape[axis:])
    return F.layer_norm(x, shape, a[1] if len(a) > 1 else None, a[2] if len(a) > 2 else None,
                        kw.get("epsilon", 1e-5))


def _expand(F, torch, a, kw):
    # Target names are graph input symbols or expressions of them ('/' floors).
    symbols = kw["_symbols"]
    dims = [eval(d.replace("/", "//"), {}, dict(symbols)) if isinstance(d, str) else d
            for d in kw["shape"]]
    x = a[0]
    shape = torch.broadcast_shapes(tuple(x.shape), tuple(dims))
    return x.expand(shape).contiguous()


def _cast(F, torch, a, kw):
    to = {1: torch.float32, 6: torch.int32, 7: torch.int64}[kw["to"]]
    return a[0].to(to)


def _gather(F, torch, a, kw):
    data, idx = a[0], a[1].long()
    axis = kw.get("axis", 0) % data.dim()
    idx = torch.where(idx < 0, idx + data.shape[axis], idx)
    out = torch.index_select(data, axis, idx.reshape(-1))
    return out.reshape(list(data.shape[:axis]) + list(idx.shape) + list(data.shape[axis + 1:]))


def _trilu(F, torch, a, kw):
    k = kw.get("k", 0)
    return torch.triu(a[0], k) if kw.get("upper", 1) else torch.tril(a[0], k)


_OPS = {
    "add": lambda F, torch, a, kw: a[0] + a[1],
    "mul": lambda F, torch, a, kw: a[0] * a[1],
    "relu": lambda F, torch, a, kw: torch.relu(a[0]),
    "sigmoid": lambda F, torch, a, kw: torch.sigmoid(a[0]),
    "matmul": lambda F, torch, a, kw: torch.matmul(a[0], a[1]),
    # wrap=1: a negative index counts from the end of the dim (ONNX's Gather).
    "index_select": lambda F, torch, a, kw: torch.index_select(
        a[0], kw["dim"], a[1].long() % a[0].shape[kw["dim"]] if kw.get("wrap") else a[1].long()),
    "cat": lambda F, torch, a, kw: torch.cat(a, kw["dim"]),
    "reshape": _reshape,
    "transpose": lambda F, torch, a, kw: a[0].permute(kw["perm"]).contiguous(),
    "conv2d": _conv,
    "max_pool2d": _max_pool,
    "avg_pool2d": _avg_pool,
    "mean": lambda F, torch, a, kw: a[0].mean(dim=kw["axes"], keepdim=bool(kw.get("keepdims", 1))),
    "batch_norm": _batch_norm,
    "clip": lambda F, torch, a, kw: a[0] if "min" not in kw and "max" not in kw else torch.clamp(
        a[0], kw.get("min"), kw.get("max")),
    "flatten": lambda F, torch, a, kw: a[0].reshape(
        int(np.prod(a[0].shape[:kw.get("axis", 1)])), -1),
    "slice": _slice,
    "squeeze": _squeeze,
    "unsqueeze": _unsqueeze,
    "pad": _pad,
    "sub": lambda F, torch, a, kw: a[0] - a[1],
    "div": lambda F, torch, a, kw: a[0] / a[1],
    "pow": lambda F, torch, a, kw: torch.pow(a[0], a[1]),
    "sqrt": lambda F, torch, a, kw: torch.sqrt(a[0]),
    "erf": lambda F, torch, a, kw: torch.erf(a[0]),
    "tanh": lambda F, torch, a, kw: torch.tanh(a[0]),
    "gelu": lambda F, torch, a, kw: F.gelu(a[0], approximate="tanh" if kw.get("approximate")
                                           else "none"),
    "softmax": lambda F, torch, a, kw: torch.softmax(a[0], kw.get("axis", -1)),
    "layer_norm": _layer_norm,
    "reduce_sum": lambda F, torch, a, kw: a[0].sum(dim=kw["axes"],
                                                    keepdim=bool(kw.get("keepdims", 1))),
    "where": lambda F, torch, a, kw: torch.where(a[0] != 0, a[1], a[2]),
    "expand": _expand,
    "cast": _cast,
    "gather": _gather,
    "trilu": _trilu,
}
