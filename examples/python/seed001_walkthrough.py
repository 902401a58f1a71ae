#!/usr/bin/env python3
"""Seed 001 in Python: one Add of x1 and x2 (both [-1, 2]), run as a static graph
(torch.compile dynamic=False), a dynamic graph (dynamic=True) and a geared graph
(TorchAir set_dim_gears) over the shapes the seed uses, (2, 2) then (4, 2).

    PYTHONPATH=build/python /usr/bin/python3 examples/python/seed001_walkthrough.py

Every number printed is an exact counter; the script checks the ones the seed states.
"""
import os
import sys

import numpy as np

import gearbox

here = os.path.dirname(os.path.abspath(__file__))
graph = gearbox.load(os.path.join(here, "..", "seed001_add.gbx"))
shapes = [(2, 2), (4, 2)]  # the seed's two calls


def run(session):
    for rows, cols in shapes:
        x1 = np.ones((rows, cols), np.float32)
        x2 = np.ones((rows, cols), np.float32)
        (y,) = session.run(x1, x2)
        assert (y == 2).all() and y.shape == (rows, cols)
    return session.stats


# Static graph: (4, 2) does not fit the plan compiled for (2, 2), so it compiles again.
static = run(gearbox.Session(graph, mode="static"))
print("static :", static["graph_compiles"], "graph compiles")
assert static["graph_compiles"] == 2

# Dynamic graph: one compile for every shape, but each op is launched and synced on its own.
dynamic = run(gearbox.Session(graph, mode="dynamic"))
print("dynamic:", dynamic["graph_compiles"], "graph compile,", dynamic["syncs"], "syncs")
assert dynamic["graph_compiles"] == 1

# Geared graph: set_dim_gears as TorchAir spells it; zip gives the gears [2, 2] and [4, 4].
geared = gearbox.Session(graph, mode="geared")
gearbox.set_dim_gears(geared, "x1", {0: [2, 4]})
gearbox.set_dim_gears(geared, "x2", {0: [2, 4]})
stats = run(geared)
print("geared :", stats["graph_compiles"], "graph compiles, all up front; options:")
for line in geared.gear_options:
    print("   ", line)
assert stats["graph_compiles"] == 2 and stats["gears"] == 2
assert any("dynamicDims = 2,2;4,4" in line for line in geared.gear_options)

# A shape outside the gears is an error, as on the device ("请合理设置档位值").
try:
    geared.run(np.ones((3, 2), np.float32), np.ones((3, 2), np.float32))
    sys.exit("expected an error for a shape outside the gears")
except gearbox.Error as e:
    print("(3, 2) :", e.kind, "error:", e)
    assert e.kind == "gear"

# Every mode over the bundled trace, as records a pandas.DataFrame takes.
records = gearbox.compare(
    graph,
    os.path.join(here, "..", "seed001_gears.trace.jsonl"),  # (2,2) (4,2) (2,2) (3,2)
    gears={"x1": {"0": [2, 4]}, "x2": {"0": [2, 4]}},
    gear_fallback="pad",
)
for r in records:
    print(f"{r['mode']:8} graph_compiles={r['graph_compiles']} launches={r['launches']} "
          f"syncs={r['syncs']} max_abs_diff_vs_reference={r['max_abs_diff_vs_reference']}")
    assert r["max_abs_diff_vs_reference"] == 0
