#!/usr/bin/env python3
"""Deals a gtest binary's tests to N shards by how long each took before (scripts/gtest-shards.sh).

gtest's own sharding (GTEST_TOTAL_SHARDS) deals tests by index, blind to their cost: in CI the
sanitized suite's two shards drew 310 and 473 seconds, and which shard got the few 20-60 s
differentials moved with every added test. Here each test weighs what it took in an earlier
run's --gtest_output=json (the Release suite, minutes before: ASan costs 15-90x more per test,
but the order of the heavy ones holds), and the heaviest go first, each to the lightest shard
(longest processing time first). The recorded times only steer the schedule: every test the
listing names goes to exactly one shard, whether it was timed or not.

  gtest-balance.py record OUT.json RESULT.json...   merge runs' per-test times into OUT.json
  gtest-balance.py deal N LISTING.json WEIGHTS.json PREFIX
      writes PREFIX0 .. PREFIX{N-1}, gtest flag files (--gtest_flagfile) holding one
      --gtest_filter each, and prints the number of tests dealt
"""
import json
import os
import sys

# What a test costs beyond its recorded time: a test that took 0 ms in Release still pays
# SetUp, its checks and ASan's bookkeeping. A hundredth of a second balanced the 2026-12-06
# ASan suite of 4,329 tests to within 4 of its 786 seconds (without it: within 12).
PER_TEST = 0.01
MAX_BYTES = 64 << 20


def load(path):
    if os.path.getsize(path) > MAX_BYTES:
        raise SystemExit(f"{path}: larger than {MAX_BYTES} bytes")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def names_and_times(doc):
    """(full test name, seconds or None) per test of a gtest JSON listing or result."""
    for suite in doc.get("testsuites", []):
        for test in suite.get("testsuite", []):
            seconds = None
            time = test.get("time")
            if isinstance(time, str) and time.endswith("s"):
                try:
                    seconds = float(time[:-1])
                except ValueError:
                    seconds = None
            yield suite["name"] + "." + test["name"], seconds


def record(out, results):
    times = {}
    for path in results:
        for name, seconds in names_and_times(load(path)):
            if seconds is not None and seconds >= 0 and seconds < 1e6:
                times[name] = seconds
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(times, f, sort_keys=True, indent=0)
    os.replace(tmp, out)


def deal(n, listing, weights, prefix):
    if n < 1:
        raise SystemExit("deal: N must be at least 1")
    times = load(weights) if os.path.exists(weights) else {}
    if not isinstance(times, dict):
        times = {}
    names = [name for name, _ in names_and_times(load(listing))]
    for name in names:
        # gtest's names are identifiers, "/" and "." (a parameter's name must be alphanumeric):
        # anything else would read as filter syntax ("-" starts the negative patterns).
        if not all(c.isalnum() or c in "_/." for c in name) or not name.isascii():
            raise SystemExit(f"deal: {name!r} cannot be written as a gtest filter pattern")
    known = sorted(v for v in times.values() if isinstance(v, (int, float)))
    # A test the earlier run did not time (new, or outside its filter) weighs the median.
    fallback = known[len(known) // 2] if known else 0.0

    def weight(name):
        v = times.get(name)
        return (v if isinstance(v, (int, float)) else fallback) + PER_TEST

    shards = [[] for _ in range(n)]
    loads = [0.0] * n
    # Heaviest first; ties by name, so the same inputs deal the same shards.
    for name in sorted(names, key=lambda s: (-weight(s), s)):
        i = loads.index(min(loads))
        shards[i].append(name)
        loads[i] += weight(name)
    for i, shard in enumerate(shards):
        # gtest reads a flag file line by line: the filter has no length limit there, where an
        # argument or an environment string stops at 128 KiB (Linux's MAX_ARG_STRLEN).
        # An empty shard gets a filter that matches nothing, not an empty one (which is "*").
        text = "--gtest_filter=" + (":".join(shard) if shard else "-*") + "\n"
        tmp = f"{prefix}{i}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, f"{prefix}{i}")
    print(len(names))


def main(argv):
    if len(argv) >= 3 and argv[1] == "record":
        record(argv[2], argv[3:])
    elif len(argv) == 6 and argv[1] == "deal":
        deal(int(argv[2]), argv[3], argv[4], argv[5])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
