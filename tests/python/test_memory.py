"""MODELED device memory from Python (issue 25 item 1): the same report fields, options and
out-of-memory error as `gearbox run` (docs/cost-model.md, "Modeled device memory")."""
import numpy as np
import pytest

import gearbox

EVERY_8 = '{"x": {"0": [8, 16, 24, 32, 40, 48, 56, 64]}}'
# The figures below are the MLP's four kernels' (matmul, bias add, matmul, bias add: two
# [B, 1024] intermediates live per plan), as tests/device_memory_test.cpp derives them, so the
# bias adds stay apart: the memory model is under test here, not fuse-matmul-epilogue.
UNFUSED = {"disable_pass": ["fuse-matmul-epilogue"]}


def mlp_inputs(batch):
    return (np.zeros((batch, 1024), np.float32), np.zeros((1024, 1024), np.float32),
            np.zeros(1024, np.float32), np.zeros((1024, 1024), np.float32),
            np.zeros(1024, np.float32))


def test_graph_pool_shared_is_the_max_separate_the_sum(repo):
    g = gearbox.load(str(repo / "examples" / "mlp.gbx"))
    workspace = {}
    for pool in ("shared", "separate"):
        s = gearbox.Session(g, mode="geared", gears=EVERY_8, graph_pool=pool, model_only=True,
                            **UNFUSED)
        s.run(*mlp_inputs(64))
        m = s.stats["modeled_memory"]
        assert m["graph_pool"] == pool
        assert m["resident_plans"] == 8
        workspace[pool] = m["workspace_bytes"]
        assert s.stats["modeled_resident_bytes"] == m["resident_bytes"]
    # Two [B, 1024] f32 intermediates live at once: 8 KiB per batch row and gear.
    assert workspace == {"shared": 64 * 8192, "separate": 288 * 8192}


def test_out_of_memory_names_the_gear(repo):
    g = gearbox.load(str(repo / "examples" / "mlp.gbx"))
    s = gearbox.Session(g, mode="geared", gears=EVERY_8, graph_pool="separate",
                        device_memory="10MiB", model_only=True, **UNFUSED)
    with pytest.raises(gearbox.Error) as e:
        s.run(*mlp_inputs(8))
    assert e.value.kind == "memory"
    assert "gear 6 [x=[56, 1024]" in str(e.value)
    assert "above its capacity of 10485760 bytes" in str(e.value)


def test_on_oom_evict_counts_evictions(repo):
    g = gearbox.load(str(repo / "examples" / "mlp.gbx"))
    s = gearbox.Session(g, mode="static", device_memory="9100000", on_oom="evict",
                        model_only=True, **UNFUSED)
    for b in (8, 16, 32):
        s.run(*mlp_inputs(b))
    assert s.stats["modeled_memory"]["evictions"] == 1
    assert s.stats["modeled_memory"]["workspace_bytes"] == (16 + 32) * 8192
    with pytest.raises(gearbox.Error):
        gearbox.Session(g, mode="static", device_memory="40 GiB")
