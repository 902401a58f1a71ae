#pragma once
// The whole of `gearbox run` and `gearbox compare` as library calls: the CLI (tools/cmd_run.cpp,
// tools/cmd_compare.cpp) and the Python module (gearbox.run, gearbox.compare_report) are thin
// over them, so both check, print, write and judge a run the same way (issue 21).

#include <nlohmann/json.hpp>
#include <ostream>

#include "driver/run_options.h"

namespace gearbox::cli {

// What a command hands back besides the text it prints.
struct CommandResult {
  // The CLI's exit code when nothing was thrown: 0, 1 when a bound (--assert, the reference
  // check) or a policy (recompile limit `error`) failed, 2 when a compared mode could not take
  // its input. Bad input (options, model, trace) is thrown as Error instead.
  int exitStatus = 0;
  // The JSON report as --json writes it; `run` leaves the per_iteration records out of this
  // copy when it streamed them into the --json file (read the file for those).
  nlohmann::ordered_json report;
};

// `gearbox run`: runs o.model over o.trace in o.mode, printing to `out` what the CLI prints on
// stdout and to `err` what it prints on stderr (warnings, broken bounds), and writes the files
// the options ask for (--json, --jsonl, --junit, --timeline, --log). Options, paths, the model
// and the trace are checked before anything runs: Error(kConfig, ...) and nothing written.
CommandResult runCommand(RunOptions& o, std::ostream& out, std::ostream& err);

}  // namespace gearbox::cli
