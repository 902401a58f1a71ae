"""gearbox: compile a graph per shape, run it in static, eager, dynamic, auto or geared mode,
and measure what shape changes cost (docs/python.md).

    import numpy as np, gearbox
    g = gearbox.load("examples/seed001_add.gbx")
    s = gearbox.Session(g, mode="geared")
    gearbox.set_dim_gears(s, "x1", {0: [2, 4]})
    gearbox.set_dim_gears(s, "x2", {0: [2, 4]})
    (y,) = s.run(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
    s.stats["graph_compiles"]   # 2: both gears, compiled up front

Errors are gearbox.Error (a RuntimeError) with the CLI's message, e.kind ("parse", "shape",
"gear", ...) and e.label, the CLI's wording ("parse error").

gearbox.run(model, trace, mode, **options) and gearbox.compare_report(model, trace, modes,
**options) are `gearbox run` and `gearbox compare`: every option of the CLI, by its long name
with '_' (docs/cli.md lists them), printing and writing the same.
"""

import json as _json
import os as _os

from ._gearbox import (  # noqa: F401
    Error,
    Graph,
    GraphBuilder,
    Session,
    __version__,
    load,
    op_names,
    parse,
    reference_run,
    run_options,
    set_dim_gears,
    suggest_gears,
)
from ._gearbox import compare as _compare
from ._gearbox import compare_report as _compare_report
from ._gearbox import run as _run
from ._gearbox import sweep as _sweep
from ._gearbox import mode_table as _mode_table

# From the one mode table (executor/modes/modes.def), in its order.
MODES = tuple(name for name, _ in _mode_table())


def compare(graph, trace, modes=None, **options):
    """Runs `trace` through one Session per mode, with the CLI's deterministic data.

    graph: a Graph or a .gbx path; trace: a .jsonl path or a list of {input: shape} dicts;
    modes: default every mode, geared only when `gears=` is given. Options are Session's.
    Returns one record (dict) per mode: pandas.DataFrame(records) makes a table."""
    if isinstance(graph, str):
        graph = load(graph)
    if modes is None:
        modes = [name for name, needs_gears in _mode_table()
                 if not needs_gears or options.get("gears")]
    if not isinstance(trace, str) and hasattr(trace, "__fspath__"):
        trace = trace.__fspath__()
    return _compare(graph, trace, list(modes), **options)


def _command_options(options):
    # Paths may be os.PathLike, as open() takes them.
    return {k: _os.fspath(v) if hasattr(v, "__fspath__") else v for k, v in options.items()}


def run(model, trace, mode="static", **options):
    """`gearbox run MODEL --trace TRACE --mode MODE`, with every option of the CLI as a keyword
    (json="r.json", junit=..., timeline=..., asserts=["graph_compiles<=3"], quiet=True, ...).

    model: a .gbx path; trace: a .jsonl path. Returns {"exit_status": the CLI's exit code (0, or
    1 when an assert, the reference check or the recompile policy failed), "output": what the
    CLI prints on stdout, "errors": what it prints on stderr, "report": the JSON report (as
    written to json= when given)}. Bad options, model or trace raise gearbox.Error, as the CLI
    exits 2."""
    options = _command_options(options)
    result = _run(model=_os.fspath(model), trace=_os.fspath(trace), mode=mode, **options)
    if options.get("json"):
        # The file holds the per-iteration records the run streamed into it.
        with open(options["json"], encoding="utf-8") as f:
            result["report"] = _json.load(f)
    return result


def compare_report(model, trace, modes=None, **options):
    """`gearbox compare MODEL --trace TRACE --modes ...`, with every option of the CLI as a
    keyword (repeat=5, json=..., junit=..., html=..., timeline=..., check_reference=True, ...).

    trace: a .jsonl path, or None with sweep_dim="INPUT[:DIM]:START:STEP:END" (compare
    --sweep-dim: one call per size, and the per-call time against the size in the output, in
    report["sweep"] and in the html= page; sweep_base= gives the other inputs' shapes).

    modes: a list or a comma-separated string; None is the CLI's default (every mode without
    gears, plus those that need gears when gears= is given). Returns a dict as run() does, with
    "report" the CLI's --json report of every mode; exit_status 2 when a mode could not take
    its input. Modes whose outputs disagree raise gearbox.Error, as the CLI exits 2."""
    options = _command_options(options)
    if modes is not None and not isinstance(modes, str):
        modes = ",".join(modes)
    return _compare_report(model=_os.fspath(model),
                           trace=None if trace is None else _os.fspath(trace), modes=modes,
                           **options)


def sweep(model, trace, grid=None, measured=False, **options):
    """`gearbox sweep MODEL --trace TRACE --grid ...` (docs/sweep.md): every point of the grid
    run over the trace, model only (exact, in parallel) unless measured=True.

    grid: {option keyword: [values]}, e.g. {"recompile_limit": [1, 2, 4], "device_profile":
    ["a100-class", "cpu-host"]}: the points are the cartesian product, the first axis
    outermost. Other keywords
    are the settings every point shares (mode="auto", device_profile=..., any option a point
    may vary) and json=, html=. Returns {"exit_status", "output" (the table), "errors",
    "report" (the --json report: one entry per point, its row and its run report)}. A bad axis
    name or value raises gearbox.Error, as the CLI exits 2."""
    options = _command_options(options)
    return _sweep(model=_os.fspath(model), trace=_os.fspath(trace), grid=grid or {},
                  measured=measured, **options)
