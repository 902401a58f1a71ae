#pragma once
// Options shared by `gearbox run` and `gearbox compare`, and the report both print.

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "driver/reference_check.h"
#include "driver/run_report.h"
#include "driver/trace.h"
#include "executor/session.h"

namespace gearbox::cli {

// Cache capacities above this are a typo, not a plan: 16M entries of kernel specs or plans is
// far more than any trace compiles, and it keeps the per-shard arithmetic far from overflow.
constexpr size_t kMaxCacheCapacity = size_t{1} << 24;

struct RunOptions {
  std::string model, trace, json, mode = "static", device = "inline";
  std::string onRecompileLimit = "fallback", dynamicDims, staticDims, costModel;
  std::string deviceProfile;  // --device-profile NAME|FILE (empty: kDefaultProfile)
  bool modelOnly = false;     // --model-only: count and model, do not execute kernels
  std::vector<std::string> costOverrides, asserts;
  std::string logFile;
  bool logStdout = false, iterMarkers = false, explain = false, quiet = false, verbose = false;
  // Report v1 outputs (driver/run_report.h): --iterations none|compiles|all, --jsonl, --junit.
  std::string iterations = "all", jsonl, junit;
  bool noPasses = false;  // --no-passes: run the graph as written (the unfused comparison)
  size_t kernelCacheCapacity = 1024, planCacheCapacity = 64;  // each in [1, kMaxCacheCapacity]
  int recompileLimit = 8;
  uint64_t seed = 0;
  // Persistence and static-kernel workflows (seeds 000 and 003).
  std::string kernelMeta, recordOpInfo;
  std::vector<std::string> kernelBundles;
  // Geared mode.
  std::string gears, merge = "zip", gearFallback = "error";
  std::vector<std::string> padTo;  // --pad-to NAME=DIMS: the fixed-shape policy (seed 002)
  // --check-reference (driver/reference_check.h).
  bool checkReference = false;
  ReferenceTolerance tolerance;
  int64_t maxPadBytes = int64_t{1} << 30;  // GearOptions::maxPadBytes
  size_t historyLimit = 0;                 // SessionOptions::historyLimit
  // --mode-option MODE.NAME=VALUE (repeatable): an option of one mode; a session gets those of
  // its own mode (SessionOptions::modeOptions), which checks them when it is built.
  std::vector<std::string> modeOptions;
};

// --gears takes the JSON itself or @path to a file holding it (tools/cmd_gears.cpp).
std::string gearsText(const std::string& arg);
// --pad-to NAME=DIMS (tools/cmd_gears.cpp): "pred=8,20,4" -> {"pred", [8, 20, 4]}.
std::pair<std::string, Shape> parsePadTo(const std::string& arg);

// Adds --kernel-meta, --record-op-info and --kernel-bundle (tools/kernel_store_options.cpp).
void addKernelStoreOptions(CLI::App* cmd, RunOptions& o);
// Creates the stores and hooks those options ask for.
void attachKernelStores(const RunOptions& o, SessionOptions& s);

// Adds the options common to run and compare (everything but --mode/--json), including
// --check-reference/--rtol/--atol.
void addCommonOptions(CLI::App* cmd, RunOptions& o);
SessionOptions toSessionOptions(const RunOptions& o, Mode mode);
// The files a run reads (MODEL, --trace, --gears @FILE, a profile file) as (option, path), for
// checkOutputsAreNotInputs.
NamedPaths inputPaths(const RunOptions& o);
void configureLogFromOptions(const RunOptions& o);

// The version of the JSON report's layout (docs/report-schema.json).
constexpr int kReportSchemaVersion = 1;

// What a CLI report adds to a session's own figures.
struct ReportExtras {
  const RunOptions* options = nullptr;  // the config block's seed and gear options
  const RunTracker* tracker = nullptr;  // the recompile summary
  IterationDetail detail = IterationDetail::kAll;
};

// The report of one session over a trace (report v1: docs/report-schema.json). Units: every
// measured figure is in seconds and its key starts with measured_ and ends in _seconds; every
// MODELED figure is in microseconds, and its key starts with modeled_ (or sits in the modeled
// block) and ends in _us.
nlohmann::ordered_json reportJson(const Session& s, const std::string& model,
                                  const std::string& trace, const ReportExtras& extras = {});
// The config block: everything that decides the counters (mode, seed, profile, capacities,
// recompile limit, dim marks, gears, passes).
nlohmann::ordered_json configJson(const SessionOptions& s, const RunOptions* o);
// {"name": "gearbox", "version": "..."}
nlohmann::ordered_json toolJson();
Verbosity verbosityOf(const RunOptions& o);  // Error(kConfig) for -q with -v
// The median measured run time: exact over the session's history while it holds every call,
// else from the tracker's histogram of every call (within 0.5%).
double medianRunSeconds(const Session& s, const RunTracker* tracker = nullptr);
// The MODELED breakdown as JSON: compile_us, launch_sync_us, compute_us, padding_waste_us,
// padding_waste_pct (of compute), host_dynamic_us, total_us.
nlohmann::ordered_json modeledJson(const ModeledTime& m);
void printSummary(const Session& s, std::ostream& os, const RunTracker* tracker = nullptr);

// --assert 'graph_compiles<=3', 'compiles_after(10)==0', and in compare 'static.launches<=9'.
struct Assertion {
  std::string text, mode, metric, op;  // mode empty: every mode (compare) or the run's
  int64_t after = -1;                  // compiles_after(N): N
  double bound = 0;
};
// Parses and checks every assertion before anything runs: syntax, metric names (knownMetrics)
// and, when `modes` is not empty, the mode prefix. Error(kConfig) naming the assertion.
std::vector<Assertion> parseAsserts(const std::vector<std::string>& asserts,
                                    const std::vector<std::string>& modes = {});
// Evaluates one parsed assertion against one mode's report (and its tracker for
// compiles_after).
AssertResult evaluateAssert(const Assertion& a, const nlohmann::ordered_json& report,
                            const RunTracker* tracker, const std::string& modeLabel = "");
// Parses and evaluates against one report; returns the failure messages (empty = all hold).
std::vector<std::string> checkAsserts(const nlohmann::ordered_json& report,
                                      const std::vector<std::string>& asserts);

// Runs every trace iteration through the session with deterministic inputs (seed + i),
// printing what the output level asks for (through `tracker` when given; without one, one line
// per iteration unless quiet). `next` yields the iterations one at a time (a TraceReader
// streams a file; the vector form below wraps one in memory). An Error during a call is
// rethrown naming the mode, the iteration and the trace file:line (when the entry has one).
// Returns the outputs of every call when `keepOutputs` (compare checks the modes agree). With
// `check`, every call's outputs are compared with the reference executor's on the same inputs.
using TraceNext = std::function<bool(TraceEntry&)>;
std::vector<std::vector<Tensor>> runTrace(Session& session, const TraceNext& next,
                                          const RunOptions& o, std::ostream& os,
                                          bool keepOutputs = false, ReferenceCheck* check = nullptr,
                                          RunTracker* tracker = nullptr);
std::vector<std::vector<Tensor>> runTrace(Session& session,
                                          const std::vector<InputSignature>& trace,
                                          const RunOptions& o, std::ostream& os,
                                          bool keepOutputs = false, ReferenceCheck* check = nullptr,
                                          RunTracker* tracker = nullptr,
                                          const std::vector<int>* traceLines = nullptr);

// Writes JSON to a file atomically.
void writeJsonFile(const std::string& path, const nlohmann::ordered_json& j);
// Writes a run report atomically; when `tracker` spooled the per_iteration records, they are
// streamed from its temp file into the report's last key, so the report is never held whole.
void writeReportFile(const std::string& path, const nlohmann::ordered_json& report,
                     const RunTracker* tracker);

}  // namespace gearbox::cli
