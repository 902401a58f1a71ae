#!/usr/bin/env python3
"""Writes a serving trace: one request per line, {"x": [batch, 1024]}, batch uniform in
[lo, hi] from a fixed 64-bit LCG (Knuth's MMIX constants), so the file is reproducible with
any Python and the same stream can be regenerated in C++.

    scripts/gen_serving_trace.py 20000 1 64 > examples/mlp_serving.trace.jsonl
"""
import sys


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit("usage: gen_serving_trace.py CALLS LO HI")
    calls, lo, hi = (int(a) for a in sys.argv[1:])
    if calls < 1 or lo < 1 or hi < lo:
        sys.exit("need CALLS >= 1 and 1 <= LO <= HI")
    state = 20261123
    out = sys.stdout
    out.write(f"# {calls} requests, batch uniform in [{lo}, {hi}] "
              f"(scripts/gen_serving_trace.py {calls} {lo} {hi})\n")
    for _ in range(calls):
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        batch = lo + (state >> 33) % (hi - lo + 1)
        out.write(f'{{"x": [{batch}, 1024]}}\n')


if __name__ == "__main__":
    main()
