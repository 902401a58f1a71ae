"""The Python bindings: graphs, Sessions, NumPy in and out, stats, history, gears, compare,
errors (docs/python.md)."""
import json
import subprocess

import numpy as np
import pytest

import gearbox

SEED001 = """graph seed001(%x1: f32[-1, 2], %x2: f32[-1, 2]) {
  %y = add(%x1, %x2)
  return %y
}
"""


def ones(*shape):
    return np.ones(shape, np.float32)


def test_version_matches_cli(cli):
    out = subprocess.run([cli, "--version"], capture_output=True, text=True, check=True).stdout
    # The first line is the version; the second the ISA the kernels run with (compiler/cpu_isa.h).
    lines = out.strip().split("\n")
    assert lines[0] == f"gearbox {gearbox.__version__}"
    assert lines[1].startswith("isa: ")


def test_parse_and_load(repo):
    g = gearbox.parse(SEED001)
    assert g.name == "seed001"
    assert g.inputs == [
        {"name": "x1", "dtype": "f32", "shape": [-1, 2]},
        {"name": "x2", "dtype": "f32", "shape": [-1, 2]},
    ]
    assert g.outputs == ["y"]
    loaded = gearbox.load(str(repo / "examples" / "seed001_add.gbx"))
    assert loaded.text() == g.text()


def test_builder_matches_reference():
    b = gearbox.GraphBuilder("demo")
    x = b.input("x", "f32", ["B", 4])
    w = b.constant(np.arange(12, dtype=np.float32).reshape(4, 3), "w")
    m = b.matmul(b.add(x, x), w)
    idx = b.constant(np.array([2, 0], np.int64), "idx")
    o = b.index_select(b.cat([m, m], dim=1), idx, dim=1)
    b.output(o)
    assert b.shape(o) == ["B", 2]
    g = b.build()
    s = gearbox.Session(g, mode="static")
    rng = np.random.default_rng(0)
    for rows in (1, 3, 7):
        xv = rng.standard_normal((rows, 4)).astype(np.float32)
        (y,) = s.run(xv)
        (ref,) = gearbox.reference_run(g, xv)
        expect = ((xv + xv) @ np.arange(12, dtype=np.float32).reshape(4, 3))[:, [2, 0]]
        np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(y, expect, rtol=1e-5, atol=1e-5)
    assert s.stats["graph_compiles"] == 3


@pytest.mark.parametrize("device", ["inline", "stream"])
# Every mode of the mode table that runs without gear specs.
@pytest.mark.parametrize("mode", [m for m in gearbox.MODES if m != "geared"])
def test_every_mode_against_reference(mode, device):
    g = gearbox.parse(SEED001)
    # "stream" runs kernels on a worker thread: the wrapped NumPy inputs are read there.
    s = gearbox.Session(g, mode=mode, device=device)
    rng = np.random.default_rng(1)
    for rows in (1, 2, 5, 2):
        a = rng.standard_normal((rows, 2)).astype(np.float32)
        c = rng.standard_normal((rows, 2)).astype(np.float32)
        (y,) = s.run(a, c)
        np.testing.assert_array_equal(y, a + c)
    assert s.stats["iterations"] == 4


def test_stats_and_history_static():
    s = gearbox.Session(gearbox.parse(SEED001), mode="static")
    for rows in (2, 4, 2):
        s.run(ones(rows, 2), ones(rows, 2))
    st = s.stats
    assert st["mode"] == "static"
    assert (st["graph_compiles"], st["plan_cache_hits"], st["iterations"]) == (2, 1, 3)
    h = s.history
    assert [r["shapes"] for r in h] == [
        {"x1": [2, 2], "x2": [2, 2]},
        {"x1": [4, 2], "x2": [4, 2]},
        {"x1": [2, 2], "x2": [2, 2]},
    ]
    assert [r["graph_compiled"] for r in h] == [True, True, False]
    assert h[0]["reason"] == "first call"
    assert h[1]["guard_failures"]  # why (4, 2) missed the (2, 2) plan
    assert isinstance(h[1]["guard_failures"][0], str)
    # Plan ids count per process, so the guard names whatever id the first call's plan got.
    assert h[1]["guards"][0] == {"plan": h[0]["plan"], "input": "x1", "dim": 0, "expected": 2,
                                 "actual": 4, "text": h[1]["guard_failures"][0]}
    assert [g["input"] for g in h[1]["guards"]] == ["x1", "x2"]
    json.dumps(h)  # plain data


def test_inputs_by_name_and_dict():
    s = gearbox.Session(gearbox.parse(SEED001))
    (a,) = s.run(x2=ones(2, 2), x1=ones(2, 2) * 3)
    (b,) = s.run({"x1": ones(2, 2) * 3, "x2": ones(2, 2)})
    np.testing.assert_array_equal(a, b)
    assert (a == 4).all()


def test_no_copy_for_contiguous_inputs_and_outputs():
    s = gearbox.Session(gearbox.parse(SEED001))
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    (y,) = s.run(x, x)
    assert s.input_copies == 0
    assert not y.flags.owndata  # the array views the output tensor's storage
    assert y.flags.c_contiguous and y.dtype == np.float32
    # A transposed view is not C-contiguous: copied once (counted), result still right.
    t = np.arange(8, dtype=np.float32).reshape(2, 4).T
    (z,) = s.run(t, x)
    assert s.input_copies == 1
    np.testing.assert_array_equal(z, t + x)
    # An offset (4-byte aligned, not 64-byte aligned) contiguous slice is wrapped too.
    base = np.arange(17, dtype=np.float32)
    v = base[1:].reshape(8, 2)
    (w,) = s.run(v, v)
    assert s.input_copies == 1
    np.testing.assert_array_equal(w, v + v)


def test_output_outlives_session():
    s = gearbox.Session(gearbox.parse(SEED001))
    (y,) = s.run(ones(3, 2), ones(3, 2))
    del s
    assert (y == 2).all()


def test_geared_set_dim_gears():
    s = gearbox.Session(gearbox.parse(SEED001), mode="geared")
    gearbox.set_dim_gears(s, "x1", {0: [2, 4]})
    gearbox.set_dim_gears(s, "x2", {0: [2, 4]})
    for rows in (2, 4, 2):
        (y,) = s.run(ones(rows, 2), ones(rows, 2))
        assert y.shape == (rows, 2)
    st = s.stats
    assert (st["gears"], st["graph_compiles"], st["padded_calls"]) == (2, 2, 0)
    assert [r["gear"] for r in s.history] == [0, 1, 0]
    with pytest.raises(gearbox.Error) as e:
        s.run(ones(3, 2), ones(3, 2))
    assert e.value.kind == "gear"


def test_geared_pad_fallback_and_gears_option():
    s = gearbox.Session(
        gearbox.parse(SEED001),
        mode="geared",
        gears={"x1": {"0": [2, 4]}, "x2": {"0": [2, 4]}},
        gear_fallback="pad",
    )
    (y,) = s.run(ones(3, 2), ones(3, 2))
    assert y.shape == (3, 2) and (y == 2).all()
    assert s.stats["padded_calls"] == 1
    assert s.history[0]["padded"] is True


def test_geared_dynamic_and_eager_fallbacks_and_lazy_gears():
    # Calls above the largest gear take the fallback; each is counted, and the outputs are
    # exact. dynamic compiles one plan more than the gears; eager none.
    gears = {"x1": {"0": [2, 4]}, "x2": {"0": [2, 4]}}
    for fallback, compiles in (("dynamic", 3), ("eager", 2)):
        s = gearbox.Session(gearbox.parse(SEED001), mode="geared", gears=gears,
                            gear_fallback=fallback)
        for rows in (2, 9, 4, 12):
            (y,) = s.run(ones(rows, 2), ones(rows, 2))
            np.testing.assert_array_equal(y, 2 * ones(rows, 2))
        st = s.stats
        assert st["graph_compiles"] == compiles
        assert st["mode_counters"] == {"fallback_calls": 2}
        assert st["config"]["gears"]["fallback"] == fallback
        assert [r["gear"] for r in s.history] == [0, -1, 1, -1]
        assert [r.get("mode_fields", {}).get("gear_fallback") for r in s.history] == [
            None, fallback, None, fallback]
    # Lazy gears: nothing up front, a gear compiles in its first call, gear 4 never.
    s = gearbox.Session(gearbox.parse(SEED001), mode="geared", gears=gears, gear_compile="lazy")
    s.compile_gears()
    assert s.stats["startup"]["up_front_graph_compiles"] == 0
    for rows in (2, 2):
        s.run(ones(rows, 2), ones(rows, 2))
    st = s.stats
    assert (st["graph_compiles"], st["gears"]) == (1, 2)
    assert st["mode_counters"] == {"gears_compiled_on_first_use": 1}
    assert st["config"]["gears"]["compile"] == "lazy"
    assert [r["graph_compiled"] for r in s.history] == [True, False]
    assert st["startup"]["modeled_first_call_us"] == s.history[0]["modeled_device_us"]


def test_set_dim_gears_errors_like_torchair():
    s = gearbox.Session(gearbox.parse(SEED001), mode="geared")
    with pytest.raises(gearbox.Error) as e:
        gearbox.set_dim_gears(s, "x1", {1: [2, 4]})  # dim 1 is static (2)
    assert e.value.kind == "gear"
    with pytest.raises(gearbox.Error):
        gearbox.set_dim_gears(s, "nope", {0: [2, 4]})


def test_recompile_limit_error():
    s = gearbox.Session(
        gearbox.parse(SEED001), mode="static", recompile_limit=2, on_recompile_limit="error"
    )
    s.run(ones(1, 2), ones(1, 2))
    s.run(ones(2, 2), ones(2, 2))
    with pytest.raises(gearbox.Error) as e:
        s.run(ones(3, 2), ones(3, 2))
    assert e.value.kind == "limit"


def test_compare_records(repo):
    records = gearbox.compare(
        str(repo / "examples" / "seed001_add.gbx"),
        str(repo / "examples" / "seed001_add.trace.jsonl"),
    )
    # The default set: every mode that needs no gears, in the mode table's order.
    assert [r["mode"] for r in records] == [m for m in gearbox.MODES if m != "geared"]
    by_mode = {r["mode"]: r for r in records}
    assert by_mode["dynamic"]["graph_compiles"] == 1
    for r in records:
        assert r["iterations"] == 7
        assert r["max_abs_diff_vs_reference"] == 0
    # The same counters as the CLI's `gearbox run --json`.
    geared = gearbox.compare(
        gearbox.parse(SEED001),
        [{"x1": [2, 2], "x2": [2, 2]}, {"x1": [4, 2], "x2": [4, 2]}],
        gears={"x1": {"0": [2, 4]}, "x2": {"0": [2, 4]}},
    )
    # With gears, every mode of the table runs, in its order.
    assert [r["mode"] for r in geared] == list(gearbox.MODES)
    assert {r["mode"]: r for r in geared}["geared"]["gears"] == 2
    # Records are flat dicts of plain values: what pandas.DataFrame(records) takes (pandas is
    # not a dependency; where it is installed the table is built too).
    for r in records:
        assert all(isinstance(v, (int, float, str, bool, list)) for v in r.values())
    try:
        import pandas
    except ImportError:
        return
    assert len(pandas.DataFrame(records)) == len(records)


def test_reduce_overhead_counters_fields_and_mode_options():
    # The mode's own option, counters and per-call fields pass through the binding by name.
    s = gearbox.Session(gearbox.parse(SEED001), mode="reduce-overhead",
                        mode_options=["reduce-overhead.capture_limit=2"])
    for rows in (2, 3, 2, 4):
        (y,) = s.run(ones(rows, 2), ones(rows, 2))
        np.testing.assert_array_equal(y, 2 * ones(rows, 2))
    st = s.stats
    assert st["mode_counters"] == {"captures": 2, "replays": 1, "eager_runs": 1,
                                   "capture_limit": 2}
    assert st["config"]["mode_options"] == {"capture_limit": "2"}
    assert [r["mode_fields"]["capture"] for r in s.history] == [
        "captured #1", "captured #2", "replayed #1", "eager (capture limit)"]
    assert [r["launches"] for r in s.history] == [1, 1, 1, 1]
    with pytest.raises(gearbox.Error, match="takes no option 'nope'"):
        gearbox.Session(gearbox.parse(SEED001), mode="reduce-overhead",
                        mode_options=["reduce-overhead.nope=1"])
    with pytest.raises(gearbox.Error, match="capture_limit=0"):
        gearbox.Session(gearbox.parse(SEED001), mode="reduce-overhead",
                        mode_options=["reduce-overhead.capture_limit=0"])


def test_compare_matches_cli_json(repo, cli, tmp_path):
    model = str(repo / "examples" / "seed001_add.gbx")
    trace = str(repo / "examples" / "seed001_add.trace.jsonl")
    out = tmp_path / "r.json"
    subprocess.run(
        [cli, "run", model, "--trace", trace, "--mode", "auto", "--json", str(out), "--quiet"],
        check=True,
        capture_output=True,
    )
    cli_report = json.loads(out.read_text())
    (rec,) = gearbox.compare(model, trace, modes=["auto"])
    for key in ("graph_compiles", "kernel_compiles", "plan_cache_hits", "launches", "syncs",
                "allocations", "modeled_device_us"):
        assert rec[key] == cli_report[key], key


def test_errors_match_cli(tmp_path, cli):
    bad = tmp_path / "bad.gbx"
    bad.write_text("graph g(%x: f32[2]) {\n  %y = add(%x, %nope)\n  return %y\n}\n")
    with pytest.raises(gearbox.Error) as e:
        gearbox.load(str(bad))
    proc = subprocess.run([cli, "print", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"gearbox: {e.value.label}: {e.value}"
    assert (e.value.kind, e.value.label) == ("parse", "parse error")
    assert isinstance(e.value, RuntimeError)


def test_bad_inputs_raise():
    s = gearbox.Session(gearbox.parse(SEED001))
    with pytest.raises(gearbox.Error) as e:
        s.run(ones(2, 3), ones(2, 3))  # dim 1 must be 2
    assert e.value.kind == "shape" and "x1" in str(e.value)
    with pytest.raises(gearbox.Error, match="dtype"):
        s.run(np.ones((2, 2)), ones(2, 2))  # float64
    with pytest.raises(gearbox.Error, match="missing"):
        s.run(x1=ones(2, 2))
    with pytest.raises(gearbox.Error, match="unknown mode"):
        gearbox.Session(gearbox.parse(SEED001), mode="fast")
    with pytest.raises(gearbox.Error, match="unknown option"):
        gearbox.Session(gearbox.parse(SEED001), recompile_limitt=3)
    with pytest.raises(gearbox.Error, match="recompile-limit"):
        gearbox.Session(gearbox.parse(SEED001), recompile_limit=0)


def test_seed001_walkthrough_example(repo, env):
    proc = subprocess.run(
        ["/usr/bin/python3", str(repo / "examples" / "python" / "seed001_walkthrough.py")],
        capture_output=True, text=True, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "dynamicDims = 2,2;4,4" in proc.stdout


def _typed_default(row):
    """An option's default as the Python value a caller would pass."""
    text = row["default"]
    return {"TEXT": lambda: text, "FLAG": lambda: text == "true", "INT": lambda: int(text),
            "UINT": lambda: int(text), "FLOAT": lambda: float(text),
            "LIST": lambda: [v for v in text.split(",") if v]}[row["type"]]()


def test_every_option_of_the_table_reaches_python(repo, cli):
    """driver/run_options.def against the binding and the CLI: every option of run and compare
    is a Python keyword with the same name and default. gearbox.run and gearbox.compare_report
    take every row of their command; Session and compare's records take the session options
    (and say why not the others); the CLI lists every row."""
    import inspect

    rows = gearbox.run_options()
    run_help = subprocess.run([cli, "run", "--help"], capture_output=True, text=True).stdout
    compare_help = subprocess.run([cli, "compare", "--help"], capture_output=True,
                                  text=True).stdout
    model = str(repo / "examples" / "seed001_add.gbx")
    trace = str(repo / "examples" / "seed001_add.trace.jsonl")
    # Arguments of the wrappers (model, trace, mode, modes) rather than **options.
    arguments = {"run": inspect.signature(gearbox.run).parameters,
                 "compare": inspect.signature(gearbox.compare_report).parameters}
    keywords, session_keywords = set(), set()
    for row in rows:
        assert row["run"] or row["compare"], row
        if row["run"]:
            assert row["cli"] in run_help, row["cli"]
        if row["compare"]:
            assert row["cli"] in compare_help, row["cli"]
        # Issue 21: no option of run or compare is out of Python's reach.
        assert row["python"] is not None, f"{row['cli']}: {row['not_in_python']}"
        expected = "asserts" if row["name"] == "assert" else row["name"].replace("-", "_").lower()
        assert row["python"] == expected
        keywords.add(row["python"])
        value = _typed_default(row)
        for command, call in (("run", gearbox.run), ("compare", gearbox.compare_report)):
            if not row[command]:
                continue
            if row["python"] in arguments[command]:
                param = arguments[command][row["python"]]
                if row["required"]:
                    assert param.default is inspect.Parameter.empty, row["python"]
                else:
                    # None is the CLI's default set of modes (it grows with gears=).
                    assert param.default in (value, None), row["python"]
                if row["required"]:
                    continue
            # The default, given explicitly, is taken and changes nothing.
            extra = {} if command == "run" else {"modes": "static", "repeat": 1}
            extra[row["python"]] = value
            result = call(model, trace, **extra)
            assert result["exit_status"] == 0, (row["python"], result["errors"])
            assert result["report"]["complete"]
        if not row["session"]:
            assert row["not_in_session"], f"{row['cli']}: say why a Session does not take it"
            if row["python"] == "mode":  # Session's own argument
                assert gearbox.Session(gearbox.parse(SEED001), mode=value).mode == value
                continue
            with pytest.raises(gearbox.Error, match="gearbox.run and gearbox.compare_report"):
                gearbox.Session(gearbox.parse(SEED001), **{row["python"]: value})
            continue
        session_keywords.add(row["python"])
        s = gearbox.Session(gearbox.parse(SEED001), mode="static", **{row["python"]: value})
        s.run(ones(2, 2), ones(2, 2))
        records = gearbox.compare(gearbox.parse(SEED001), [{"x1": [2, 2], "x2": [2, 2]}],
                                  ["static"], **{row["python"]: value})
        assert records[0]["iterations"] == 1
        if row["alias"]:
            gearbox.Session(gearbox.parse(SEED001), **{row["alias"]: value})
    # The options issue 21 found missing from Python are there now.
    assert {"model_only", "pad_to", "max_pad_bytes", "history_limit"} <= session_keywords
    assert {"json", "junit", "asserts", "html", "timeline", "repeat", "quiet",
            "check_reference", "iterations", "explain"} <= keywords
    with pytest.raises(gearbox.Error) as e:
        gearbox.Session(gearbox.parse(SEED001), no_such_option=1)
    for k in session_keywords:
        assert k in str(e.value)
    with pytest.raises(gearbox.Error, match="unknown option 'no_such_option'"):
        gearbox.run(model, trace, no_such_option=1)
    with pytest.raises(gearbox.Error, match="html is a keyword of gearbox.compare_report"):
        gearbox.run(model, trace, html="x.html")


def test_options_are_checked_as_the_cli_checks_them():
    g = gearbox.parse(SEED001)
    with pytest.raises(gearbox.Error, match="device 'gpu': expected inline or stream"):
        gearbox.Session(g, device="gpu")
    with pytest.raises(gearbox.Error, match="kernel_cache_capacity"):
        gearbox.Session(g, kernel_cache_capacity=0)
    with pytest.raises(gearbox.Error, match="history_limit"):
        gearbox.Session(g, history_limit=-1)
    with pytest.raises(gearbox.Error, match="expected an integer"):
        gearbox.Session(g, seed="x")
    s = gearbox.Session(g, mode="static", history_limit=2, model_only=True)
    for rows in (2, 3, 4, 5, 6):
        s.run(ones(rows, 2), ones(rows, 2))
    st = s.stats
    assert st["model_only"] and st["config"]["history_limit"] == 2
    assert st["per_iteration_dropped"] > 0
    # pad_to and max_pad_bytes reach a geared session as --pad-to and --max-pad-bytes do.
    s = gearbox.Session(g, mode="geared", pad_to=["x1=8,2", "x2=8,2"], max_pad_bytes=1 << 20)
    (y,) = s.run(ones(3, 2), ones(3, 2))
    assert y.shape == (3, 2) and s.stats["config"]["gears"]["max_pad_bytes"] == 1 << 20
    assert s.stats["config"]["gears"]["pad_to"] == {"x1": [8, 2], "x2": [8, 2]}
    # no_passes is --no-passes; passes=False, its older spelling, still works.
    assert not gearbox.Session(g, no_passes=True).stats["config"]["passes"]
    assert not gearbox.Session(g, passes=False).stats["config"]["passes"]
