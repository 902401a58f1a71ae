"""The gearbox and PyTorch sides of bench/peers/peers.py: a long-running child process per
runtime, speaking the workers' protocol (peers.py, "Workers") as bench/peers/ort_worker.js does
for ONNX Runtime: one JSON request per line on stdin, one JSON reply per line on the protocol
stream. Each worker times its own calls (time.perf_counter_ns around one call), so neither the
pipe nor the interpreter's start-up is ever timed.

    /usr/bin/python3 bench/peers/py_worker.py gearbox --build build
    /usr/bin/python3 bench/peers/py_worker.py torch

Each runtime is its own process so that one runtime's threads (torch's OpenMP pool, oneTBB's
workers) and allocations never share a process with another's.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# The compute-scaling probe (GearboxRuntime.scaling): a product that keeps the FMA units busy
# (about 0.27 GFLOP, 1-2 ms a call on one AVX-512 core) and splits evenly on any thread count.
SCALING_N = 512
SCALING_VISIT = 5
SCALING_GRAPH = (f"graph scaling(%a: f32[{SCALING_N}, {SCALING_N}], %b: f32[{SCALING_N}, "
                 f"{SCALING_N}]) {{\n  %y = matmul(%a, %b)\n  return %y\n}}\n")


def read_f32(path, shape):
    return np.fromfile(path, dtype=np.float32).reshape(shape)


class GearboxRuntime:
    """gearbox.Session per key: the static plan or another mode, under a thread cap."""

    def __init__(self, build):
        sys.path.insert(0, os.path.join(os.path.abspath(build), "python"))
        import gearbox

        self.gearbox = gearbox
        self.sessions = {}
        self.inputs = {}

    def info(self):
        return {"runtime": "gearbox", "version": self.gearbox.__version__,
                "modes": list(self.gearbox.MODES)}

    def load(self, msg):
        t0 = time.perf_counter()
        graph = self.gearbox.load(msg["model"])
        options = {"threads": msg["threads"]}
        if msg.get("gears"):
            options["gears"] = msg["gears"]
        self.sessions[msg["key"]] = self.gearbox.Session(graph, mode=msg["mode"], **options)
        return {"load_seconds": time.perf_counter() - t0}

    def set_input(self, key, x):
        self.inputs[key] = x

    def scaling(self, msg):
        """The compute-scaling probe (peers.py's compute_scaling): one static MatMul of
        SCALING_N^3 on one thread and on msg["threads"], visits of SCALING_VISIT calls each,
        alternated for about msg["seconds"]; per-call medians."""
        g = self.gearbox.parse(SCALING_GRAPH)
        rng = np.random.default_rng(0)
        x = {n: rng.standard_normal((SCALING_N, SCALING_N)).astype(np.float32) for n in "ab"}
        sessions = [self.gearbox.Session(g, mode="static", threads=t)
                    for t in (1, msg["threads"])]
        for s in sessions:
            for _ in range(3):
                s.run(x)
        times = [[], []]
        deadline = time.perf_counter() + msg["seconds"]
        while not times[0] or time.perf_counter() < deadline:
            for s, ts in zip(sessions, times):
                for _ in range(SCALING_VISIT):
                    t0 = time.perf_counter_ns()
                    s.run(x)
                    ts.append(time.perf_counter_ns() - t0)
        one, many = (statistics.median(ts) / 1e9 for ts in times)
        return {"n": SCALING_N, "threads": msg["threads"], "one_thread_seconds": one,
                "threads_seconds": many, "calls": len(times[0])}

    def call(self, key):
        return self.sessions[key].run(self.inputs[key])[0]

    def counters(self, key):
        st = self.sessions[key].stats
        return {k: st[k] for k in ("graph_compiles", "kernel_compiles",
                                   "measured_host_compile_seconds")}

    def close(self, key):
        self.sessions.pop(key, None)
        self.inputs.pop(key, None)


class TorchRuntime:
    """The same model as a torch.nn.Module in eval() mode, run under torch.inference_mode()
    with torch.set_num_threads(threads) (one inter-op thread)."""

    def __init__(self, build):
        del build
        import torch

        sys.path.insert(0, HERE)
        import models

        self.torch = torch
        self.models = models
        # Before any parallel work, as torch requires; the bench runs one op at a time.
        torch.set_num_interop_threads(1)
        # Debian's torch calls the system BLAS (BLAS_INFO=generic) for its matmuls, which is
        # OpenBLAS here with a thread pool of its own that set_num_threads does not reach: cap
        # it too, or torch "at one thread" would run its GEMMs on every core.
        self.openblas = None
        try:
            blas = ctypes.CDLL("libblas.so.3")
            if hasattr(blas, "openblas_set_num_threads"):
                blas.openblas_get_config.restype = ctypes.c_char_p
                self.openblas = blas
        except OSError:
            pass
        self.modules = {}
        self.threads = {}
        self.current_threads = None  # what select() last set, torch and OpenBLAS alike
        self.inputs = {}

    def info(self):
        t = self.torch
        blas = (self.openblas.openblas_get_config().decode() if self.openblas else
                "not OpenBLAS (its threads are not capped)")
        return {"runtime": "torch", "version": t.__version__, "blas": blas,
                "parallel_info": t.__config__.parallel_info().strip().splitlines()}

    def load(self, msg):
        t0 = time.perf_counter()
        self.modules[msg["key"]] = self.models.MODELS[msg["model_name"]].build()
        self.threads[msg["key"]] = msg["threads"]
        return {"load_seconds": time.perf_counter() - t0}

    def set_input(self, key, x):
        self.inputs[key] = self.torch.from_numpy(x)

    def call(self, key):
        with self.torch.inference_mode():
            return self.modules[key](self.inputs[key]).numpy()

    def select(self, key):
        # Process-wide in torch: set for the key about to run (cheap when unchanged).
        n = self.threads[key]
        if self.current_threads != n:
            self.torch.set_num_threads(n)
            if self.openblas:
                self.openblas.openblas_set_num_threads(n)
            self.current_threads = n

    def counters(self, key):
        del key
        return {}

    def close(self, key):
        for d in (self.modules, self.threads, self.inputs):
            d.pop(key, None)


def handle(rt, msg):
    op = msg["op"]
    if op == "info":
        return rt.info()
    if op == "load":
        return rt.load(msg)
    if op == "scaling":
        return rt.scaling(msg)
    key = msg["key"]
    if hasattr(rt, "select") and op in ("run", "time"):
        rt.select(key)
    if op == "input":
        rt.set_input(key, read_f32(msg["path"], msg["shape"]))
        return {}
    if op == "run":
        t0 = time.perf_counter_ns()
        y = rt.call(key)
        seconds = (time.perf_counter_ns() - t0) / 1e9
        np.ascontiguousarray(y, dtype=np.float32).tofile(msg["output"])
        return {"seconds": seconds, "shape": list(y.shape), "counters": rt.counters(key)}
    if op == "time":
        for _ in range(msg["warm"]):
            rt.call(key)
        before = rt.counters(key)
        times = []
        for _ in range(msg["calls"]):
            t0 = time.perf_counter_ns()
            rt.call(key)
            times.append(time.perf_counter_ns() - t0)
        # The driver checks that nothing compiled while the calls were timed.
        return {"times_ns": times, "counters_before": before, "counters_after": rt.counters(key)}
    if op == "close":
        rt.close(key)
        return {}
    raise ValueError(f"unknown op '{op}'")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runtime", choices=("gearbox", "torch"))
    p.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    args = p.parse_args(argv)
    # The protocol gets the real stdout; anything a library prints goes to stderr instead.
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    rt = (GearboxRuntime if args.runtime == "gearbox" else TorchRuntime)(args.build)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = {"ok": True, **handle(rt, json.loads(line))}
        except Exception as e:  # noqa: BLE001 -- every failure goes back to the driver, named
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        proto.write(json.dumps(reply) + "\n")
        proto.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
