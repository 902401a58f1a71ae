#pragma once
// What `gearbox run` and `gearbox compare` print while and after they run, and the report v1
// pieces they share (docs/report-schema.json, docs/cli-output.md):
//   - output levels: quiet (-q, the summary only), default (compiles and recompile reasons,
//     like TORCH_LOGS=recompiles), verbose (-v, every iteration);
//   - warnings deduplicated: the first of each is printed, the repeats counted in the summary;
//   - the end summary grouping recompile reasons by input and dim;
//   - --jsonl: one record per iteration, streamed (flushed per line) as the run goes;
//   - --junit: one JUnit testcase per --assert.

#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "executor/session.h"
#include "graph/file_io.h"

namespace gearbox::cli {

enum class Verbosity { kQuiet, kDefault, kVerbose };
// What --iterations keeps in the JSON report's per_iteration list.
enum class IterationDetail { kNone, kCompiles, kAll };
IterationDetail parseIterationDetail(const std::string& s);  // Error(kConfig) when unknown
const char* iterationDetailName(IterationDetail d);

// Deduplicated warnings. The compile log's warnings go through here (installWarningSink), so a
// warning that repeats on every call is printed once and counted.
class WarningLog {
 public:
  struct Entry {
    std::string message;
    int64_t count = 0;
  };
  // Records a warning; prints it to `os` the first time unless `quietNow`.
  void add(const std::string& message);
  void setOutput(std::ostream* os) { os_ = os; }
  const std::vector<Entry>& entries() const { return entries_; }
  void clear() { entries_.clear(); }

 private:
  std::vector<Entry> entries_;
  std::ostream* os_ = nullptr;
};
// The process-wide log the CLI's compile-log sink writes to.
WarningLog& warningLog();
// Replaces the compile log's stderr sink by one that feeds warningLog(); warnings are printed to
// `os` on first sight (nullptr: only counted, for -q).
void installWarningSink(std::ostream* os);

// One group of recompiles: the calls whose plan compile was caused by this input's dim.
struct RecompileGroup {
  std::string input;
  int dim = -1;  // -1: rank changed
  int64_t count = 0;
  int lastIteration = 0;
  std::vector<int64_t> values;  // distinct sizes seen at the compiles, in first-seen order
};

// Measured seconds in log buckets 1% wide, from 1 ns to 1,000 s: the median of any number of
// calls in 22 KB, within 0.5% (a run over a million calls keeps no per-call times).
class LogHistogram {
 public:
  void add(double seconds);
  int64_t count() const { return count_; }
  double median() const;  // 0 when empty

 private:
  static constexpr int kBuckets = 2785;  // > log(1e12) / log(1.01) = 2777.2
  std::array<int64_t, kBuckets> buckets_{};
  int64_t count_ = 0;
};

// Watches every call of one session as it is made: prints it at the chosen level, groups the
// recompile reasons, counts fallbacks, and streams --jsonl.
class RunTracker {
 public:
  // `g` (the session's graph, for input names) must outlive the tracker.
  RunTracker(const Graph& g, Verbosity v, bool explain);
  // Called after each call with its record.
  void observe(const CallRecord& r, std::ostream& os);
  // The summary lines (recompiles by input and dim, fallbacks, repeated warnings).
  // `withWarnings`: also the deduplicated warnings with their counts (compare prints those once).
  void printSummary(std::ostream& os, const std::string& indent = "  ",
                    bool withWarnings = true) const;
  nlohmann::ordered_json summaryJson() const;
  // Calls at iteration >= n that compiled a plan or a kernel (the compiles_after(N) metric).
  int64_t compilesAfter(int64_t n) const;
  // --jsonl: opened before the run (a bad path fails early), one line per call, flushed.
  void streamTo(const std::string& path);
  int64_t calls() const { return calls_; }
  // The JSON report's per_iteration records (those `detail` keeps) go to an unlinked temp
  // file as the run goes, instead of staying in the session's history, so memory stays flat
  // over any number of calls; writeReportFile splices them into the report.
  void spoolIterations(IterationDetail detail);
  bool spooling() const { return spool_ != nullptr; }
  // The spooled records, each on its own line, separated by commas (Error(kIo) on a failed read).
  void copySpool(const ByteSink& sink) const;
  // The median measured run time of every call observed (LogHistogram: within 0.5%).
  double medianRunSeconds() const { return runTimes_.median(); }

 private:
  const Graph* graph_;
  std::vector<std::string> inputNames_;
  Verbosity verbosity_;
  bool explain_;
  int64_t calls_ = 0, compiles_ = 0, fallbacks_ = 0;
  int firstFallback_ = -1, lastFallback_ = -1, lastCompile_ = -1;
  std::vector<int> compileIterations_;  // one entry per call that compiled anything
  std::vector<RecompileGroup> groups_;
  int64_t otherRecompiles_ = 0;  // evictions and other reasons without a failed guard
  std::unique_ptr<std::ofstream> jsonl_;
  std::string jsonlPath_;
  LogHistogram runTimes_;
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, FileCloser> spool_;
  IterationDetail spoolDetail_ = IterationDetail::kAll;
  int64_t spooled_ = 0;
};

// One per-iteration record of the JSON report (and of --jsonl), with the mode's own fields.
nlohmann::ordered_json iterationJson(const Graph& g, const CallRecord& r);
// Structured shapes: {"x1": [2, 2]}.
nlohmann::ordered_json shapesJson(const Graph& g, const InputSignature& sig);

// The known --assert metric names of a run report (compiles_after(N) is one too).
const std::vector<std::string>& knownMetrics();

// Writes JUnit XML atomically: one testsuite `suite`, one testcase per assertion.
struct AssertResult {
  std::string assertion;
  bool ok = true;
  std::string message;  // why it failed
};
void writeJunit(const std::string& path, const std::string& suite,
                const std::vector<AssertResult>& results);

// j.dump(indent) with every string that is not valid UTF-8 written with U+FFFD in place of
// its bad bytes: file names and option values come from outside, and nlohmann's default is to
// throw (type_error 316) after the run has finished, losing its report.
std::string dumpJson(const nlohmann::ordered_json& j, int indent = -1);

// (option, path) pairs; an empty path is an option not given.
using NamedPaths = std::vector<std::pair<std::string, std::string>>;

// Refuses an output that is one of the inputs (the same file by any spelling, hard link or
// symlink): opening it for writing would empty the input before or while it is read. Checked
// before anything is opened. Error(kConfig) naming both options and the path.
void checkOutputsAreNotInputs(const NamedPaths& outputs, const NamedPaths& inputs);

// Formats seconds for humans: "412 ns", "3.1 us", "2.4 ms", "1.20 s".
std::string formatSeconds(double s);

}  // namespace gearbox::cli
