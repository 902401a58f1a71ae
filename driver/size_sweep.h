#pragma once
// compare --sweep-dim: the latency-vs-size curve (issue 24). One call per size of one input
// dim, in every mode, and each call's time against its size, MEASURED and MODELED: static's
// compile spikes, dynamic's flat but higher line, the gears' sawtooth from padding (the shape
// of DietCode's and the PT2 paper's dynamic-shape figures).
//
//   --sweep-dim INPUT[:DIM]:START:STEP:END
//
// The sizes are START, START + STEP, ... up to END (END itself when it is on that grid), in
// that order, one call each. DIM may be left out when INPUT has exactly one dynamic dim. Every
// input dim declared with the swept dim's symbol follows it (an expression of the symbol takes
// its value). Any other dynamic dim takes its size from --sweep-base, a trace line (input name
// -> shape) in which the swept dims' values are replaced. Everything is checked before a call
// runs; an error names --sweep-dim or --sweep-base and exits 2.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "compiler/specialize.h"
#include "executor/session.h"

namespace gearbox::cli {

// A curve is read by eye and every size is at least one compile in static mode: 10,000 sizes
// is past any useful curve, and bounds a typo (x:1:1:1000000000).
constexpr int64_t kMaxSweepSizes = 10000;

struct SizeSweep {
  std::string spec;  // as given
  std::string input;
  int dim = 0;
  std::string symbol;  // the swept dim's symbol, "" for an independent -1 dim
  std::vector<int64_t> sizes;
  std::vector<InputSignature> trace;  // one call per size, in order
  // "x dim 0 (B)": how the tables and plots name the axis.
  std::string label() const;
};

// Parses and checks --sweep-dim (and --sweep-base, "" for none) against the graph, and makes
// the trace. Error(kConfig) naming the option, the input and the dim.
SizeSweep parseSizeSweep(const Graph& g, const std::string& spec, const std::string& base);

// One call of a sweep in one mode.
struct SweepCall {
  int64_t size = 0;
  double modeledUs = 0;         // MODELED device time of the call
  double paddingWasteUs = 0;    // MODELED, the part of it spent on padding (geared)
  bool graphCompiled = false;   // a plan or a capture compiled in the call
  int64_t kernelsCompiled = 0;  // kernels compiled in the call (eager compiles only these)
  bool fallback = false;        // ran the dynamic (or eager) path: past the recompile limit,
                                // or outside the gears
  bool padded = false;          // padded up to a gear
  // MEASURED host seconds of the call (compile + run) over the repeats; none under
  // --model-only.
  double measuredMedian = 0, measuredMin = 0, measuredMax = 0;
};

// One mode's curve: the calls that ran (a mode that failed stops at its failure).
struct SweepModeCurve {
  std::string mode;
  std::string failure;  // empty when every size ran
  std::vector<SweepCall> calls;
};

// The curve of one mode from its first repeat's records and every repeat's per-call seconds.
SweepModeCurve sweepCurve(const SizeSweep& sweep, const std::string& mode,
                          const std::string& failure, const std::vector<CallRecord>& history,
                          const std::vector<std::vector<double>>& callSeconds);

// The text table: a row per size, per mode the MEASURED median (not under --model-only), the
// MODELED time and what the call did (C compiled a graph, K compiled kernels only, F fallback,
// P padded), then the legend.
void printSizeSweepTable(const SizeSweep& sweep, const std::vector<SweepModeCurve>& curves,
                         bool modelOnly, int repeat, std::ostream& os);

// The compare report's "sweep" object (docs/report-schema.json).
nlohmann::ordered_json sizeSweepJson(const SizeSweep& sweep,
                                     const std::vector<SweepModeCurve>& curves, bool modelOnly);

}  // namespace gearbox::cli
