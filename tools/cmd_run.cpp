// gearbox run: the options of the table (driver/run_options.def) on a CLI11 subcommand, over
// the driver's runCommand (driver/run_command.h), which gearbox.run calls too.
#include <iostream>
#include <memory>

#include "driver/run_command.h"
#include "tools/cli_options.h"
#include "tools/commands.h"

namespace gearbox::cli {

void registerRun(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run",
                                     "Run a model over a trace in one mode and report "
                                     "compiles, cache hits, launches and times");
  addRunOptions(cmd, *o, kRunOnly);
  cmd->callback([o] { gExitCode = runCommand(*o, std::cout, std::cerr).exitStatus; });
}

}  // namespace gearbox::cli
