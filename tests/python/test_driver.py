"""The driver from Python (issue 21 item 3): suggest_gears and the report writers are the CLI's
own (driver/), so Python and `gearbox suggest-gears` / `gearbox run --json` agree exactly."""
import json
import subprocess

import numpy as np
import pytest

import gearbox

# Counters and MODELED figures are deterministic; measured times are not compared.
COUNTERS = ("iterations", "graph_compiles", "kernel_compiles", "launches", "syncs", "allocations",
            "plan_cache_hits", "kernel_cache_hits", "fallback_runs", "peak_bytes")


def test_suggest_gears_is_the_cli_suggestion(repo, cli, tmp_path):
    model = str(repo / "examples" / "mlp.gbx")
    trace = str(repo / "examples" / "mlp_serving.trace.jsonl")
    out = tmp_path / "s.json"
    subprocess.run([cli, "suggest-gears", model, "--trace", trace, "--json", str(out)],
                   check=True, capture_output=True)
    want = json.loads(out.read_text())
    got = gearbox.suggest_gears(gearbox.load(model), trace)
    assert got["gears"] == want["gears"]
    assert got["gears_json"] == want["gears_json"]
    assert got["method"] == want["method"]
    assert [(c["name"], c["graph_compiles"], c["modeled"]) for c in got["candidates"]] == \
        [(c["name"], c["graph_compiles"], c["modeled"]) for c in want["candidates"]]


def test_suggested_gears_run_in_a_geared_session(repo):
    g = gearbox.load(str(repo / "examples" / "seed001_add.gbx"))
    trace = [{"x1": [b, 2], "x2": [b, 2]} for b in (3, 9, 17, 30, 3, 9, 5, 12)]
    sug = gearbox.suggest_gears(g, trace, references=False)
    assert sug["calls"] == len(trace)
    s = gearbox.Session(g, mode="geared", gears=sug["gears_json"], gear_fallback="pad")
    for t in trace:
        s.run(np.ones(t["x1"], np.float32), np.ones(t["x2"], np.float32))
    # Every gear compiled up front, and every call served by one of them.
    assert s.stats["graph_compiles"] == len(sug["gears"])
    assert s.stats["iterations"] == len(trace)


def test_suggest_gears_checks_its_options(repo):
    g = gearbox.load(str(repo / "examples" / "seed001_add.gbx"))
    trace = [{"x1": [b, 2], "x2": [b, 2]} for b in (3, 9)]
    with pytest.raises(gearbox.Error, match="max_gears -1"):
        gearbox.suggest_gears(g, trace, max_gears=-1)
    with pytest.raises(gearbox.Error, match="merge"):
        gearbox.suggest_gears(g, trace, merge="zipper")
    with pytest.raises(gearbox.Error):
        gearbox.suggest_gears(g, trace, cost=["launch_us=nan"])


def test_suggest_gears_budgets_match_the_cli(repo, cli, tmp_path):
    # Issue 25: --max-memory / --max-startup / --graph-pool; the same table from both front ends.
    model = str(repo / "examples" / "mlp.gbx")
    trace = str(repo / "examples" / "mlp_serving.trace.jsonl")
    free = gearbox.suggest_gears(gearbox.load(model), trace, references=False,
                                 graph_pool="separate")
    budget = free["candidates"][0]["modeled"]["memory_bytes"] - 1
    out = tmp_path / "s.json"
    subprocess.run([cli, "suggest-gears", model, "--trace", trace, "--no-references",
                    "--graph-pool", "separate", "--max-memory", str(budget), "--json", str(out)],
                   check=True, capture_output=True)
    want = json.loads(out.read_text())
    got = gearbox.suggest_gears(gearbox.load(model), trace, references=False,
                                graph_pool="separate", max_memory=str(budget))
    assert got["gears"] == want["gears"] != free["gears"]
    assert got["budgets"] == want["budgets"] == {
        "max_memory_bytes": budget, "max_startup_us": 0.0, "graph_pool": "separate"}
    assert got["candidates"][0]["modeled"]["memory_bytes"] <= budget
    assert any(c["pareto"] for c in got["candidates"])
    with pytest.raises(gearbox.Error, match="max_memory"):
        gearbox.suggest_gears(gearbox.load(model), trace, max_memory="lots")
    with pytest.raises(gearbox.Error, match="graph_pool"):
        gearbox.suggest_gears(gearbox.load(model), trace, graph_pool="pooled")
    with pytest.raises(gearbox.Error, match="max_startup_us"):
        gearbox.suggest_gears(gearbox.load(model), trace, max_startup_us=float("nan"))


def test_suggest_gears_gear_fallback_matches_the_cli_and_the_run(repo, cli, tmp_path):
    # Issue 25 item 4: gear_fallback= is --gear-fallback. On the rare-large trace the
    # pad+dynamic suggestion leaves the seven large batches to the dynamic fallback, and a
    # model-only geared session of it reports what the row predicted.
    model = str(repo / "examples" / "mlp.gbx")
    trace = str(repo / "examples" / "mlp_rare_large.trace.jsonl")
    out = tmp_path / "s.json"
    subprocess.run([cli, "suggest-gears", model, "--trace", trace, "--no-references",
                    "--gear-fallback", "pad+dynamic", "--json", str(out)],
                   check=True, capture_output=True)
    want = json.loads(out.read_text())
    g = gearbox.load(model)
    got = gearbox.suggest_gears(g, trace, references=False, gear_fallback="pad+dynamic")
    assert got["gear_fallback"] == want["gear_fallback"] == "pad+dynamic"
    assert got["gears"] == want["gears"] == [[8], [512]]
    row = got["candidates"][0]
    assert row["fallback_calls"] == 7 and row["padded_calls"] == 0
    assert [(c["name"], c["modeled"]) for c in got["candidates"]] == \
        [(c["name"], c["modeled"]) for c in want["candidates"]]
    s = gearbox.Session(g, mode="geared", gears=got["gears_json"],
                        gear_fallback=got["gear_fallback"], model_only=True)
    weights = [np.zeros([1024, 1024], np.float32), np.zeros([1024], np.float32)] * 2
    xs = {}
    for line in open(trace):
        if line.startswith("#"):
            continue
        b = json.loads(line)["x"][0]
        x = xs.setdefault(b, np.zeros([b, 1024], np.float32))
        s.run(x, *weights)
    report = s.report()
    assert report["graph_compiles"] == row["graph_compiles"] == 3
    assert report["mode_counters"]["fallback_calls"] == 7
    assert report["modeled"]["total_us"] == pytest.approx(row["modeled"]["total_us"], rel=1e-9)
    assert report["modeled_peak_bytes"] == row["modeled"]["memory_bytes"]
    with pytest.raises(gearbox.Error, match="gear_fallback 'graph'"):
        gearbox.suggest_gears(g, trace, gear_fallback="graph")


def test_report_is_the_cli_run_report(repo, cli, tmp_path):
    model = str(repo / "examples" / "seed001_add.gbx")
    trace = str(repo / "examples" / "seed001_add.trace.jsonl")
    out = tmp_path / "r.json"
    subprocess.run([cli, "run", model, "--trace", trace, "--mode", "static", "--json", str(out),
                    "-q"], check=True, capture_output=True)
    want = json.loads(out.read_text())
    s = gearbox.Session(gearbox.load(model), mode="static")
    for line in open(trace):
        shapes = json.loads(line)
        s.run(*[np.ones(shapes[k], np.float32) for k in ("x1", "x2")])
    got = s.report(trace)
    assert got["schema_version"] == want["schema_version"]
    for key in COUNTERS:
        assert got[key] == want[key], key
    assert got["modeled"] == want["modeled"]
    assert len(got["per_iteration"]) == len(want["per_iteration"])
    written = tmp_path / "py.json"
    s.write_report(str(written), trace)
    from_file = json.loads(written.read_text())
    assert [r["graph_compiled"] for r in from_file["per_iteration"]] == \
        [r["graph_compiled"] for r in want["per_iteration"]]
    with pytest.raises(gearbox.Error, match="is a directory"):
        s.write_report(str(tmp_path))
