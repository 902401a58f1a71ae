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
"""

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
