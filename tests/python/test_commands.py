"""gearbox.run and gearbox.compare_report against `gearbox run` and `gearbox compare` (issue 21:
one driver under both front ends): the same options write the same files (the same counters
and MODELED figures; measured times differ run to run) and give the same exit status."""
import json
import re
import subprocess

import pytest

import gearbox

MODEL = "examples/seed001_add.gbx"
TRACE = "examples/seed001_add.trace.jsonl"
# Three modes of the mode table (tests/mode_table_test.cpp bans hand-written lists).
THREE = [m for m in gearbox.MODES if m != "auto" and not m.startswith("reduce")][:3]
TWO = [THREE[1], THREE[2]]


def _without_measured(j):
    """A report with every measured figure (and the spread verdict built on them) left out."""
    if isinstance(j, dict):
        return {k: _without_measured(v) for k, v in j.items()
                if not k.startswith("measured") and not k.endswith("_seconds")}
    if isinstance(j, list):
        return [_without_measured(v) for v in j]
    return j


def _junit_cases(path):
    """The testcases of a JUnit file and whether each failed, without the times."""
    text = path.read_text()
    return re.sub(r'\s(time|timestamp)="[^"]*"', "", text)


def _timeline_events(path):
    """The timeline's events by name, phase and process, without their measured times."""
    events = json.loads(path.read_text())["traceEvents"]
    return sorted((e.get("name", ""), e.get("ph", ""), str(e.get("pid", ""))) for e in events)


def _cli(cli, repo, *args):
    return subprocess.run([cli, *args], capture_output=True, text=True, cwd=repo)


@pytest.fixture
def at_repo(repo, monkeypatch):
    # The reports name the model and trace as given: both front ends get the same paths.
    monkeypatch.chdir(repo)
    return repo


def test_run_writes_what_the_cli_writes(cli, at_repo, tmp_path):
    opts = ["--mode", "dynamic", "--assert", "graph_compiles<=3", "--iterations", "compiles"]
    proc = _cli(cli, at_repo, "run", MODEL, "--trace", TRACE, *opts,
                "--json", str(tmp_path / "cli.json"), "--junit", str(tmp_path / "cli.xml"),
                "--timeline", str(tmp_path / "cli.trace.json"),
                "--jsonl", str(tmp_path / "cli.jsonl"))
    assert proc.returncode == 0, proc.stderr
    result = gearbox.run(MODEL, TRACE, mode="dynamic", asserts=["graph_compiles<=3"],
                         iterations="compiles", json=tmp_path / "py.json",
                         junit=str(tmp_path / "py.xml"), timeline=str(tmp_path / "py.trace.json"),
                         jsonl=str(tmp_path / "py.jsonl"))
    assert result["exit_status"] == 0, result["errors"]
    cli_report = json.loads((tmp_path / "cli.json").read_text())
    assert _without_measured(result["report"]) == _without_measured(cli_report)
    assert result["report"]["graph_compiles"] == cli_report["graph_compiles"]
    assert _junit_cases(tmp_path / "py.xml") == _junit_cases(tmp_path / "cli.xml")
    assert _timeline_events(tmp_path / "py.trace.json") == \
        _timeline_events(tmp_path / "cli.trace.json")
    py_lines = [_without_measured(json.loads(line))
                for line in (tmp_path / "py.jsonl").read_text().splitlines()]
    cli_lines = [_without_measured(json.loads(line))
                 for line in (tmp_path / "cli.jsonl").read_text().splitlines()]
    assert py_lines == cli_lines and py_lines
    # The printed text is the CLI's stdout: the same lines, measured figures aside.
    assert result["output"].splitlines()[0].split()[:3] == proc.stdout.splitlines()[0].split()[:3]
    assert "timeline: " + str(tmp_path / "py.trace.json") in result["output"]


def test_a_broken_assert_is_exit_status_1_in_both(cli, at_repo, tmp_path):
    proc = _cli(cli, at_repo, "run", MODEL, "--trace", TRACE, "--mode", "dynamic", "-q",
                "--assert", "graph_compiles<=0", "--junit", str(tmp_path / "cli.xml"))
    assert proc.returncode == 1
    result = gearbox.run(MODEL, TRACE, mode="dynamic", quiet=True, asserts="graph_compiles<=0",
                         junit=str(tmp_path / "py.xml"))
    assert result["exit_status"] == 1
    assert "graph_compiles" in result["errors"] and result["errors"] == proc.stderr
    assert _junit_cases(tmp_path / "py.xml") == _junit_cases(tmp_path / "cli.xml")
    assert "<failure" in (tmp_path / "py.xml").read_text()
    # compare: a bound on one mode.
    proc = _cli(cli, at_repo, "compare", MODEL, "--trace", TRACE, "--modes", ",".join(TWO),
                "--repeat", "1", "-q", "--assert", "static.graph_compiles<=0")
    assert proc.returncode == 1
    result = gearbox.compare_report(MODEL, TRACE, TWO, repeat=1, quiet=True,
                                    asserts=["static.graph_compiles<=0"])
    assert result["exit_status"] == 1
    assert result["errors"] == proc.stderr
    # The recompile limit under `error` is a policy failing: 1 as well, not an exception.
    proc = _cli(cli, at_repo, "run", MODEL, "--trace", TRACE, "-q", "--recompile-limit", "1",
                "--on-recompile-limit", "error")
    result = gearbox.run(MODEL, TRACE, quiet=True, recompile_limit=1, on_recompile_limit="error")
    assert proc.returncode == result["exit_status"] == 1
    assert result["errors"] == proc.stderr
    assert result["report"]["complete"] is False


def test_compare_report_writes_what_the_cli_writes(cli, at_repo, tmp_path):
    common = ["--modes", ",".join(THREE), "--repeat", "2", "--check-reference"]
    proc = _cli(cli, at_repo, "compare", MODEL, "--trace", TRACE, *common,
                "--json", str(tmp_path / "cli.json"), "--junit", str(tmp_path / "cli.xml"),
                "--assert", "launches>=1", "--timeline", str(tmp_path / "cli.trace.json"),
                "--html", str(tmp_path / "cli.html"))
    assert proc.returncode == 0, proc.stderr
    result = gearbox.compare_report(
        MODEL, TRACE, ",".join(THREE), repeat=2, check_reference=True,
        json=str(tmp_path / "py.json"), junit=str(tmp_path / "py.xml"), asserts=["launches>=1"],
        timeline=str(tmp_path / "py.trace.json"), html=str(tmp_path / "py.html"))
    assert result["exit_status"] == 0, result["errors"]
    py_report = json.loads((tmp_path / "py.json").read_text())
    cli_report = json.loads((tmp_path / "cli.json").read_text())
    assert py_report == result["report"]
    assert _without_measured(py_report) == _without_measured(cli_report)
    assert list(py_report["modes"]) == THREE
    assert _junit_cases(tmp_path / "py.xml") == _junit_cases(tmp_path / "cli.xml")
    assert _timeline_events(tmp_path / "py.trace.json") == \
        _timeline_events(tmp_path / "cli.trace.json")
    py_html, cli_html = (tmp_path / "py.html").read_text(), (tmp_path / "cli.html").read_text()
    # The same page around different measured numbers (whose plots' ticks and labels differ):
    # the same headings and the same number of plots.
    headings = re.compile(r"<h[1-4][^>]*>(.*?)</h[1-4]>", re.S)
    assert headings.findall(py_html) == headings.findall(cli_html) and headings.findall(py_html)
    assert py_html.count("<svg") == cli_html.count("<svg") > 0
    # The printed comparison: the same lines, measured figures aside.
    assert "outputs agree across modes: yes" in result["output"]
    assert "outputs agree with the reference executor" in result["output"]
    # The MODELED rows and verdict are exact: the same text in both.
    modeled = [line for line in result["output"].splitlines() if "MODELED" in line]
    assert modeled and modeled == [line for line in proc.stdout.splitlines() if "MODELED" in line]


def test_commands_refuse_what_the_cli_refuses(at_repo, tmp_path):
    with pytest.raises(gearbox.Error, match="give -q or -v, not both"):
        gearbox.run(MODEL, TRACE, quiet=True, verbose=True)
    with pytest.raises(gearbox.Error, match="--jsonl is for gearbox run"):
        gearbox.compare_report(MODEL, TRACE, jsonl=str(tmp_path / "x.jsonl"))
    with pytest.raises(gearbox.Error, match="repeat"):
        gearbox.compare_report(MODEL, TRACE, repeat=0)
    with pytest.raises(gearbox.Error, match="mode 'fast'"):
        gearbox.run(MODEL, TRACE, mode="fast")
    with pytest.raises(gearbox.Error, match="repeat is a keyword of gearbox.compare_report"):
        gearbox.run(MODEL, TRACE, repeat=2)
    # Nothing was written: the options are checked before anything runs.
    assert not (tmp_path / "x.jsonl").exists()
    # A Session keeps refusing what only a whole run over a trace means.
    with pytest.raises(gearbox.Error, match="not of a Session"):
        gearbox.Session(gearbox.load(MODEL), json="r.json")
    # The log options reach the compile log, and a Session afterwards logs as before.
    result = gearbox.run(MODEL, TRACE, quiet=True, log=str(tmp_path / "compile.log"),
                         iter_markers=True)
    assert "To compile op|=====iter" in (tmp_path / "compile.log").read_text()
    assert result["exit_status"] == 0


def test_compare_report_sweep_dim_is_the_clis(cli, at_repo, tmp_path):
    """compare --sweep-dim from Python (trace None): the same sweep object as the CLI's,
    model only (exact), and the same refusals."""
    # x2's dim 0 is its own unknown (-1): --sweep-base fixes it.
    base = '{"x2": [1, 2]}'  # broadcast over x1's rows
    args = dict(sweep_dim="x1:1:1:6", sweep_base=base, modes=TWO, model_only=True, repeat=1,
                quiet=True)
    result = gearbox.compare_report(MODEL, None, json=str(tmp_path / "py.json"), **args)
    assert result["exit_status"] == 0, result["errors"]
    proc = _cli(cli, at_repo, "compare", MODEL, "--sweep-dim", "x1:1:1:6", "--sweep-base", base,
                "--modes", ",".join(TWO), "--model-only", "--repeat", "1", "-q",
                "--json", str(tmp_path / "cli.json"))
    assert proc.returncode == 0, proc.stderr
    cli_report = json.loads((tmp_path / "cli.json").read_text())
    assert _without_measured(result["report"]) == _without_measured(cli_report)
    sweep = result["report"]["sweep"]
    assert sweep["sizes"] == [1, 2, 3, 4, 5, 6] and sweep["input"] == "x1"
    assert list(sweep["modes"]) == TWO
    assert all(sweep["modes"][m]["calls"] == 6 for m in TWO)
    assert "per-call time against x1 dim 0" in result["output"]
    with pytest.raises(gearbox.Error, match="compare needs --trace, or --sweep-dim"):
        gearbox.compare_report(MODEL, None)
    with pytest.raises(gearbox.Error, match="input 'x2' dim 0 .* is dynamic too"):
        gearbox.compare_report(MODEL, None, sweep_dim="x1:1:1:6")
    with pytest.raises(gearbox.Error, match="STEP must be >= 1"):
        gearbox.compare_report(MODEL, None, sweep_dim="x1:1:0:6", sweep_base=base)
    with pytest.raises(gearbox.Error, match="give --trace or --sweep-dim, not both"):
        gearbox.compare_report(MODEL, TRACE, sweep_dim="x1:1:1:6")
