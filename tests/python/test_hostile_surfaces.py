"""Hostile inputs on the Python surfaces (issue 22): the Session's options, bytes that are not
UTF-8, and the ONNX importer's file rules (python/gearbox/_safe_io.py). Every case is a
gearbox.Error (or, through the CLI, one line on stderr and exit 2), never a crash, a traceback,
a hang or a file written half-way."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import gearbox

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEED = os.path.join(REPO, "examples", "seed001_add.gbx")
SEED_TRACE = os.path.join(REPO, "examples", "seed001_add.trace.jsonl")


def deep_gears(depth):
    return '{"x1": ' + "[" * depth + "]" * depth + "}"


# ---- Session options ---------------------------------------------------------------------------


def test_deep_gears_is_a_gearbox_error_not_a_segfault(tmp_path, env):
    # In a child: a regression to the segfault must fail this test, not kill the test run.
    deep = tmp_path / "deep.json"
    deep.write_text(deep_gears(100000))
    code = ("import gearbox\n"
            f"g = gearbox.load({SEED!r})\n"
            "try:\n"
            f"    s = gearbox.Session(g, mode='geared', gears=open({str(deep)!r}).read())\n"
            "    s.stats\n"
            "    print('accepted')\n"
            "except gearbox.Error as e:\n"
            "    print('refused', e.kind, str(e)[:80])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("refused gear"), proc.stdout
    assert "nested deeper than 64 levels" in proc.stdout


def test_geared_session_with_malformed_gears_fails_at_construction():
    g = gearbox.load(SEED)
    with pytest.raises(gearbox.Error) as e:
        gearbox.Session(g, mode="geared", gears="{")
    assert e.value.kind == "gear"


def test_gears_for_a_mode_without_gears_is_an_error():
    g = gearbox.load(SEED)
    for mode in ("static", "eager", "dynamic", "auto"):
        with pytest.raises(gearbox.Error, match='gears= is for mode="geared"'):
            gearbox.Session(g, mode=mode, gears={"x1": {"0": [2, 4]}, "x2": {"0": [2, 4]}})
    # Geared still takes them.
    gearbox.Session(g, mode="geared", gears={"x1": {"0": [2, 4]}, "x2": {"0": [2, 4]}})


@pytest.mark.parametrize("cost", [b"name=\xff", b"sync_policy=\xff", b"kernel_compile_us.\xc3=3",
                                  b"launch_us=\xed\xa0\x80"])
def test_cost_bytes_that_are_not_utf8_are_a_gearbox_error(cost):
    g = gearbox.load(SEED)
    with pytest.raises(gearbox.Error, match="--cost: not valid UTF-8") as e:
        gearbox.Session(g, mode="static", cost=[cost])
    assert e.value.kind == "config"


@pytest.mark.parametrize("cost", ["launch_us=1e308", "memory_gbps=5e-324",
                                  "generic_kernel_efficiency=5e-324",
                                  "kernel_compile_us.MatMul=1e308"])
def test_profile_values_outside_their_range_are_a_gearbox_error(cost):
    g = gearbox.load(SEED)
    key = cost.split("=")[0]
    with pytest.raises(gearbox.Error, match=f"{key} = .* is outside its physical range"):
        gearbox.Session(g, mode="static", cost=[cost])


def test_a_model_file_name_in_latin1_keeps_stats_history_and_compare(tmp_path):
    path = os.path.join(os.fsencode(str(tmp_path)), b"m\xe9.gbx")
    shutil.copyfile(SEED, path)
    g = gearbox.load(path)  # a bytes path: the name is not UTF-8
    s = gearbox.Session(g, mode="static")
    s.run(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
    assert s.stats["iterations"] == 1
    assert len(s.history) == 1
    (rec,) = gearbox.compare(g, [{"x1": [2, 2], "x2": [2, 2]}], ["static"])
    assert rec["model"].endswith("m\ufffd.gbx")


def test_any_cpp_exception_reaches_python_as_gearbox_error():
    # A gearbox.Error subclass of RuntimeError: code catching RuntimeError keeps working.
    assert issubclass(gearbox.Error, RuntimeError)
    g = gearbox.load(SEED)
    with pytest.raises(gearbox.Error):
        gearbox.Session(g, mode="geared", gears={"x1\udcff": {"0": [2, 4]}})
