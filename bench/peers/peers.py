#!/usr/bin/python3
"""The peers in one run (issue 23): the same ONNX model in gearbox (the static plan and every
other mode), ONNX Runtime CPU and PyTorch CPU, at equal thread counts, interleaved.

    bash scripts/install-peers.sh                          # onnxruntime-node, once
    /usr/bin/python3 bench/peers/peers.py                  # every model, batch 1/8/32, 1 and 2 threads
    /usr/bin/python3 bench/peers/peers.py --models mlp --batches 1,8,32 --threads 1,2
    /usr/bin/python3 bench/peers/peers.py --smoke          # CI: MLP, batch 1, one repetition

For each model (bench/peers/models.py) the script exports the PyTorch module to ONNX, imports it
with gearbox's importer, and for each thread count and batch:
  1. loads it in every runtime with that thread cap: gearbox.Session(mode=M, threads=N) for each
     mode, onnxruntime-node with intraOpNumThreads=N (sequential, one inter-op thread, every
     graph optimisation), torch with set_num_threads(N) under inference_mode;
  2. runs one call each on the same input and checks the outputs agree (max abs error and max
     abs error / max |torch output| printed) before anything is timed; the first call (gearbox:
     compile + run; ORT: after its session load) is reported on its own, never in the medians;
  3. times calls round-robin: every runtime gets a visit of k calls in turn, in an order that
     changes every round (a balanced Latin square: each runtime leads, and follows each other
     runtime, equally often), so drift in the machine's load hits every runtime alike. A visit starts with
     one untimed call (warm caches) unless a call takes 50 ms or more, and is followed by a short
     settle gap so that one runtime's spinning threads (ORT's pool, OpenMP) have gone idle
     before the next runtime's visit;
  4. checks from gearbox's exact counters that nothing compiled while it was timed;
  5. where it runs more than one thread, brackets the rounds with the compute-scaling probe:
     gearbox's static 512^3 MatMul on one thread and on N, interleaved for 0.4 s. Its speedup
     says whether the N threads had cores of their own while the cell was timed: a VM's two
     vCPUs may be two hyperthreads of one core (a speedup near 1), and the host may move them
     within minutes (docs/performance.md, "SMT siblings"). Printed with each cell.
It prints, per model and thread count, each runtime's per-call median with its spread (half the
interquartile range, as a percentage of the median) and the ratios gearbox / ORT and gearbox /
torch, states the machine, and writes every sample to --json. Timings are measured, never
asserted; docs/performance.md ("Peers") has the figures and how to read them.

Workers: each runtime is a long-running child process (bench/peers/py_worker.py for gearbox and
torch, bench/peers/ort_worker.js for ONNX Runtime), so no runtime's start-up is timed and no two
runtimes share a process. The driver sends one JSON request per line and reads one JSON reply:
  {"op": "info"}                                  -> versions
  {"op": "load", "key", "threads", ...}           -> {"load_seconds"}
  {"op": "input", "key", "path", "shape"}         raw float32 input file
  {"op": "run", "key", "output"}                  -> {"seconds", "shape"}; output as raw float32
  {"op": "time", "key", "warm", "calls"}          -> {"times_ns": [...]} (gearbox: + counters)
  {"op": "close", "key"}
  {"op": "scaling", "threads", "seconds"}         -> {"one_thread_seconds", "threads_seconds"}
                                                     (gearbox only: the compute-scaling probe)
Every reply has "ok" (and "error" when false).
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import models  # noqa: E402

# Outputs agree when |x - torch| <= ATOL + RTOL * |torch| elementwise (float32 runtimes that sum
# in different orders and, in ORT and gearbox, fold BatchNorm differently).
RTOL, ATOL = 1e-3, 1e-4
WARM_CALL_BELOW_S = 0.05  # visits start with an untimed call when a call is shorter than this
SLOW_CALL_S = 0.25  # a first call this long: one warm-up call and a one-call estimate
VISIT_TARGET_S = 0.02  # a visit runs about this long: k calls of the estimated call time
MAX_CALLS_PER_VISIT = 25
# The compute-scaling probe (compute_scaling): seconds it runs before and after each
# configuration of more than one thread.
SCALING_PROBE_S = 0.4
SCALING_PROBE_SMOKE_S = 0.02
SCALING_LABEL = "512^3 MatMul speedup N threads / 1, before / after"
# CPU flags that say which vector ISA a kernel can use.
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
             "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")


# ---- statistics and formatting (pure; tests/python/test_peers.py) -----------------------------

def summarize(times_ns):
    """Median, quartiles and count of per-call times, in seconds."""
    t = sorted(x / 1e9 for x in times_ns)
    if not t:
        return {"n": 0}
    q = statistics.quantiles(t, n=4, method="inclusive") if len(t) > 1 else [t[0]] * 3
    return {"n": len(t), "median": statistics.median(t), "p25": q[0], "p75": q[2],
            "min": t[0], "max": t[-1]}


def spread_percent(s):
    """Half the interquartile range as a percentage of the median."""
    return 100.0 * (s["p75"] - s["p25"]) / 2 / s["median"] if s.get("median") else 0.0


def format_seconds(s):
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.0f} us"


def format_cell(s):
    if not s or not s.get("n"):
        return "-"
    return f"{format_seconds(s['median'])} ±{spread_percent(s):.0f}%"


def balanced_orders(n):
    """Williams' balanced Latin square for n runtimes: n orders (2n when n is odd) in which
    every runtime comes first equally often and every runtime directly follows every other
    equally often, so whatever one runtime leaves behind (warm or evicted caches, threads still
    spinning) falls on each of the others alike."""
    if n <= 0:
        return [[]]
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        if len(first) % 2:
            first.append(lo)
            lo += 1
        else:
            first.append(hi)
            hi -= 1
    rows = [[(x + i) % n for x in first] for i in range(n)]
    if n % 2:
        rows += [list(reversed(r)) for r in rows]
    return rows


def visit_order(names, round_index):
    """The order of the runtimes' visits in round `round_index`: the rounds cycle through
    balanced_orders(len(names))."""
    rows = balanced_orders(len(names))
    return [names[i] for i in rows[round_index % len(rows)]]


def calls_per_visit(estimate_s):
    """k for a visit of about VISIT_TARGET_S (at least 1)."""
    if estimate_s <= 0:
        return MAX_CALLS_PER_VISIT
    return max(1, min(MAX_CALLS_PER_VISIT, int(VISIT_TARGET_S / estimate_s)))


def rounds_for(budget_s, visit_estimates_s, wanted, minimum=3):
    """Rounds within a time budget: at most `wanted`, at least `minimum` (fewer when `wanted`
    is)."""
    per_round = sum(visit_estimates_s)
    fit = int(budget_s / per_round) if per_round > 0 else wanted
    return max(min(minimum, wanted), min(wanted, fit))


def agreement(out, ref):
    """Max abs error, max abs error / max |ref|, and whether every element is within
    ATOL + RTOL * |ref|."""
    if out.shape != ref.shape:
        return {"shape": list(out.shape), "ref_shape": list(ref.shape), "ok": False}
    diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    max_abs = float(np.max(diff)) if diff.size else 0.0
    ok = bool(np.all(diff <= ATOL + RTOL * np.abs(ref.astype(np.float64))))
    return {"max_abs": max_abs, "max_rel": max_abs / scale if scale else 0.0, "ok": ok}


# ---- the machine -----------------------------------------------------------------------------

def cpu_info():
    """The CPU's model name with its family and model numbers (a VM may show only "AMD EPYC"),
    and the ISA flags of ISA_FLAGS it has."""
    fields, flags = {}, []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "flags":
                    have = set(value.split())
                    flags = [x for x in ISA_FLAGS if x in have]
                    break
                fields.setdefault(key, value.strip())
    except OSError:
        pass
    model = fields.get("model name", platform.processor() or "unknown")
    if "cpu family" in fields:
        model += f" (family {fields['cpu family']} model {fields.get('model', '?')})"
    return model, flags


def build_config(build):
    cache = {}
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            for line in f:
                m = re.match(r"^(CMAKE_BUILD_TYPE|GEARBOX_NATIVE|CMAKE_CXX_COMPILER)(:\w+)?=(.*)$",
                             line.strip())
                if m:
                    cache[m.group(1)] = m.group(3)
    except OSError:
        pass
    return cache


def machine(build, infos):
    model, flags = cpu_info()
    cli = os.path.join(build, "bin", "gearbox")
    try:
        version = subprocess.run([cli, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout.strip()
    except OSError as e:
        version = f"(no {cli}: {e})"
    cfg = build_config(build)
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu": model, "isa_flags": flags, "cpus": os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}",
        "gearbox_version": version,
        "build_type": cfg.get("CMAKE_BUILD_TYPE", "?"),
        "gearbox_native": cfg.get("GEARBOX_NATIVE", "OFF (default)"),
        "runtimes": infos,
        "python": platform.python_version(), "numpy": np.__version__,
        "load_average_start": list(os.getloadavg()),
    }


# ---- workers ---------------------------------------------------------------------------------

class WorkerError(RuntimeError):
    pass


class Worker:
    """One runtime's child process and its JSON-lines protocol (module docstring)."""

    def __init__(self, name, argv, cwd=None):
        self.name = name
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, cwd=cwd, bufsize=1)

    def ask(self, **msg):
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            raise WorkerError(f"{self.name} worker exited (status {self.proc.poll()}) on "
                              f"{msg.get('op')}")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise WorkerError(f"{self.name}: {msg.get('op')} {msg.get('key', '')}: "
                              f"{reply.get('error')}")
        return reply

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_workers(build):
    ort_module = os.path.join(HERE, "node_modules", "onnxruntime-node", "package.json")
    if not os.path.exists(ort_module):
        raise WorkerError("onnxruntime-node is not installed in bench/peers/node_modules: run "
                          "bash scripts/install-peers.sh")
    py = sys.executable or "/usr/bin/python3"
    worker = os.path.join(HERE, "py_worker.py")
    return {
        "gearbox": Worker("gearbox", [py, worker, "gearbox", "--build", build]),
        "onnxruntime": Worker("onnxruntime", ["node", os.path.join(HERE, "ort_worker.js")],
                              cwd=HERE),
        "torch": Worker("torch", [py, worker, "torch"]),
    }


# ---- one configuration -----------------------------------------------------------------------

def runtimes_for(model, gbx, onnx_path, threads, batch, modes, batches):
    """(label, worker name, key, load request) of every runtime at one configuration."""
    out = []
    for mode in modes:
        load = {"model": gbx, "mode": mode, "threads": threads}
        if mode == "geared":
            # Every batch of the run an exact gear (TorchAir wants at least two): no padding.
            gears = sorted(set(batches) | {batch})
            if len(gears) < 2:
                gears.append(gears[-1] + 1)
            load["gears"] = {"x": {"0": gears}}
        out.append((f"gearbox {mode}", "gearbox", f"{model}/t{threads}/b{batch}/{mode}", load))
    out.append(("onnxruntime", "onnxruntime", f"{model}/t{threads}/b{batch}/ort",
                {"model": onnx_path, "threads": threads}))
    out.append(("torch", "torch", f"{model}/t{threads}/b{batch}/torch",
                {"model_name": model, "threads": threads}))
    return out


def compute_scaling(workers, threads, seconds):
    """The compute-scaling probe: gearbox's static 512^3 MatMul on one thread and on `threads`,
    interleaved for about `seconds` in the gearbox worker (py_worker.py). Its speedup tells
    whether the threads ran on cores of their own while the configuration was timed."""
    reply = workers["gearbox"].ask(op="scaling", threads=threads, seconds=seconds)
    reply.pop("ok", None)
    return reply


def run_config(workers, model, gbx, onnx_path, threads, batch, args, work):
    rts = runtimes_for(model, gbx, onnx_path, threads, batch, args.modes, args.batches)
    rng = np.random.default_rng(batch)  # the same input for every runtime, every run
    shape = models.MODELS[model].input_shape(batch)
    x = rng.standard_normal(shape, dtype=np.float32)
    xpath = os.path.join(work, f"{model}.b{batch}.x.bin")
    x.tofile(xpath)
    result = {"model": model, "threads": threads, "batch": batch, "input_shape": list(shape),
              "load_average_start": list(os.getloadavg()), "runtimes": {}}
    outputs = {}
    try:
        for label, w, key, load in rts:
            r = {"load_seconds": workers[w].ask(op="load", key=key, **load)["load_seconds"]}
            workers[w].ask(op="input", key=key, path=xpath, shape=list(shape))
            out_path = os.path.join(work, "output.y.bin")
            first = workers[w].ask(op="run", key=key, output=out_path)
            r["first_call_seconds"] = first["seconds"]
            if first.get("counters"):
                r["first_call_counters"] = first["counters"]
            outputs[label] = np.fromfile(out_path, dtype=np.float32).reshape(first["shape"])
            os.remove(out_path)
            result["runtimes"][label] = r
        ref = outputs["torch"]
        for label, out in outputs.items():
            result["runtimes"][label]["agreement_vs_torch"] = agreement(out, ref)
        bad = [lb for lb, r in result["runtimes"].items() if not r["agreement_vs_torch"]["ok"]]
        if bad:
            result["error"] = f"outputs disagree with torch: {', '.join(bad)}"
            return result
        # Warm-up, and an estimate of each runtime's call time for k and the budget: --warm
        # calls and three timed ones, or one of each where a call takes seconds (a CNN at
        # batch 32), where one is warm-up enough.
        est = {}
        for label, w, key, _ in rts:
            slow = result["runtimes"][label]["first_call_seconds"] >= SLOW_CALL_S
            t = workers[w].ask(op="time", key=key, warm=1 if slow or args.smoke else args.warm,
                               calls=1 if slow or args.smoke else 3)["times_ns"]
            est[label] = statistics.median(t) / 1e9
        plan = {}
        for label, _, _, _ in rts:
            k = 1 if args.smoke else calls_per_visit(est[label])
            warm = 1 if est[label] < WARM_CALL_BELOW_S else 0
            plan[label] = (k, warm)
        visit_s = [(k + warm) * est[lb] + args.settle for lb, (k, warm) in plan.items()]
        rounds = rounds_for(args.max_seconds, visit_s, args.rounds)
        samples = {label: [] for label, _, _, _ in rts}
        compiled_while_timed = []
        labels = [label for label, _, _, _ in rts]
        by_label = {label: (w, key) for label, w, key, _ in rts}
        for i in range(rounds):
            for label in visit_order(labels, i):
                w, key = by_label[label]
                k, warm = plan[label]
                reply = workers[w].ask(op="time", key=key, warm=warm, calls=k)
                samples[label].extend(reply["times_ns"])
                before, after = reply.get("counters_before"), reply.get("counters_after")
                if before and (before["graph_compiles"] != after["graph_compiles"] or
                               before["kernel_compiles"] != after["kernel_compiles"]):
                    compiled_while_timed.append(label)
                if args.settle > 0:
                    time.sleep(args.settle)  # let this runtime's spinning threads go idle
        for label in labels:
            r = result["runtimes"][label]
            r["calls_per_visit"], r["warm_call_per_visit"] = plan[label]
            r["samples_ns"] = samples[label]
            r["stats"] = summarize(samples[label])
        result["rounds"] = rounds
        if compiled_while_timed:
            result["error"] = ("compiled while timed (the medians would include compiles): " +
                               ", ".join(sorted(set(compiled_while_timed))))
    finally:
        for _, w, key, _ in rts:
            try:
                workers[w].ask(op="close", key=key)
            except WorkerError:
                pass
        result["load_average_end"] = list(os.getloadavg())
    return result


# ---- reports ---------------------------------------------------------------------------------

def ratio(a, b):
    if not a or not b or not a.get("median") or not b.get("median"):
        return None
    return a["median"] / b["median"]


def fmt_ratio(r):
    return "-" if r is None else f"{r:.2f}"


def scaling_speedup(probe):
    """One thread's per-call time over the thread count's, from a compute_scaling reply."""
    if not probe or not probe.get("threads_seconds"):
        return None
    return probe["one_thread_seconds"] / probe["threads_seconds"]


def describe_scaling(speedup, threads):
    """What a compute-bound product's speedup on `threads` says about the cores they ran on.
    Two vCPUs of a VM may be two hyperthreads of one physical core: both then share its FMA
    units, and a kernel that keeps them busy on one thread gains almost nothing from a second
    (docs/performance.md, "SMT siblings"). The bands are wide: the probe's speedup is bimodal
    (near 1 or near `threads`) on such machines, and anything between is a mixture."""
    if speedup is None:
        return "not measured"
    if speedup >= 0.75 * threads:
        return "own cores"
    if speedup <= 1.25:
        return "one core's FMA units shared (SMT siblings, or another load)"
    return "partly shared"


def format_scaling(r):
    """A configuration's probes, before / after its rounds, as speedups ("1.93 / 1.04")."""
    probes = r.get("compute_scaling") or {}
    cells = [scaling_speedup(probes.get(k)) for k in ("before", "after")]
    if all(c is None for c in cells):
        return "-"
    return " / ".join(fmt_ratio(c) for c in cells)


def print_machine(m, out):
    out.write(f"machine: {m['cpu']}, {m['cpus']} CPUs, ISA {' '.join(m['isa_flags'])}\n")
    out.write(f"gearbox: {m['gearbox_version']}; build {m['build_type']}, GEARBOX_NATIVE "
              f"{m['gearbox_native']}\n")
    rt = m["runtimes"]
    out.write(f"peers: ONNX Runtime {rt['onnxruntime']['version']} (onnxruntime-node, node "
              f"{rt['onnxruntime']['node']}; an empty await setImmediate costs "
              f"{rt['onnxruntime']['immediate_overhead_ns'] / 1e3:.1f} us), PyTorch "
              f"{rt['torch']['version']} (BLAS: {rt['torch']['blas']})\n")
    out.write(f"date: {m['date']}; load average at start {m['load_average_start'][0]:.2f}\n")


def print_tables(results, out):
    """Per model and thread count: rows are runtimes, columns batches; then the ratios."""
    blocks = {}
    for r in results:
        blocks.setdefault((r["model"], r["threads"]), []).append(r)
    for (model, threads), rs in blocks.items():
        rs.sort(key=lambda r: r["batch"])
        out.write(f"\n{model}, {threads} thread{'s' if threads > 1 else ''} "
                  f"(per-call median ±half the interquartile range; measured)\n")
        labels = []
        for r in rs:
            for label in r["runtimes"]:
                if label not in labels:
                    labels.append(label)
        head = f"{'':24}" + "".join(f"{'batch ' + str(r['batch']):>22}" for r in rs)
        out.write(head + "\n")
        for label in labels:
            cells = [format_cell(r["runtimes"].get(label, {}).get("stats")) for r in rs]
            out.write(f"{label:24}" + "".join(f"{c:>22}" for c in cells) + "\n")
        for r in rs:
            if r.get("error"):
                out.write(f"  batch {r['batch']}: {r['error']}\n")
        out.write("ratio (gearbox / ORT, gearbox / torch; < 1: gearbox faster)\n")
        for label in labels:
            if not label.startswith("gearbox"):
                continue
            cells = []
            for r in rs:
                st = r["runtimes"].get(label, {}).get("stats")
                o = ratio(st, r["runtimes"].get("onnxruntime", {}).get("stats"))
                t = ratio(st, r["runtimes"].get("torch", {}).get("stats"))
                cells.append(f"{fmt_ratio(o)} / {fmt_ratio(t)}")
            out.write(f"{label:24}" + "".join(f"{c:>22}" for c in cells) + "\n")
        if threads > 1:
            out.write(f"{'MatMul speedup (probe)':24}" +
                      "".join(f"{format_scaling(r):>22}" for r in rs) +
                      "\n")
        out.write("first call, not in the medians (gearbox: compile + run; ORT: the first run "
                  "after its session load; torch: the first call)\n")
        for label in labels:
            cells = []
            for r in rs:
                rt = r["runtimes"].get(label, {})
                cells.append(format_seconds(rt["first_call_seconds"])
                             if "first_call_seconds" in rt else "-")
            out.write(f"{label:24}" + "".join(f"{c:>22}" for c in cells) + "\n")
        worst = {}
        for r in rs:
            for label, rt in r["runtimes"].items():
                a = rt.get("agreement_vs_torch", {})
                if "max_abs" in a:
                    w = worst.setdefault(label, [0.0, 0.0])
                    w[0], w[1] = max(w[0], a["max_abs"]), max(w[1], a["max_rel"])
        out.write("agreement with torch (max abs error, max abs error / max |torch output|): " +
                  "; ".join(f"{lb} {w[0]:.1e}, {w[1]:.1e}" for lb, w in worst.items()
                            if lb != "torch") + "\n")


def print_markdown(results, modes, out):
    """One Markdown table per model: rows (threads, batch), medians per runtime, ratios."""
    by_model = {}
    for r in results:
        by_model.setdefault(r["model"], []).append(r)
    for model, rs in by_model.items():
        rs.sort(key=lambda r: (r["threads"], r["batch"]))
        cols = [f"gearbox {m}" for m in modes] + ["onnxruntime", "torch"]
        out.write(f"\n{model}\n\n| threads | batch | " + " | ".join(cols) +
                  " | static / ORT | static / torch | MatMul speedup (probe) |\n")
        out.write("|" + " --- |" * (len(cols) + 5) + "\n")
        for r in rs:
            cells = [format_cell(r["runtimes"].get(c, {}).get("stats")) for c in cols]
            st = r["runtimes"].get("gearbox static", {}).get("stats")
            o = ratio(st, r["runtimes"].get("onnxruntime", {}).get("stats"))
            t = ratio(st, r["runtimes"].get("torch", {}).get("stats"))
            out.write(f"| {r['threads']} | {r['batch']} | " + " | ".join(cells) +
                      f" | **{fmt_ratio(o)}** | {fmt_ratio(t)} | {format_scaling(r)} |\n")


def write_json(path, doc):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".peers.", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


# ---- main ------------------------------------------------------------------------------------

def int_list(text):
    try:
        v = [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{text}'")
    if not v or min(v) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got '{text}'")
    return v


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(models.MODELS),
                   help=f"comma-separated, of: {', '.join(models.MODELS)}")
    p.add_argument("--batches", type=int_list, default=[1, 8, 32])
    p.add_argument("--threads", type=int_list, default=[1, 2])
    p.add_argument("--modes", default="all",
                   help="gearbox modes, comma-separated, or all (default)")
    p.add_argument("--rounds", type=int, default=16,
                   help="round-robin rounds per configuration (fewer when --max-seconds says)")
    p.add_argument("--max-seconds", type=float, default=120.0,
                   help="time budget of the rounds of one configuration (at least 3 rounds)")
    p.add_argument("--warm", type=int, default=3, help="untimed calls after the first")
    # 5 ms was too short at 2 threads on a 2-vCPU VM: the encoder's gearbox visits took 6.6 ms
    # a call after torch's, 3.4 ms with 0.1 s (2026-11-27), the peers' threads still spinning.
    p.add_argument("--settle", type=float, default=0.1,
                   help="seconds between visits, for spinning threads to go idle")
    p.add_argument("--build", default=os.path.join(REPO, "build"))
    p.add_argument("--work", default=None, help="exports and inputs (default BUILD/peers)")
    p.add_argument("--json", default=None, help="report (default BUILD/peers/peers.json)")
    p.add_argument("--markdown", action="store_true", help="also print Markdown tables")
    p.add_argument("--smoke", action="store_true",
                   help="CI: the MLP, batch 1, threads 1 and 2, one round of one call")
    args = p.parse_args(argv)
    if args.smoke:
        args.models, args.batches, args.threads = "mlp", [1], [1, 2]
        args.rounds, args.warm, args.settle = 1, 1, 0.0
    args.models = [m for m in args.models.split(",") if m]
    unknown = [m for m in args.models if m not in models.MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)} (known: {', '.join(models.MODELS)})")
    args.build = os.path.abspath(args.build)
    args.work = os.path.abspath(args.work or os.path.join(args.build, "peers"))
    args.json = args.json or os.path.join(args.work, "peers.json")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, os.path.join(args.build, "python"))
    import gearbox
    from gearbox import onnx_import

    all_modes = list(gearbox.MODES)
    args.modes = all_modes if args.modes == "all" else [m for m in args.modes.split(",") if m]
    bad = [m for m in args.modes if m not in all_modes]
    if bad:
        sys.exit(f"peers.py: unknown mode(s) {', '.join(bad)} (known: {', '.join(all_modes)})")
    os.makedirs(args.work, exist_ok=True)
    try:
        workers = start_workers(args.build)
    except WorkerError as e:
        print(f"peers.py: {e}", file=sys.stderr)
        return 2
    status = 0
    results = []
    try:
        infos = {name: w.ask(op="info") for name, w in workers.items()}
        for info in infos.values():
            info.pop("ok", None)
        m = machine(args.build, infos)
        print_machine(m, sys.stdout)
        for model in args.models:
            onnx_path = os.path.join(args.work, f"{model}.onnx")
            gbx = os.path.join(args.work, f"{model}.gbx")
            t0 = time.perf_counter()
            models.export_onnx(model, onnx_path)
            onnx_import.import_model(onnx_path, gbx)
            print(f"\n{model}: exported and imported in {time.perf_counter() - t0:.1f} s "
                  f"({onnx_path})", flush=True)
            for threads in args.threads:
                for batch in args.batches:
                    t0 = time.perf_counter()
                    # Bracketed by the compute-scaling probe where it runs threads: whether
                    # they had cores of their own (the host places a VM's vCPUs as it likes).
                    probe_s = SCALING_PROBE_SMOKE_S if args.smoke else SCALING_PROBE_S
                    before = compute_scaling(workers, threads, probe_s) if threads > 1 else None
                    r = run_config(workers, model, gbx, onnx_path, threads, batch, args,
                                   args.work)
                    if threads > 1:
                        r["compute_scaling"] = {
                            "before": before, "after": compute_scaling(workers, threads, probe_s)}
                    results.append(r)
                    scaling = ""
                    if threads > 1:
                        sp = scaling_speedup(r["compute_scaling"]["after"])
                        scaling = (f"; {SCALING_LABEL} {format_scaling(r)} (after: "
                                   f"{describe_scaling(sp, threads)})")
                    print(f"  threads {threads}, batch {batch}: {r.get('rounds', 0)} rounds in "
                          f"{time.perf_counter() - t0:.1f} s{scaling}"
                          f"{'; ' + r['error'] if r.get('error') else ''}", flush=True)
                    if r.get("error"):
                        status = 1
        m["load_average_end"] = list(os.getloadavg())
        print_tables(results, sys.stdout)
        if args.markdown:
            print_markdown(results, args.modes, sys.stdout)
        write_json(args.json, {"schema": "gearbox-peers/1", "machine": m,
                               "settings": {k: getattr(args, k) for k in (
                                   "models", "batches", "threads", "modes", "rounds",
                                   "max_seconds", "warm", "settle", "smoke")},
                               "tolerance": {"rtol": RTOL, "atol": ATOL},
                               "results": results})
        print(f"\nload average at end {m['load_average_end'][0]:.2f}; report: {args.json}")
    except WorkerError as e:
        print(f"peers.py: {e}", file=sys.stderr)
        status = 2
    finally:
        for w in workers.values():
            w.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
