#!/usr/bin/env python3
"""Flat memory of `gearbox run` over long traces (issue 15, docs/hardening.md "Scale").

Writes a mixed trace of examples/four_ops.gbx (batches 1, 2, 3, 4, 8 in turn) of N lines for
each N given, runs `gearbox run` over it in every mode with a JSON report (every per-iteration
record: the default `--iterations all`), and prints the peak resident set of each process
(GNU time's %M, the kernel's ru_maxrss; Debian package `time`) and its growth from the
smallest N. GNU time is the parent on purpose: a child forked from this Python process would
inherit its resident set as its peak.

    scripts/soak_cli.py [--bin build/bin/gearbox] [--calls 10000,1000000] [--modes ...]

Nothing is asserted here: RSS is a measurement (tests assert counters). The trace and reports
go to a temp directory that is removed at the end.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "examples", "four_ops.gbx")
GEARS = '{"x": {"0": [1, 2, 3, 4, 8]}, "y": {"0": [1, 2, 3, 4, 8]}}'
BATCHES = [1, 2, 3, 4, 8]


def write_trace(path, calls):
    lines = ['{"x": [%d, 4], "y": [%d, 4]}\n' % (b, b) for b in BATCHES]
    with open(path, "w") as f:
        for i in range(calls):
            f.write(lines[i % len(lines)])


def table_modes(binary):
    """The modes the binary knows, from its --mode option (the mode table), in its order."""
    out = subprocess.run([binary, "run", "--help"], capture_output=True, text=True).stdout
    m = re.search(r"--mode TEXT:\{([a-z,]+)\}", out)
    if not m:
        sys.exit(f"cannot read the modes from `{binary} run --help`")
    return m.group(1).split(",")


def run(binary, mode, trace, report, rss_file):
    cmd = [binary, "run", MODEL, "--trace", trace, "--mode", mode, "-q", "--json", report]
    if mode == "geared":
        cmd += ["--gears", GEARS]
    start = time.monotonic()
    proc = subprocess.run(["/usr/bin/time", "-o", rss_file, "-f", "%M"] + cmd,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    secs = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.decode()}")
    with open(rss_file) as f:
        rss_kb = int(f.read().split()[-1])
    with open(report) as f:
        rep = json.load(f)
    return rss_kb / 1024.0, secs, rep, os.path.getsize(report)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "gearbox"))
    ap.add_argument("--calls", default="10000,1000000")
    ap.add_argument("--modes", help="comma-separated (default: every mode of the binary)")
    args = ap.parse_args()
    if not os.access("/usr/bin/time", os.X_OK):
        sys.exit("needs GNU time (apt-get install time)")
    counts = [int(c) for c in args.calls.split(",")]
    modes = args.modes.split(",") if args.modes else table_modes(args.bin)
    with tempfile.TemporaryDirectory(prefix="gearbox-soak-") as tmp:
        traces = {}
        for n in counts:
            traces[n] = os.path.join(tmp, f"trace_{n}.jsonl")
            write_trace(traces[n], n)
        print(f"gearbox run {os.path.relpath(MODEL, ROOT)}, batches {BATCHES} in turn, "
              f"--json with every per-iteration record; peak RSS (ru_maxrss)")
        head = "| mode | " + " | ".join(f"{n:,} calls" for n in counts) + \
               " | growth | report at the largest |"
        print(head)
        print("|" + "---|" * (len(counts) + 3))
        for mode in modes:
            cells, first, last = [], None, None
            for n in counts:
                rss, secs, rep, size = run(args.bin, mode, traces[n],
                                           os.path.join(tmp, "report.json"),
                                           os.path.join(tmp, "rss"))
                records = len(rep["per_iteration"])
                del rep["per_iteration"]
                if rep["iterations"] != n or records != n:
                    sys.exit(f"{mode}: report has {rep['iterations']} iterations and "
                             f"{records} records, expected {n}")
                cells.append(f"{rss:.1f} MB ({secs:.1f} s)")
                first = rss if first is None else first
                last = (rss, size)
            print(f"| {mode} | " + " | ".join(cells) +
                  f" | {last[0] - first:+.1f} MB | {last[1] / 1e6:.0f} MB |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
