#pragma once
// Comparing modes over one trace (gearbox compare, gearbox.compare): the per-mode result, the
// side-by-side table and the two verdicts, MEASURED (given only when the winner beats the
// runner-up by more than the spread over the repeats) and MODELED (exact).

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "driver/html_report.h"
#include "driver/reference_check.h"
#include "driver/run_command.h"
#include "driver/run_report.h"
#include "executor/session.h"
#include "graph/error.h"

namespace gearbox::cli {

// Median and spread (max - min) of one measured figure over the repeats.
struct Spread {
  double median = 0, min = 0, max = 0;
  double spread() const { return max - min; }
};

Spread spreadOf(std::vector<double> v);

struct ModeResult {
  Mode mode;
  std::string failure;            // empty when every repeat ran the whole trace
  nlohmann::ordered_json report;  // of the first repeat (counters and modeled are exact)
  ModeledTime modeled;
  double modeledLastCallUs = 0;
  double calls = 0;
  // Measured, one entry per repeat, in seconds.
  std::vector<double> compile, run, total;
  Spread compileS, runS, totalS;
  std::optional<ReferenceCheck> check;  // --check-reference, on the first repeat
  std::unique_ptr<RunTracker> tracker;  // the first repeat's calls (summary, compiles_after)
  std::optional<Error> error;           // why it failed (kept for the exit code)
  // --html: the first repeat's counters and calls, and every repeat's measured per-call
  // seconds (compile + run), for the plots.
  HtmlModeData html;
  bool ok() const { return failure.empty(); }
};

// The warnings logged so far, every kind (the report's per-mode count is a difference).
int64_t totalWarnings();
// "--modes static,dynamic": the modes in the order given; Error(kConfig) for an unknown or
// repeated one, or none.
std::vector<Mode> parseModes(const std::string& list);
// Largest elementwise difference between two modes' outputs over the whole trace.
double maxDiff(const std::vector<std::vector<Tensor>>& a,
               const std::vector<std::vector<Tensor>>& b);
// Starts oneTBB's worker threads before anything is timed; returns what that took (seconds).
double warmTbbArena();
// The side-by-side table: counters, measured times (median +- half the spread), MODELED terms.
void printCompareTable(const std::vector<ModeResult>& results, int repeat, std::ostream& os);
// "fastest by MODELED device time: ..." with why each other mode loses.
std::string modeledVerdict(const std::vector<ModeResult>& results);
// "fastest by measured host time ..." or "no clear winner" when within the spread.
std::string measuredVerdict(const std::vector<ModeResult>& results, int repeat);

// `gearbox compare` (driver/compare_command.cpp): runs every mode of o.modes over o.trace,
// --repeat fresh sessions each, prints the side-by-side table and the verdicts to `out` (stderr's
// lines to `err`), and writes --json, --junit, --timeline and --html. The exit status is 1 for
// a broken bound or policy, 2 for a mode that could not take its input; modes whose outputs
// disagree, and bad options, model or trace, are thrown as Error.
CommandResult compareCommand(RunOptions& o, std::ostream& out, std::ostream& err);

}  // namespace gearbox::cli
