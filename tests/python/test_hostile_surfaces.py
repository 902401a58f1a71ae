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
    # Text with lone surrogates (os.fsdecode of bytes that are not UTF-8) in every string
    # option, and a value of the wrong type: gearbox.Error, kind config.
    for kwargs in ({"gears": "{\"x\udcff\": 1}"}, {"cost": ["name=\udcff"]},
                   {"device_profile": "a\udcff"}, {"dynamic_dims": "x\udcff:0"},
                   {"recompile_limit": "many"}):
        mode = "geared" if "gears" in kwargs else "static"
        with pytest.raises(gearbox.Error) as e:
            gearbox.Session(g, mode=mode, **kwargs)
        assert e.value.kind == "config", (kwargs, e.value)


# ---- the importer's file rules -----------------------------------------------------------------

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gearbox import _safe_io, onnx_import  # noqa: E402

F = TensorProto.FLOAT


def add_model(w=None, out_name="y", inputs=("x", "w"), name_w="w"):
    """y = x + w with w an initializer [3] (or the TensorProto given)."""
    if w is None:
        w = numpy_helper.from_array(np.arange(3, dtype=np.float32), name_w)
    nodes = [helper.make_node("Add", list(inputs), [out_name], name="add")]
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", F, [3])],
                              [helper.make_tensor_value_info(out_name, F, [3])], initializer=[w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def write_model(model, path):
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return str(path)


def cli_import(cli, env, model, out, timeout=60):
    return subprocess.run([cli, "import", str(model), "-o", str(out)], capture_output=True,
                          text=True, env=env, timeout=timeout)


def assert_one_line_error(proc, part):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("gearbox: "), proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert part in proc.stderr, proc.stderr


def test_importer_refuses_a_fifo_model_without_blocking(tmp_path, cli, env):
    fifo = tmp_path / "m.onnx"
    os.mkfifo(fifo)
    with pytest.raises(gearbox.Error, match="it is a FIFO, not a regular file"):
        onnx_import.import_model(str(fifo), str(tmp_path / "m.gbx"))
    assert_one_line_error(cli_import(cli, env, fifo, tmp_path / "m.gbx", timeout=20),
                          "it is a FIFO, not a regular file")


def test_importer_refuses_dev_zero_before_reading(tmp_path, cli, env):
    proc = cli_import(cli, env, "/dev/zero", tmp_path / "m.gbx", timeout=20)
    assert_one_line_error(proc, "it is a character device, not a regular file")
    assert os.listdir(tmp_path) == []


def test_importer_size_limit_is_checked_before_reading(tmp_path, monkeypatch):
    path = write_model(add_model(), tmp_path / "m.onnx")
    monkeypatch.setattr(_safe_io, "MAX_INPUT_FILE_BYTES", 16)
    with pytest.raises(gearbox.Error, match="above the limit of 16 bytes"):
        _safe_io.read_file(path)


def external_model(tmp_path, location):
    w = numpy_helper.from_array(np.arange(3, dtype=np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", "12")):
        e = w.external_data.add()
        e.key, e.value = k, v
    return write_model(add_model(w), tmp_path / "m.onnx")


def test_external_data_inside_the_folder_imports(tmp_path):
    (tmp_path / "weights.bin").write_bytes(np.arange(3, dtype=np.float32).tobytes())
    model = external_model(tmp_path, "weights.bin")
    onnx_import.import_model(model, str(tmp_path / "m.gbx"))
    assert np.array_equal(np.load(tmp_path / "m.w.npy"), np.arange(3, dtype=np.float32))


def test_external_data_symlink_out_of_the_folder_is_refused(tmp_path, cli, env):
    os.symlink("/etc/passwd", tmp_path / "weights.bin")
    model = external_model(tmp_path, "weights.bin")
    out = tmp_path / "out"
    out.mkdir()
    proc = cli_import(cli, env, model, out / "m.gbx")
    assert_one_line_error(proc, "leads outside the model's folder")
    assert os.listdir(out) == []


@pytest.mark.parametrize("location", ["/etc/passwd", "../outside.bin", "sub/../../outside.bin"])
def test_external_data_locations_outside_the_folder_are_refused(tmp_path, location):
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "outside.bin").write_bytes(b"\0" * 12)
    model = external_model(folder, location)
    with pytest.raises(gearbox.Error, match="model's folder"):
        onnx_import.import_model(model, str(tmp_path / "m.gbx"))
    assert not (tmp_path / "m.w.npy").exists()


def test_external_data_fifo_and_short_file_are_refused(tmp_path):
    os.mkfifo(tmp_path / "weights.bin")
    model = external_model(tmp_path, "weights.bin")
    with pytest.raises(gearbox.Error, match="it is a FIFO"):
        onnx_import.import_model(model, str(tmp_path / "m.gbx"))
    os.unlink(tmp_path / "weights.bin")
    (tmp_path / "weights.bin").write_bytes(b"\0" * 8)
    with pytest.raises(gearbox.Error, match="run past its end"):
        onnx_import.import_model(model, str(tmp_path / "m.gbx"))


def bad_protos():
    """(name, build(tmp_path) -> (model path, out path), part of the message)."""

    def proto(model):
        return lambda tmp: (write_model(model, tmp / "m.onnx"), tmp / "m.gbx")

    short = numpy_helper.from_array(np.arange(3, dtype=np.float32), "w")
    short.raw_data = short.raw_data[:8]
    floats = helper.make_tensor("w", F, [3], [1.0, 2.0, 3.0])
    del floats.float_data[2]  # float_data: 2 values for dims [3]
    huge = helper.make_tensor("w", F, [1], [1.0])
    huge.dims[:] = [2 ** 40, 2 ** 30]
    no_inputs = add_model(inputs=())
    no_outputs = add_model()
    del no_outputs.graph.node[0].output[:]
    long_name = add_model(name_w="w" * 300, inputs=("x", "w" * 300))

    def out_dir(tmp):
        (tmp / "d.gbx").mkdir()
        return write_model(add_model(), tmp / "m.onnx"), tmp / "d.gbx"

    def out_slash(tmp):
        return write_model(add_model(), tmp / "m.onnx"), str(tmp) + "/sub/"

    def empty(tmp):
        (tmp / "m.onnx").write_bytes(b"")
        return str(tmp / "m.onnx"), tmp / "m.gbx"

    def garbage(tmp):
        (tmp / "m.onnx").write_bytes(b"\xff" * 64)
        return str(tmp / "m.onnx"), tmp / "m.gbx"

    return [
        ("raw_data_shorter_than_dims", proto(add_model(short)), "raw_data has 8 bytes"),
        ("float_data_count_mismatch", proto(add_model(floats)), "float_data has 2 values"),
        ("dims_2_40_by_2_30", proto(add_model(huge)), "above the limit"),
        ("add_with_no_inputs", proto(no_inputs), "has 0 inputs"),
        ("node_with_no_outputs", proto(no_outputs), "has no outputs"),
        ("name_of_300_characters", proto(long_name), "above the limit of 255"),
        ("out_is_an_existing_directory", out_dir, "is a directory"),
        ("out_ends_in_a_slash", out_slash, "names a directory"),
        ("empty_onnx_file", empty, "not an ONNX model with a graph"),
        ("not_a_protobuf", garbage, "not a readable ONNX model"),
        ("self_reference_add_x_y_to_y", proto(add_model(inputs=("x", "y"))), "undefined '%y'"),
    ]


@pytest.mark.parametrize("name,build,part", bad_protos(), ids=[c[0] for c in bad_protos()])
def test_bad_protos_are_one_line_errors(name, build, part, tmp_path, cli, env):
    model, out = build(tmp_path)
    before = sorted(os.listdir(tmp_path))
    assert_one_line_error(cli_import(cli, env, model, out), part)
    assert sorted(os.listdir(tmp_path)) == before, "something was written"
    with pytest.raises(gearbox.Error):
        onnx_import.import_model(model, str(out))


def test_a_failed_import_keeps_the_old_files_and_the_fifo(tmp_path):
    model = write_model(add_model(), tmp_path / "m.onnx")
    (tmp_path / "m.w.npy").write_bytes(b"old")
    os.mkfifo(tmp_path / "m.gbx")  # nothing reads it: the .gbx cannot be written
    with pytest.raises(gearbox.Error, match="nothing is reading it"):
        onnx_import.import_model(model, str(tmp_path / "m.gbx"))
    assert (tmp_path / "m.w.npy").read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["m.gbx", "m.onnx", "m.w.npy"]


def test_output_symlink_is_kept_and_its_target_replaced(tmp_path):
    model = write_model(add_model(), tmp_path / "m.onnx")
    (tmp_path / "real.gbx").write_text("old")
    os.symlink("real.gbx", tmp_path / "m.gbx")
    onnx_import.import_model(model, str(tmp_path / "m.gbx"))
    assert os.path.islink(tmp_path / "m.gbx")
    assert "imported from ONNX" in (tmp_path / "real.gbx").read_text()
    gearbox.load(str(tmp_path / "m.gbx"))


def test_output_into_a_character_device_is_written_in_place(tmp_path):
    model = write_model(add_model(), tmp_path / "m.onnx")
    os.symlink("/dev/null", tmp_path / "m.gbx")
    onnx_import.import_model(model, str(tmp_path / "m.gbx"))
    assert os.path.islink(tmp_path / "m.gbx")
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


def test_atomic_file_set_puts_everything_back_when_one_file_fails(tmp_path):
    (tmp_path / "a").write_bytes(b"old a")
    os.mkfifo(tmp_path / "b")
    files = _safe_io.AtomicFileSet()
    files.add(str(tmp_path / "a"), b"new a")
    files.add(str(tmp_path / "c"), b"new c")
    files.add(str(tmp_path / "b"), b"new b")
    with pytest.raises(gearbox.Error):
        files.commit()
    assert (tmp_path / "a").read_bytes() == b"old a"
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]
