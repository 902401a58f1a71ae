"""gearbox.sweep against `gearbox sweep` (docs/sweep.md): the same grid writes the same JSON
bytes from both front ends, the rows hold exact counters, and a bad axis raises gearbox.Error
where the CLI exits 2."""
import json
import subprocess

import pytest

import gearbox

MODEL = "examples/seed001_add.gbx"
TRACE = "examples/seed001_add.trace.jsonl"


def test_sweep_matches_the_cli(repo, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(repo)
    py_json, cli_json = tmp_path / "py.json", tmp_path / "cli.json"
    r = gearbox.sweep(MODEL, TRACE, grid={"recompile_limit": [1, 2, 8],
                                          "on_recompile_limit": ["fallback", "error"]},
                      json=str(py_json))
    assert r["exit_status"] == 0
    subprocess.run([cli, "sweep", MODEL, "--trace", TRACE, "--grid", "recompile_limit=1,2,8",
                    "--grid", "on_recompile_limit=fallback,error", "--json", str(cli_json)],
                   check=True, capture_output=True)
    assert py_json.read_bytes() == cli_json.read_bytes()
    points = r["report"]["points"]
    assert [p["axes"]["recompile_limit"] for p in points] == ["1", "1", "2", "2", "8", "8"]
    # Sizes 2, 3, 4, 4, 5, 5, 6: limit 1 compiles one plan, the 6 other calls fall back.
    assert points[0]["row"]["graph compiles"] == 1 and points[0]["row"]["fallback calls"] == 6
    assert points[4]["row"]["graph compiles"] == 5 and points[4]["row"]["fallback calls"] == 0
    # Under `error` the limit fails the point: a row saying so, not a failed sweep.
    assert not points[1]["ok"] and points[1]["error"]["kind"] == "recompile limit"
    assert points[5]["ok"]


def test_sweep_options_and_errors(repo, monkeypatch):
    monkeypatch.chdir(repo)
    r = gearbox.sweep(MODEL, TRACE, grid={"mode": list(gearbox.MODES[:2])}, recompile_limit=2)
    assert [p["report"]["config"]["recompile_limit"] for p in r["report"]["points"]] == [2, 2]
    # A repeatable option's axis value is one item of it.
    c = gearbox.sweep(MODEL, TRACE, grid={"cost": ["graph_launch_base_us=1", "graph_launch_base_us=50"]})
    totals = [p["row"]["modeled total (us)"] for p in c["report"]["points"]]
    assert totals[0] < totals[1]
    with pytest.raises(gearbox.Error, match="recompile_limit=0"):
        gearbox.sweep(MODEL, TRACE, grid={"recompile_limit": [0]})
    with pytest.raises(gearbox.Error, match="no run option of that name"):
        gearbox.sweep(MODEL, TRACE, grid={"recompile_limt": [1]})
    with pytest.raises(gearbox.Error, match="unknown option 'repeat'"):
        gearbox.sweep(MODEL, TRACE, repeat=2)
