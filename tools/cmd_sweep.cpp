// gearbox sweep: a grid of run options over one trace, one table (driver/sweep.h). The options
// of the table (driver/run_options.def) a point may vary are the sweep's fixed settings too.
#include <iostream>
#include <memory>

#include "driver/sweep.h"
#include "tools/cli_options.h"
#include "tools/commands.h"

namespace gearbox::cli {

void registerSweep(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "Run a grid of run options over one trace (model only, in parallel) and tabulate "
      "compiles, fallbacks, cache hits and the MODELED total per point");
  addSweepOptions(cmd, o->run);
  cmd->add_option("--grid", o->grid,
                  "An axis: OPTION=V1,V2,... (any option above, by its Python keyword or long "
                  "name; ';' separates values that hold a ','; gears=suggest runs suggest-gears). "
                  "Repeatable: the points are the cartesian product, first axis outermost");
  cmd->add_flag("--measured", o->measured,
                "Execute the kernels and time every point, one at a time (default: model only)");
  cmd->add_option("--json", o->json, "Write every point's row and run report as JSON (atomically)");
  cmd->add_option("--html", o->html,
                  "Write a self-contained HTML page: the table and MODELED total vs compiles "
                  "and vs memory");
  cmd->callback([o] { gExitCode = sweepCommand(*o, std::cout, std::cerr).exitStatus; });
}

}  // namespace gearbox::cli
