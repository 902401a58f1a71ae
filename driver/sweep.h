#pragma once
// gearbox sweep (issue 25): one command runs a grid of policies over one trace and writes one
// table, --json and --html with the trade-off plots, instead of ten `gearbox run`s merged by
// hand. Every axis of the grid is an option of the one options table (driver/run_options.def),
// set and checked by the table's own setter, so a new run option is an axis without new code:
//
//   gearbox sweep MODEL --trace T --grid recompile_limit=1,2,4,8 --grid mode=static,auto
//
// Model only by default: counters and MODELED figures are exact and do not depend on data, so
// the points run in parallel over the machine's cores and the output is the same bytes for the
// same grid (no timings, rows in grid order). --measured executes the kernels, one point at a
// time (points running side by side would time each other).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "driver/run_command.h"
#include "driver/run_options.h"

namespace gearbox::cli {

struct SweepOptions {
  // The settings every point shares (MODEL, --trace and any option an axis may vary); each
  // point overrides its axes' options.
  RunOptions run;
  std::vector<std::string> grid;  // --grid NAME=V1,V2,... (repeatable; cartesian product)
  bool measured = false;          // --measured: execute the kernels and time every point
  std::string json, html;         // --json FILE, --html FILE
};

// Whether a sweep may vary (and the sweep command takes) an option of the table: the options
// that decide what a session does, i.e. those a Session takes, plus --mode. Not the files,
// printing and bounds of run, and not --model-only (a sweep is model-only unless --measured).
bool sweepTakes(const OptionInfo& option);

// One axis: the option and the values it takes, in the order given.
struct SweepAxis {
  std::string name;  // as the user spelled it ("recompile_limit")
  const OptionInfo* option = nullptr;
  std::vector<std::string> values;
};

// Parses --grid NAME=V1,V2,...: NAME is an option's Python keyword or long name; values are
// separated by ',' outside brackets, braces and quotes, or by ';' when the text has one (for a
// value holding a ',' itself: dim marks "x:0,y:1"). Every value is checked by the table's
// check of its option. Error(kConfig) naming the axis and the value.
std::vector<SweepAxis> parseGrid(const std::vector<std::string>& grid, const RunOptions& base);

// One grid point and what it did.
struct SweepPoint {
  std::vector<std::string> values;  // one per axis
  std::string suggestedGears;       // gears=suggest: the gears suggest-gears chose
  nlohmann::ordered_json report;    // the run report (no per-iteration records)
  std::string error;                // empty when the point ran the whole trace
  std::string errorKind;
  bool ok() const { return error.empty(); }
};

// A column of the table, the JSON rows and the HTML page: a figure of the point's run report,
// named by a JSON pointer, so a report field becomes a column with one line (sweepColumns()).
struct SweepColumn {
  enum Flags : unsigned {
    kNone = 0,
    kMeasured = 1,      // only with --measured
    kIfPresent = 2,     // only when some point's report has the key (a mode's own field)
    kIfNonZero = 4,     // only when some point's value is not 0
    kPlotX = 8,         // the HTML page plots MODELED total against it
    kModeledTotal = 16  // the y of every plot
  };
  std::string header;  // "graph compiles", "modeled total (us)"
  std::string key;     // JSON pointer into the report: "/graph_compiles"
  unsigned flags = kNone;
  int decimals = 1;  // for a floating-point value
};
const std::vector<SweepColumn>& sweepColumns();

struct SweepResult {
  std::vector<SweepAxis> axes;
  std::vector<SweepPoint> points;  // grid order: the first axis outermost
  int64_t iterations = 0;
  bool measured = false;
  std::string profile;  // the fixed settings' device profile name
  // The columns of this sweep (sweepColumns() less those its flags leave out).
  std::vector<const SweepColumn*> columns() const;
};

// Runs every point of the grid over `trace` (in parallel unless measured).
SweepResult runSweep(const SweepOptions& o, const Graph& g,
                     const std::vector<InputSignature>& trace, const std::vector<int>& traceLines);

// The table (one row per point, axis columns first), then one line per failed point.
std::string formatSweepTable(const SweepOptions& o, const SweepResult& r);
nlohmann::ordered_json sweepJson(const SweepOptions& o, const SweepResult& r);
// A self-contained page: the table and MODELED total against every kPlotX column.
std::string renderSweepHtml(const SweepOptions& o, const SweepResult& r);

// `gearbox sweep` (tools/cmd_sweep.cpp, gearbox.sweep): checks the grid, the options, the model
// and the trace before anything runs (Error(kConfig...), nothing written), runs the grid,
// prints the table to `out` and writes --json and --html. A point that fails (the recompile
// limit under `error`, a shape outside its gears) is a row saying so, not a failed sweep:
// exit status 0.
CommandResult sweepCommand(SweepOptions& o, std::ostream& out, std::ostream& err);

}  // namespace gearbox::cli
