#pragma once
// Registers the options of run and compare on a CLI11 command, from the one table
// (driver/run_options.def).

#include <CLI/CLI.hpp>

#include "driver/run_options.h"

namespace gearbox::cli {

// Registers the rows `command` takes on a CLI11 subcommand, bound to `o`.
void addRunOptions(CLI::App* cmd, RunOptions& o, OptionCommands command);

// Registers MODEL, --trace and the rows a sweep may vary (driver/sweep.h: sweepTakes) on
// `gearbox sweep`, each as the value every grid point shares unless an axis varies it.
void addSweepOptions(CLI::App* cmd, RunOptions& o);

}  // namespace gearbox::cli
