#pragma once
// Each CLI subcommand lives in its own tools/cmd_<name>.cpp and registers itself here; main.cpp
// calls every register function. Commands throw gearbox::Error for user errors (exit 2).

#include <CLI/CLI.hpp>

namespace gearbox::cli {

// Exit code a command wants when it did not throw (e.g. 1 for a broken --assert bound).
extern int gExitCode;

void registerPrint(CLI::App& app);
void registerRun(CLI::App& app);
void registerEval(CLI::App& app);
void registerCompare(CLI::App& app);
void registerRecompileReport(CLI::App& app);
void registerGears(CLI::App& app);
// `gearbox suggest-gears` (tools/cmd_suggest_gears.cpp); registered by registerGears.
void registerSuggestGears(CLI::App& app);
void registerKernels(CLI::App& app);
void registerPrecompile(CLI::App& app);
void registerCalibrate(CLI::App& app);
void registerImport(CLI::App& app);  // tools/cmd_import.cpp
void registerSweep(CLI::App& app);   // tools/cmd_sweep.cpp

}  // namespace gearbox::cli
