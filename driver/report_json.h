#pragma once
// The JSON report of a session over a trace (report v1, docs/report-schema.json), its config
// block, the printed summary, and --assert: parsing and evaluating bounds on a report.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "driver/run_report.h"
#include "executor/session.h"

namespace gearbox::cli {

struct RunOptions;  // driver/run_options.h

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
// MODELED time is in microseconds, and its key starts with modeled_ (or sits in the modeled
// block) and ends in _us; every MODELED memory figure is in bytes, its key starting with
// modeled_ (or sitting in the modeled_memory block) and ending in _bytes.
nlohmann::ordered_json reportJson(const Session& s, const std::string& model,
                                  const std::string& trace, const ReportExtras& extras = {});
// The config block: everything that decides the counters (mode, seed, profile, capacities,
// recompile limit, dim marks, gears, passes).
nlohmann::ordered_json configJson(const SessionOptions& s, const RunOptions* o);
// The report's "modeled_memory" block: every MODELED device-memory term, with its source.
nlohmann::ordered_json modeledMemoryJson(const ModeledMemory& m, const SessionOptions& o);
// {"name": "gearbox", "version": "..."}
nlohmann::ordered_json toolJson();
// The median measured run time: exact over the session's history while it holds every call,
// else from the tracker's histogram of every call (within 0.5%).
double medianRunSeconds(const Session& s, const RunTracker* tracker = nullptr);
// The MODELED breakdown as JSON: compile_us, launch_sync_us, compute_us, padding_waste_us,
// padding_waste_pct (of compute), host_dynamic_us, total_us.
nlohmann::ordered_json modeledJson(const ModeledTime& m);
// The "startup" block: prepare()'s up-front compiles (measured and MODELED) and the first call.
nlohmann::ordered_json startupJson(const StartupStats& s);
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

// Writes JSON to a file atomically.
void writeJsonFile(const std::string& path, const nlohmann::ordered_json& j);
// Writes a run report atomically; when `tracker` spooled the per_iteration records, they are
// streamed from its temp file into the report's last key, so the report is never held whole.
void writeReportFile(const std::string& path, const nlohmann::ordered_json& report,
                     const RunTracker* tracker);

}  // namespace gearbox::cli
