"""The thread cap from Python (Session(threads=N), as --threads) and the pure parts of the peers
bench (bench/peers/peers.py: statistics, the round-robin order, the visit plan, the agreement
check). The bench's smoke run itself -- gearbox, ONNX Runtime and PyTorch on the MLP -- is a
step of scripts/test.sh after scripts/install-peers.sh; no timing is asserted anywhere."""
import importlib.util
import pathlib
import sys

import numpy as np
import pytest

import gearbox

from conftest import REPO


def _peers():
    spec = importlib.util.spec_from_file_location("peers", REPO / "bench" / "peers" / "peers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


peers = _peers()


def _mlp():
    b = gearbox.GraphBuilder("capped")
    x = b.input("x", "f32", ["B", 256])
    w = b.constant(np.full((256, 256), 0.01, np.float32), "w")
    b.output(b.matmul(x, w))
    return b.build()


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_session_threads_caps_every_kernel(threads):
    s = gearbox.Session(_mlp(), mode="static", threads=threads)
    (y,) = s.run(np.ones((128, 256), np.float32))
    assert np.allclose(y, 2.56, rtol=1e-5)
    assert s.history[0]["kernels_compiled"] == [
        f"MatMul_float_ND_128_256__256_256__threads={threads}"]
    assert s.report()["config"]["threads"] == threads


def test_session_without_threads_is_uncapped():
    s = gearbox.Session(_mlp(), mode="eager")
    s.run(np.ones((2, 256), np.float32))
    assert s.history[0]["kernels_compiled"] == ["MatMul_float_ND_2_256__256_256"]
    assert s.report()["config"]["threads"] == 0


@pytest.mark.parametrize("bad", [-1, 1025, True, "2"])
def test_session_threads_checked_like_the_cli(bad):
    with pytest.raises(gearbox.Error) as e:
        gearbox.Session(_mlp(), threads=bad)
    assert e.value.kind == "config" and "threads" in str(e.value)


def test_threads_is_a_keyword_of_the_commands(repo):
    r = gearbox.run(str(repo / "examples" / "seed001_add.gbx"),
                    str(repo / "examples" / "seed001_add.trace.jsonl"), quiet=True, threads=1)
    assert r["exit_status"] == 0 and r["report"]["config"]["threads"] == 1


def test_summarize_median_quartiles_and_spread():
    s = peers.summarize([1000, 2000, 3000, 4000, 5000])  # ns
    assert s["n"] == 5 and s["median"] == 3e-6 and s["min"] == 1e-6 and s["max"] == 5e-6
    assert (s["p25"], s["p75"]) == (2e-6, 4e-6)
    assert peers.spread_percent(s) == pytest.approx(100 / 3)
    assert peers.summarize([7000])["median"] == 7e-6
    assert peers.summarize([]) == {"n": 0}
    assert peers.format_cell(s) == "3 us ±33%"
    assert peers.format_seconds(0.0123) == "12.30 ms" and peers.format_seconds(2.5) == "2.50 s"


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 8])
def test_round_robin_is_balanced(n):
    names = [f"r{i}" for i in range(n)]
    cycle = len(peers.balanced_orders(n))
    assert cycle == (n if n % 2 == 0 else 2 * n)
    rounds = [peers.visit_order(names, i) for i in range(cycle)]
    assert peers.visit_order(names, cycle) == rounds[0]
    assert all(sorted(r) == names for r in rounds)
    leads = [r[0] for r in rounds]
    assert all(leads.count(x) == cycle // n for x in names)  # each leads equally often
    # Within the rounds, every runtime directly follows every other equally often.
    follows = {}
    for r in rounds:
        for a, b in zip(r, r[1:]):
            follows[(a, b)] = follows.get((a, b), 0) + 1
    assert len(follows) == n * (n - 1)
    assert len(set(follows.values())) <= 1


def test_visit_plan_and_round_budget():
    assert peers.calls_per_visit(1e-4) == 25  # capped at MAX_CALLS_PER_VISIT
    assert peers.calls_per_visit(0.005) == 4
    assert peers.calls_per_visit(2.0) == 1
    assert peers.rounds_for(100, [1.0, 1.0], wanted=15) == 15
    assert peers.rounds_for(10, [1.0, 1.0], wanted=15) == 5
    assert peers.rounds_for(1, [1.0, 1.0], wanted=15) == 3  # at least three
    assert peers.rounds_for(1, [1.0, 1.0], wanted=1) == 1  # the smoke run's one round


def test_compute_scaling_speedup_and_what_it_says():
    probe = {"one_thread_seconds": 2e-3, "threads_seconds": 1.05e-3}
    assert peers.scaling_speedup(probe) == pytest.approx(2e-3 / 1.05e-3)
    assert peers.scaling_speedup(None) is None
    assert peers.scaling_speedup({"one_thread_seconds": 1e-3, "threads_seconds": 0}) is None
    assert peers.describe_scaling(1.9, 2) == "own cores"
    assert peers.describe_scaling(1.5, 2) == "own cores"
    assert peers.describe_scaling(1.05, 2).startswith("one core's FMA units shared")
    assert peers.describe_scaling(0.5, 2).startswith("one core's FMA units shared")
    assert peers.describe_scaling(1.4, 2) == "partly shared"
    assert peers.describe_scaling(None, 2) == "not measured"
    r = {"compute_scaling": {"before": probe,
                             "after": {"one_thread_seconds": 2e-3, "threads_seconds": 2e-3}}}
    assert peers.format_scaling(r) == "1.90 / 1.00"
    assert peers.format_scaling({"threads": 1}) == "-"
    assert peers.format_scaling({"compute_scaling": {"before": None, "after": probe}}) == \
        "- / 1.90"


def test_scaling_probe_runs_in_the_gearbox_worker(repo):
    # The worker's probe end to end, briefly: both sessions ran and their medians came back.
    sys.path.insert(0, str(repo / "bench" / "peers"))
    import py_worker

    # The build this suite imported gearbox from (build/python/gearbox/__init__.py).
    build = pathlib.Path(gearbox.__file__).resolve().parents[2]
    rt = py_worker.GearboxRuntime(str(build))
    assert rt.gearbox is gearbox
    reply = py_worker.handle(rt, {"op": "scaling", "threads": 2, "seconds": 0.0})
    assert reply["n"] == py_worker.SCALING_N and reply["threads"] == 2
    assert reply["calls"] == py_worker.SCALING_VISIT
    assert reply["one_thread_seconds"] > 0 and reply["threads_seconds"] > 0


def test_agreement_names_the_error_and_the_verdict():
    ref = np.array([[1.0, -2.0, 4.0]], np.float32)
    a = peers.agreement(ref + np.float32(1e-5), ref)
    assert a["ok"] and a["max_abs"] == pytest.approx(1e-5, rel=0.1)
    assert a["max_rel"] == pytest.approx(1e-5 / 4, rel=0.1)
    bad = peers.agreement(ref * 1.01, ref)
    assert not bad["ok"] and bad["max_abs"] == pytest.approx(0.04, rel=1e-3)
    assert not peers.agreement(ref.reshape(3, 1), ref)["ok"]


def test_models_add_a_row_each_and_import_no_torch():
    import models  # bench/peers/models.py, importable once peers.py is loaded

    assert list(models.MODELS) == ["mlp", "resnet18", "shufflenet_v2_x0_5", "mobilenet_v2",
                                   "encoder"]
    assert models.MODELS["mlp"].input_shape(8) == (8, 1024)
    assert models.MODELS["resnet18"].input_shape(1) == (1, 3, 224, 224)


def test_bad_arguments_exit_two(capsys):
    with pytest.raises(SystemExit) as e:
        peers.parse_args(["--models", "nope"])
    assert e.value.code == 2 and "unknown model" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        peers.parse_args(["--batches", "0"])
    args = peers.parse_args(["--smoke"])
    assert (args.models, args.batches, args.threads, args.rounds) == (["mlp"], [1], [1, 2], 1)
