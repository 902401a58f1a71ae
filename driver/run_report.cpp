#include "driver/run_report.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/sinks/base_sink.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "compiler/compile_log.h"
#include "driver/html_report.h"
#include "graph/error.h"
#include "graph/file_io.h"

namespace gearbox::cli {

IterationDetail parseIterationDetail(const std::string& s) {
  for (IterationDetail d :
       {IterationDetail::kNone, IterationDetail::kCompiles, IterationDetail::kAll})
    if (s == iterationDetailName(d)) return d;
  fail(ErrorKind::kConfig, "--iterations: expected none, compiles or all, got '{}'", s);
}

const char* iterationDetailName(IterationDetail d) {
  switch (d) {
    case IterationDetail::kNone: return "none";
    case IterationDetail::kCompiles: return "compiles";
    case IterationDetail::kAll: return "all";
  }
  return "?";
}

// ---- Warnings ----

void WarningLog::add(const std::string& message) {
  for (Entry& e : entries_)
    if (e.message == message) {
      ++e.count;
      return;
    }
  entries_.push_back({message, 1});
  if (os_) *os_ << "gearbox: warning: " << message << "\n" << std::flush;
}

WarningLog& warningLog() {
  static WarningLog log;
  return log;
}

namespace {

// The compile log's warnings, deduplicated through warningLog(). Compiles on several threads
// (geared up-front compiles) may warn at once: base_sink's mutex serialises them.
class DedupWarningSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    warningLog().add(std::string(msg.payload.data(), msg.payload.size()));
  }
  void flush_() override {}
};

}  // namespace

void installWarningSink(std::ostream* os) {
  warningLog().setOutput(os);
  auto sink = std::make_shared<DedupWarningSink>();
  sink->set_level(spdlog::level::warn);
  compileLogger()->sinks().push_back(sink);
}

// ---- Per-iteration records ----

nlohmann::ordered_json shapesJson(const Graph& g, const InputSignature& sig) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (size_t i = 0; i < sig.size() && i < g.inputs.size(); ++i) {
    auto dims = nlohmann::ordered_json::array();
    for (int d = 0; d < sig[i].rank(); ++d) dims.push_back(sig[i][d]);
    j[g.values[g.inputs[i]].name] = std::move(dims);
  }
  return j;
}

nlohmann::ordered_json iterationJson(const Graph& g, const CallRecord& r) {
  nlohmann::ordered_json it;
  it["iteration"] = r.iteration;
  it["shapes"] = shapesJson(g, r.shapes);
  it["signature"] = r.signature;
  it["graph_compiled"] = r.graphCompiled;
  it["plan"] = r.planId;
  it["reason"] = r.reason;
  it["guard_failures"] = r.guardFailures;
  auto& guards = it["guards"] = nlohmann::ordered_json::array();
  for (const PlanGuardFailure& f : r.guardFailureDetails) {
    nlohmann::ordered_json gj;
    gj["plan"] = f.plan;
    gj["input"] = f.failure.input >= 0 && static_cast<size_t>(f.failure.input) < g.inputs.size()
                      ? g.values[g.inputs[f.failure.input]].name
                      : std::string("?");
    // dim -1 is a rank mismatch: expected and actual are then ranks.
    gj["dim"] = f.failure.dim;
    gj["expected"] = f.failure.expected;
    gj["actual"] = f.failure.actual;
    guards.push_back(std::move(gj));
  }
  it["kernels_compiled"] = r.kernelsCompiled;
  it["fallback"] = r.fallback;
  // The mode's own fields, whatever the mode (ModeStrategy writes them into the record): keys
  // of their own at this level (geared's gear and padding), then the "mode_fields" section.
  nlohmann::ordered_json mf = nlohmann::ordered_json::object();
  for (const ModeField& f : r.modeFields) {
    nlohmann::ordered_json* to = nullptr;
    if (f.place == ModeReportPlace::kTopLevel)
      to = &it[f.name];
    else if (f.place == ModeReportPlace::kModeSection)
      to = &mf[f.name];
    else
      continue;  // the run log's and the timeline's
    switch (f.kind) {
      case ModeField::Kind::kInt: *to = std::stoll(f.value); break;
      case ModeField::Kind::kBool: *to = f.value == "true"; break;
      case ModeField::Kind::kText: *to = f.value; break;
    }
  }
  if (!mf.empty()) it["mode_fields"] = std::move(mf);
  it["launches"] = r.launches;
  it["syncs"] = r.syncs;
  it["allocations"] = r.allocations;
  it["measured_compile_seconds"] = r.compileSeconds;
  it["measured_run_seconds"] = r.runSeconds;
  it["modeled_device_us"] = r.modeledDeviceUs;
  if (r.modeled.paddingWasteUs > 0) it["modeled_padding_waste_us"] = r.modeled.paddingWasteUs;
  return it;
}

// ---- The tracker ----

RunTracker::RunTracker(const Graph& g, Verbosity v, bool explain)
    : graph_(&g), verbosity_(v), explain_(explain) {
  for (ValueId id : g.inputs) inputNames_.push_back(g.values[id].name);
}

namespace {

// The field the mode gave for the run log's "what ran", if any.
const ModeField* runLogField(const CallRecord& r) {
  for (const ModeField& f : r.modeFields)
    if (f.place == ModeReportPlace::kRunLog) return &f;
  return nullptr;
}

// One line per iteration: what ran, what compiled and why.
void printIteration(const CallRecord& r, bool explain, std::ostream& os) {
  std::string what;
  if (r.fallback) {
    what = fmt::format("recompile limit hit: ran through the dynamic path ({})", r.reason);
  } else if (r.graphCompiled) {
    what = fmt::format("compiled plan #{} ({})", r.planId, r.reason);
  } else if (const ModeField* ran = runLogField(r)) {
    what = ran->value;  // the mode's own words (geared: the gear and its padding)
  } else if (r.planId) {
    what = fmt::format("plan #{} (cache hit)", r.planId);
  } else {
    what = "eager";
  }
  os << fmt::format("iter {:>3}  {}  {}", r.iteration, r.signature, what);
  if (!r.kernelsCompiled.empty())
    os << fmt::format("; {} compiled: {}", r.kernelsCompiled.size() == 1 ? "kernel" : "kernels",
                      fmt::join(r.kernelsCompiled, ", "));
  os << "\n";
  if (explain && !r.guardFailures.empty()) {
    os << "          triggered by the following guard failure(s):\n";
    for (const std::string& g : r.guardFailures) os << "          - " << g << "\n";
  }
}

std::string plural(int64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// "1, 2, 3" or "1..64" when the sizes are consecutive and more than three.
std::string sizesText(const std::vector<int64_t>& v) {
  // A plan compiled with the dim symbolic (dynamic, auto) guards "any size"; the compile that
  // follows is a specialisation (batch 1), so "any" then the size, not "-1".
  if (std::any_of(v.begin(), v.end(), [](int64_t x) { return x < 0; })) {
    std::vector<std::string> parts;
    for (int64_t x : v) parts.push_back(x < 0 ? "any" : std::to_string(x));
    return fmt::format("{}", fmt::join(parts, ", "));
  }
  if (v.size() > 3) {
    bool run = true;
    for (size_t i = 1; i < v.size(); ++i) run = run && v[i] == v[i - 1] + 1;
    if (run) return fmt::format("{}..{}", v.front(), v.back());
  }
  if (v.size() > 8)
    return fmt::format("{}, ... {} ({} sizes)", fmt::join(v.begin(), v.begin() + 6, ", "), v.back(),
                       v.size());
  return fmt::format("{}", fmt::join(v, ", "));
}

}  // namespace

void LogHistogram::add(double seconds) {
  // Bucket i holds [1e-9 * 1.01^i, 1e-9 * 1.01^(i+1)); out-of-range times go to the end buckets.
  const double x = seconds > 1e-9 ? std::log(seconds / 1e-9) / std::log(1.01) : 0.0;
  const int i = static_cast<int>(std::clamp(x, 0.0, static_cast<double>(kBuckets - 1)));
  ++buckets_[static_cast<size_t>(i)];
  ++count_;
}

double LogHistogram::median() const {
  if (count_ == 0) return 0;
  // The lower median's bucket, reported at its geometric middle.
  const int64_t rank = (count_ + 1) / 2;
  int64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets_[static_cast<size_t>(i)];
    if (seen >= rank) return 1e-9 * std::pow(1.01, i + 0.5);
  }
  return 0;
}

void RunTracker::spoolIterations(IterationDetail detail) {
  spoolDetail_ = detail;
  // Unlinked at once: the records vanish with the process, even a killed one.
  const char* env = std::getenv("TMPDIR");
  std::string name = std::string(env && *env ? env : "/tmp") + "/gearbox-report-XXXXXX";
  const int fd = ::mkstemp(name.data());
  if (fd < 0)
    fail(ErrorKind::kIo, "cannot create a temp file for the report's records in {}: {}",
         env && *env ? env : "/tmp", std::strerror(errno));
  ::unlink(name.c_str());
  spool_.reset(::fdopen(fd, "w+"));
  if (!spool_) {
    ::close(fd);
    fail(ErrorKind::kIo, "cannot open the report's temp file: {}", std::strerror(errno));
  }
}

void RunTracker::copySpool(const ByteSink& sink) const {
  std::FILE* f = spool_.get();
  if (std::fflush(f) != 0 || std::fseek(f, 0, SEEK_SET) != 0)
    fail(ErrorKind::kIo, "cannot read back the report's records: {}", std::strerror(errno));
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) sink(std::string_view(buf, n));
  if (std::ferror(f))
    fail(ErrorKind::kIo, "cannot read back the report's records: {}", std::strerror(errno));
}

void RunTracker::observe(const CallRecord& r, std::ostream& os) {
  ++calls_;
  runTimes_.add(r.runSeconds);
  const bool compiled = r.graphCompiled || !r.kernelsCompiled.empty();
  if (spool_ && spoolDetail_ != IterationDetail::kNone &&
      (spoolDetail_ == IterationDetail::kAll || compiled)) {
    const std::string rec = (spooled_ ? ",\n    " : "\n    ") + dumpJson(iterationJson(*graph_, r));
    if (std::fwrite(rec.data(), 1, rec.size(), spool_.get()) != rec.size())
      fail(ErrorKind::kIo, "cannot write the report's records to a temp file: {}",
           std::strerror(errno));
    ++spooled_;
  }
  if (compiled) {
    compileIterations_.push_back(r.iteration);
    lastCompile_ = r.iteration;
  }
  if (r.fallback) {
    ++fallbacks_;
    if (firstFallback_ < 0) firstFallback_ = r.iteration;
    lastFallback_ = r.iteration;
  }
  if (r.graphCompiled) {
    ++compiles_;
    // The reason of a recompile is the newest plan's failed guards (describeMiss lists the
    // newest plan first); each failed dim of it is one group.
    bool grouped = false;
    const uint64_t newest = r.guardFailureDetails.empty() ? 0 : r.guardFailureDetails[0].plan;
    for (const PlanGuardFailure& f : r.guardFailureDetails) {
      if (f.plan != newest) break;
      const std::string name =
          f.failure.input >= 0 && static_cast<size_t>(f.failure.input) < inputNames_.size()
              ? inputNames_[f.failure.input]
              : "?";
      auto g = std::find_if(groups_.begin(), groups_.end(), [&](const RecompileGroup& x) {
        return x.input == name && x.dim == f.failure.dim;
      });
      if (g == groups_.end()) {
        groups_.push_back({name, f.failure.dim, 0, 0, {}});
        g = groups_.end() - 1;
        g->values.push_back(f.failure.expected);
      }
      g->count++;
      g->lastIteration = r.iteration;
      if (std::find(g->values.begin(), g->values.end(), f.failure.actual) == g->values.end() &&
          g->values.size() < 4096)
        g->values.push_back(f.failure.actual);
      grouped = true;
    }
    if (!grouped && r.iteration > 0 && compiles_ > 1) ++otherRecompiles_;
  }
  if (jsonl_) {
    const nlohmann::ordered_json it = iterationJson(*graph_, r);
    // One line per call, flushed: a reader tailing the file sees the run as it goes.
    *jsonl_ << dumpJson(it) << "\n" << std::flush;
    if (!*jsonl_) fail(ErrorKind::kIo, "--jsonl {}: write failed", jsonlPath_);
  }
  if (verbosity_ == Verbosity::kVerbose || (verbosity_ == Verbosity::kDefault && compiled))
    printIteration(r, explain_, os);
}

void RunTracker::streamTo(const std::string& path) {
  checkOutputPath("--jsonl", path);
  // A FIFO with no reader would block the open below forever (every other writer refuses
  // it, graph/file_io.h). A non-blocking open tells: ENXIO when nothing reads. Holding that
  // descriptor while the stream opens keeps the FIFO's reader count honest for the open.
  struct stat st {};
  int probe = -1;
  if (::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode)) {
    probe = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (probe < 0 && errno == ENXIO)
      fail(ErrorKind::kIo, "--jsonl {}: it is a FIFO and nothing is reading it", path);
    if (probe < 0) fail(ErrorKind::kIo, "--jsonl {}: {}", path, std::strerror(errno));
  }
  jsonlPath_ = path;
  jsonl_ = std::make_unique<std::ofstream>(path, std::ios::trunc);
  if (probe >= 0) ::close(probe);
  if (!*jsonl_) fail(ErrorKind::kIo, "--jsonl {}: cannot open for writing", path);
}

int64_t RunTracker::compilesAfter(int64_t n) const {
  return std::count_if(compileIterations_.begin(), compileIterations_.end(),
                       [n](int it) { return it >= n; });
}

void RunTracker::printSummary(std::ostream& os, const std::string& indent,
                              bool withWarnings) const {
  const int64_t recompiles = std::max<int64_t>(0, compiles_ - 1);
  if (recompiles > 0) {
    // Dims whose guards failed at the same calls (a shared batch dim) are reported together.
    std::string parts;
    std::vector<bool> done(groups_.size(), false);
    for (size_t i = 0; i < groups_.size(); ++i) {
      if (done[i]) continue;
      const RecompileGroup& g = groups_[i];
      std::string names;
      for (size_t k = i; k < groups_.size(); ++k) {
        const RecompileGroup& o = groups_[k];
        if (done[k] || o.count != g.count || o.lastIteration != g.lastIteration ||
            o.values != g.values || (o.dim < 0) != (g.dim < 0))
          continue;
        done[k] = true;
        names += (names.empty() ? "" : " + ") +
                 (o.dim < 0 ? o.input : fmt::format("{} dim {}", o.input, o.dim));
      }
      parts += parts.empty() ? "" : "; ";
      parts += g.dim < 0
                   ? fmt::format("{} rank changed {}", names, plural(g.count, "time", "times"))
                   : fmt::format("{} changed {} (sizes {})", names,
                                 plural(g.count, "time", "times"), sizesText(g.values));
      parts += fmt::format(" (last iter {})", g.lastIteration);
    }
    if (otherRecompiles_ > 0)
      parts += fmt::format("{}{} for another reason (evicted plans)", parts.empty() ? "" : "; ",
                           otherRecompiles_);
    os << indent
       << fmt::format("{}: {}; last compile at iter {}\n",
                      plural(recompiles, "recompile", "recompiles"), parts, lastCompile_);
  } else if (compiles_ == 1) {
    os << indent << "no recompiles (one plan compile)\n";
  } else if (compiles_ == 0 && !compileIterations_.empty()) {
    // Eager: no plan, but kernels compile the first time each op shape is seen.
    os << indent
       << fmt::format("{} compiled kernels (last iter {})\n",
                      plural(static_cast<int64_t>(compileIterations_.size()), "call", "calls"),
                      lastCompile_);
  }
  if (fallbacks_ > 0)
    os << indent
       << fmt::format("recompile limit: {} ran through the dynamic path (iters {}..{})\n",
                      plural(fallbacks_, "call", "calls"), firstFallback_, lastFallback_);
  if (!withWarnings) return;
  // A warning printed when it came is not repeated here, only counted when it came again; with
  // -q none was printed, so each is shown once here.
  for (const WarningLog::Entry& w : warningLog().entries()) {
    if (verbosity_ == Verbosity::kQuiet)
      os << indent
         << fmt::format("warning ({}): {}\n", plural(w.count, "time", "times"), w.message);
    else if (w.count > 1)
      os << indent
         << fmt::format("warning repeated {} times: {}\n", w.count,
                        w.message.size() > 60 ? w.message.substr(0, 57) + "..." : w.message);
  }
}

nlohmann::ordered_json RunTracker::summaryJson() const {
  nlohmann::ordered_json j;
  j["recompiles"] = std::max<int64_t>(0, compiles_ - 1);
  auto& groups = j["recompile_reasons"] = nlohmann::ordered_json::array();
  for (const RecompileGroup& g : groups_)
    groups.push_back({{"input", g.input},
                      {"dim", g.dim},
                      {"count", g.count},
                      {"last_iteration", g.lastIteration},
                      {"sizes", g.values}});
  j["other_recompiles"] = otherRecompiles_;
  j["last_compile_iteration"] = lastCompile_;
  j["fallback_calls"] = fallbacks_;
  return j;
}

const std::vector<std::string>& knownMetrics() {
  static const std::vector<std::string> names = {"iterations",
                                                 "graph_compiles",
                                                 "kernel_compiles",
                                                 "kernel_store_hits",
                                                 "plan_cache_hits",
                                                 "plan_cache_misses",
                                                 "kernel_cache_hits",
                                                 "kernel_cache_misses",
                                                 "kernel_cache_evictions",
                                                 "plan_cache_evictions",
                                                 "launches",
                                                 "syncs",
                                                 "allocations",
                                                 "fallback_runs",
                                                 "peak_bytes",
                                                 "modeled_resident_bytes",
                                                 "modeled_peak_bytes",
                                                 "padded_calls",
                                                 "warnings",
                                                 "measured_host_compile_seconds",
                                                 "measured_median_run_seconds",
                                                 "modeled_device_us",
                                                 "modeled_compile_us",
                                                 "modeled_last_call_us",
                                                 "compiles_after(N)"};
  return names;
}

// JUnit XML escapes the same five characters as HTML (htmlEscape's &#39; is valid XML too).
void writeJunit(const std::string& path, const std::string& suite,
                const std::vector<AssertResult>& results) {
  int failures = 0;
  for (const AssertResult& r : results) failures += r.ok ? 0 : 1;
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += fmt::format("<testsuites tests=\"{}\" failures=\"{}\">\n", results.size(), failures);
  x += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\">\n",
                   htmlEscape(suite), results.size(), failures);
  for (const AssertResult& r : results) {
    x += fmt::format("    <testcase classname=\"{}\" name=\"{}\"", htmlEscape(suite),
                     htmlEscape(r.assertion));
    if (r.ok) {
      x += "/>\n";
      continue;
    }
    x +=
        fmt::format(">\n      <failure message=\"{}\"/>\n    </testcase>\n", htmlEscape(r.message));
  }
  x += "  </testsuite>\n</testsuites>\n";
  writeFileAtomic(path, x);
}

std::string dumpJson(const nlohmann::ordered_json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void checkOutputsAreNotInputs(const NamedPaths& outputs, const NamedPaths& inputs) {
  namespace fs = std::filesystem;
  for (const auto& [outOption, out] : outputs) {
    if (out.empty()) continue;
    for (const auto& [inOption, in] : inputs) {
      if (in.empty()) continue;
      // An output that does not exist yet cannot be an input (an input must exist to be read),
      // and one that is not a regular file (/dev/null, a FIFO) is written in place, never
      // truncated. equivalent() compares device and inode, so links and other spellings of
      // the same file are found too.
      std::error_code ec;
      if (fs::is_regular_file(out, ec) && fs::equivalent(out, in, ec) && !ec)
        fail(ErrorKind::kConfig, "{} {} is the same file as {} {}: refusing to overwrite an input",
             outOption, out, inOption, in);
    }
  }
}

std::string formatSeconds(double s) {
  if (s < 1e-6) return fmt::format("{:.0f} ns", s * 1e9);
  if (s < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.2f} s", s);
}

}  // namespace gearbox::cli
