// gearbox compare: the options of the table (driver/run_options.def) on a CLI11 subcommand.
// What compare does is driver/compare_command.cpp.
#include <algorithm>
#include <iostream>
#include <memory>

#include "driver/compare.h"
#include "tools/cli_options.h"
#include "tools/commands.h"

namespace gearbox::cli {

// Over the driver's compareCommand, which gearbox.compare_report calls too.
void registerCompare(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "Run every mode over the same trace and data and compare them side by side");
  addRunOptions(cmd, *o, kCompareOnly);
  cmd->callback([o] {
    // max: a command only raises the exit code (as the compare steps always did).
    gExitCode = std::max(gExitCode, compareCommand(*o, std::cout, std::cerr).exitStatus);
  });
}

}  // namespace gearbox::cli
