#pragma once
// Registers the options of run and compare on a CLI11 command, from the one table
// (driver/run_options.def).

#include <CLI/CLI.hpp>

#include "driver/run_options.h"

namespace gearbox::cli {

// Registers the rows `command` takes on a CLI11 subcommand, bound to `o`.
void addRunOptions(CLI::App* cmd, RunOptions& o, OptionCommands command);

}  // namespace gearbox::cli
