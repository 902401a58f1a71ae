"""Issue 24's acceptance model: torch.nn.TransformerEncoder (2 layers, d_model 128, 4 heads,
batch_first, feed-forward 2048) behind an nn.Embedding of 1000 tokens, exported by
scripts/export_models.py with dynamic batch and sequence at opset 13 (LayerNorm decomposed into
ReduceMean/Sub/Pow/Sqrt/Div/Mul/Add, which the importer writes as layer_norm) and opset 17
(LayerNormalization). Checked against torch's own outputs:

  1. the importer alone (test_import_models.evaluate_ir, the IR run with torch.nn.functional),
     at the exported shape and others;
  2. gearbox.Session in every mode, at batch and sequence lengths other than the exported ones;
  3. `gearbox compare --check-reference` over a trace of sequence lengths;
  4. exact static / dynamic / auto compile counts over that trace.

Tolerances: float32; gearbox against torch within rtol=1e-4, atol=1e-4 (outputs are LayerNorm'd,
O(1); the feed-forward contracts over 2048 terms, whose f32 sums differ by summation order at
~1e-5). The exports are made once per module (about 3 s each on a quiet machine)."""
import collections
import json
import os
import re
import subprocess

import numpy as np
import pytest

import gearbox

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

from gearbox import onnx_import  # noqa: E402

from test_import_models import (  # noqa: E402
    ALL_OPS, _export_module, evaluate_ir, op_counts, write_import)

RTOL, ATOL = 1e-4, 1e-4
NAME = "transformer_encoder"

# opset -> (ONNX nodes of the export, IR ops after import (consts apart)). 162 / 154 of the nodes
# are shape arithmetic, Identity and Constant, all folded; each LayerNorm (8 nodes at opset 13,
# one at 17) is one layer_norm, so both opsets import to the same 63 ops.
IR_OPS = {"gather": 1, "transpose": 12, "matmul": 12, "add": 12, "slice": 6, "reshape": 10,
          "div": 2, "softmax": 2, "layer_norm": 4, "relu": 2}
EXPECTED = {13: (255, IR_OPS), 17: (215, IR_OPS)}
# After the passes: fuse-attention makes each layer's matmul(q, k^T), softmax and matmul(., v)
# one attention (MultiheadAttention scales q before the matmul, so the attention's scale is 1);
# k^T's transpose drops its last swap and stays (docs/passes.md). fuse-matmul-epilogue folds
# each layer's in-projection bias, output-projection bias, linear1's bias and ReLU, and
# linear2's bias and residual into their matmuls; the residual add after the attention's
# output transpose stays (one per layer).
IR_OPS_FUSED = dict({k: v for k, v in IR_OPS.items() if k not in ("softmax", "relu")}, matmul=8,
                    attention=2, add=2)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """{opset: directory holding transformer_encoder.{onnx,ids.npy,y.npy}}."""
    em = _export_module()
    out = {}
    for opset in EXPECTED:
        d = str(tmp_path_factory.mktemp(f"opset{opset}"))
        em.export_sequence(NAME, d, opset)
        out[opset] = d
    return out


@pytest.fixture(scope="module")
def module():
    return _export_module().transformer_encoder().module


def _torch_out(module, ids):
    with torch.no_grad():
        return module(torch.from_numpy(ids)).numpy()


def _ids(batch, seq, seed):
    return np.random.default_rng(seed).integers(0, 1000, size=(batch, seq)).astype(np.int64)


SHAPES = ((2, 7), (1, 1), (3, 12), (2, 5))


@pytest.mark.parametrize("opset", sorted(EXPECTED))
def test_import_counts_and_importer_numerics(opset, exports, module, tmp_path):
    d = exports[opset]
    path = os.path.join(d, f"{NAME}.onnx")
    nodes, expected_ops = EXPECTED[opset]
    assert len(onnx.load(path).graph.node) == nodes
    gbx, text, im = write_import(path, str(tmp_path))
    assert op_counts(text) == expected_ops
    assert "%ids: i64[batch, seq]" in text
    # The out-projection's rows [seq * batch, 128] are named back to [seq, batch, 128] by the
    # graph input's symbols; no integer tensor is computed at run time.
    assert "shape=[seq, batch, 128]" in text
    assert " i64[" not in text.replace("const i64[", "").replace("%ids: i64[", "")
    if opset == 13:
        assert im.fusions_written == {"layer_norm": 4}
    ids = np.load(os.path.join(d, f"{NAME}.ids.npy"))
    (out,) = evaluate_ir(gbx, [ids])
    np.testing.assert_allclose(out, np.load(os.path.join(d, f"{NAME}.y.npy")), rtol=RTOL,
                               atol=ATOL)
    for batch, seq in SHAPES:
        ids = _ids(batch, seq, batch * 100 + seq)
        (out,) = evaluate_ir(gbx, [ids])
        np.testing.assert_allclose(out, _torch_out(module, ids), rtol=RTOL, atol=ATOL,
                                   err_msg=f"ids [{batch}, {seq}]")


def _imported(exports, opset, tmp_path, cli, env):
    gbx = tmp_path / f"{NAME}{opset}.gbx"
    proc = subprocess.run([cli, "import", os.path.join(exports[opset], f"{NAME}.onnx"), "-o",
                           str(gbx)], capture_output=True, text=True, env=env)
    if proc.returncode != 0 and "not in this build" in proc.stderr:
        missing = sorted(set(re.findall(r"needs gearbox op (\w+)", proc.stderr)))
        pytest.skip(f"this build lacks gearbox op(s) {', '.join(missing)} (issue 24, C++ side)")
    assert proc.returncode == 0, proc.stderr
    return gbx


@pytest.mark.parametrize("opset", sorted(EXPECTED))
def test_gearbox_runs_every_mode_against_torch(opset, exports, module, tmp_path, cli, env):
    g = gearbox.load(str(_imported(exports, opset, tmp_path, cli, env)))
    s = gearbox.Session(g, mode="static")
    assert op_counts(s.graph.text()) == IR_OPS_FUSED
    for mode in gearbox.MODES:
        s = gearbox.Session(g, mode=mode)
        if mode == "geared":  # exact gears (zipped): every (batch, seq) below, no padding
            gearbox.set_dim_gears(s, "ids", {0: [1, 2, 2, 3], 1: [1, 5, 7, 12]})
        for batch, seq in SHAPES:
            ids = _ids(batch, seq, batch * 100 + seq)
            (out,) = s.run(ids)
            np.testing.assert_allclose(out, _torch_out(module, ids), rtol=RTOL, atol=ATOL,
                                       err_msg=f"mode {mode}, ids [{batch}, {seq}]")


# A serving-like trace: batch 2, sequence lengths with repeats.
TRACE = [{"ids": [2, s]} for s in (5, 7, 9, 7, 5, 12, 9, 5)]


def test_compare_check_reference_agrees(exports, tmp_path, cli, env):
    gbx = _imported(exports, 13, tmp_path, cli, env)
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps(c) + "\n" for c in TRACE))
    proc = subprocess.run([cli, "compare", str(gbx), "--trace", str(trace), "--check-reference",
                           "--repeat", "1", "--json", str(tmp_path / "r.json")],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    modes = json.loads((tmp_path / "r.json").read_text())["modes"]
    assert set(modes) == {m for m in gearbox.MODES if m != "geared"}
    for name, m in modes.items():
        assert m["reference_check"]["ok"], name


def test_compile_counts_over_sequence_lengths(exports, tmp_path, cli, env):
    """Static compiles one plan per distinct (batch, seq): 4; dynamic one shape-generic plan
    (batch 2 and every seq through it); auto compiles static first, then makes the sequence dim
    dynamic on its first change: 2. Kernel compiles are exact too."""
    g = gearbox.load(str(_imported(exports, 13, tmp_path, cli, env)))
    modes = [m for m in gearbox.MODES if m in EXPECTED_COMPILES]
    recs = {r["mode"]: r for r in gearbox.compare(g, TRACE, modes=modes,
                                                   on_recompile_limit="unlimited")}
    counts = {m: (r["graph_compiles"], r["kernel_compiles"]) for m, r in recs.items()}
    assert counts == EXPECTED_COMPILES, counts
    for r in recs.values():
        assert r["max_abs_diff_vs_reference"] <= 1e-4


# Kernel compiles: the two layers share their kernels, so a static plan compiles 19 distinct
# kernels per (batch, seq) (4 x 19 = 76); the shape-generic plan 19 distinct keys; auto the
# first static plan's 19, then the generic plan's 19. (Without fuse-matmul-epilogue 24 and 25:
# the bias adds and the ReLU run as kernels of their own. Without fuse-attention too, 27 and 28:
# the attention replaces three kernels, and k's transpose then has the key of q's.)
EXPECTED_COMPILES = {"static": (4, 76), "dynamic": (1, 19), "auto": (2, 38)}
