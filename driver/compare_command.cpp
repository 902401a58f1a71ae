// gearbox compare MODEL --trace TRACE [--modes M1,M2,...] [--repeat N] [--json F]
//                 [--check-reference]
//
// Runs every mode over the same trace and the same data, checks that they return the same
// outputs, and prints one side-by-side table of counters, measured host times (median and
// spread over --repeat fresh sessions) and the MODELED device time with its breakdown, then
// which mode is fastest and why. A measured verdict is given only when the winner beats the
// runner-up by more than the spread. A mode that fails keeps its column, saying why. With
// --check-reference every mode is also checked against the reference executor (a bug shared by
// every mode would pass the agreement check alone). With --sweep-dim the trace is one call per
// size of one input dim (driver/size_sweep.h), and the output adds the per-call table against
// the size (and its plots with --html).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>

#include "driver/compare.h"
#include "driver/gear_suggest.h"
#include "driver/html_report.h"
#include "driver/run_options.h"
#include "driver/run_report.h"
#include "driver/size_sweep.h"
#include "driver/trace.h"
#include "driver/visual_options.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "graph/text.h"

namespace gearbox::cli {

namespace {
// What one `gearbox compare` works with, filled in by its steps in order.
struct CompareRun {
  CompareRun(RunOptions& options, std::ostream& output, std::ostream& errors)
      : o(options), out(output), err(errors) {}
  RunOptions& o;
  std::ostream& out;  // what the CLI prints on stdout
  std::ostream& err;  // and on stderr
  VisualOptions visual;
  int status = 0;  // the exit code when nothing is thrown
  Verbosity verbosity = Verbosity::kDefault;
  IterationDetail detail = IterationDetail::kAll;
  std::optional<Graph> graph;
  std::vector<InputSignature> trace;
  std::vector<int> lines;              // the trace line of each iteration
  std::string traceName;               // the --trace file, or "--sweep-dim SPEC"
  std::optional<SizeSweep> sweep;      // --sweep-dim
  std::vector<SweepModeCurve> curves;  // per mode, after the runs
  std::vector<Mode> modes;
  std::vector<std::string> modeNames;
  std::vector<Assertion> asserts;
  double tbbStartup = 0;
  std::vector<ModeResult> results;
  std::vector<std::vector<std::vector<Tensor>>> outputs;  // per mode that ran the whole trace
  CostModel profile;
  double diff = 0;                    // largest difference between two modes' outputs
  std::vector<std::string> failures;  // broken bounds and reference disagreements
  std::vector<AssertResult> checks;   // every bound against every mode it names
};

// Options, bounds and output paths are checked before anything runs.
void checkCompareOptions(CompareRun& c) {
  RunOptions& o = c.o;
  c.visual.prepare(o);
  c.verbosity = verbosityOf(o);
  c.detail = parseIterationDetail(o.iterations);
  // The calls come from --trace or from --sweep-dim, exactly one of them.
  if (o.trace.empty() && o.sweepDim.empty())
    fail(ErrorKind::kConfig, "compare needs --trace, or --sweep-dim to make one call per size");
  if (!o.trace.empty() && !o.sweepDim.empty())
    fail(ErrorKind::kConfig,
         "give --trace or --sweep-dim, not both (--sweep-dim makes the calls; --sweep-base "
         "gives its other inputs' shapes)");
  if (!o.sweepBase.empty() && o.sweepDim.empty())
    fail(ErrorKind::kConfig, "--sweep-base is the base call of --sweep-dim; give --sweep-dim too");
  if (!o.jsonl.empty())
    fail(ErrorKind::kConfig, "--jsonl is for gearbox run (compare runs several sessions)");
  if (!o.json.empty()) checkOutputPath("--json", o.json);
  if (!o.junit.empty()) checkOutputPath("--junit", o.junit);
  checkOutputsAreNotInputs({{"--json", o.json},
                            {"--junit", o.junit},
                            {"--timeline", c.visual.timeline},
                            {"--html", c.visual.html},
                            {"--log", o.logFile}},
                           inputPaths(o));
  // Modes that need gears join the comparison whenever gears are given.
  if (!o.gears.empty() || !o.padTo.empty()) {
    const std::vector<Mode> asked = parseModes(o.modes);
    for (const ModeInfo& m : modeTable())
      if (m.needsGears && std::find(asked.begin(), asked.end(), m.mode) == asked.end())
        o.modes += "," + std::string(m.name);
  }
}

// Loads the model and the trace, settles --gears suggest, the modes and the bounds.
void loadCompareInputs(CompareRun& c) {
  RunOptions& o = c.o;
  configureLogFromOptions(o, c.err);
  const Graph& g = c.graph.emplace(loadGraph(o.model));
  if (o.sweepDim.empty()) {
    c.trace = loadTrace(o.trace, g, &c.lines);
    c.traceName = o.trace;
  } else {
    c.sweep = parseSizeSweep(g, o.sweepDim, o.sweepBase);
    c.trace = c.sweep->trace;
    c.traceName = "--sweep-dim " + o.sweepDim;
    // The curve needs every call's record.
    if (o.historyLimit > 0 && o.historyLimit < c.trace.size())
      fail(ErrorKind::kConfig,
           "--history-limit {} keeps fewer records than the {} sizes of --sweep-dim '{}'",
           o.historyLimit, c.trace.size(), o.sweepDim);
  }
  // --gears suggest: the gears suggest-gears would choose for this trace and profile.
  if (o.gears == "suggest") {
    SuggestOptions so;
    so.references = false;
    so.runPasses = !o.noPasses;
    so.disabledPasses = o.disablePasses;
    so.merge = parseMergePolicy(o.merge);
    // The gears for the run's own fallback; error (the default) pads: a suggestion whose every
    // size is a gear would be static mode's compiles.
    if (o.gearFallback == "error") o.gearFallback = "pad";
    so.fallback = parseGearFallback(o.gearFallback);
    const GearSuggestion sug =
        suggestGears(g, c.trace, toSessionOptions(o, Mode::kStatic).cost, so);
    o.gears = sug.gearsJson;
    o.gearFallback = gearFallbackName(sug.runFallback);  // error when padding is refused
    if (c.verbosity != Verbosity::kQuiet) c.out << "suggested gears: " << o.gears << "\n";
  }
  c.modes = parseModes(o.modes);
  for (Mode m : c.modes) c.modeNames.push_back(modeName(m));
  c.asserts = parseAsserts(o.asserts, c.modeNames);
  // Option errors (bad profile, missing gears) are the user's: report them before running.
  for (Mode m : c.modes) toSessionOptions(o, m);
}

// The report of one mode's session (its first repeat), as the compare report holds it.
nlohmann::ordered_json modeReport(const CompareRun& c, const Session& session, const ModeResult& r,
                                  int64_t warningsBefore) {
  auto report = reportJson(session, c.o.model, c.traceName, {&c.o, r.tracker.get(), c.detail});
  report["warnings"] = totalWarnings() - warningsBefore;
  report.erase("warning_messages");  // the compare report lists them once
  return report;
}

// Runs one mode --repeat times over the trace, each time in a fresh session.
ModeResult runMode(CompareRun& c, Mode m) {
  const RunOptions& o = c.o;
  RunOptions quiet = o;
  quiet.quiet = true;
  // Per-iteration lines of the first repeat: every call with -v, the compiles with their
  // guard failures with --explain, none by default (the summary below groups them).
  const Verbosity lineLevel = c.verbosity == Verbosity::kVerbose ? Verbosity::kVerbose
                              : o.explain                        ? Verbosity::kDefault
                                                                 : Verbosity::kQuiet;
  ModeResult r;
  r.mode = m;
  std::vector<std::vector<Tensor>> out;
  // The warning log is the process's; this mode's count is what its first run added.
  int64_t warningsBefore = 0;
  for (int rep = 0; rep < o.repeat && r.ok(); ++rep) {
    SessionOptions sessionOptions = toSessionOptions(o, m);
    // The timeline shows the first repeat of every mode (the others only add samples).
    if (rep == 0) c.visual.attach(sessionOptions, modeName(m));
    Session session(*c.graph, std::move(sessionOptions));
    if (rep == 0 && o.checkReference) r.check.emplace(*c.graph, o.tolerance());
    RunTracker scratch(session.graph(), Verbosity::kQuiet, false);
    if (rep == 0) {
      warningsBefore = totalWarnings();
      r.tracker = std::make_unique<RunTracker>(session.graph(), lineLevel, o.explain);
      if (lineLevel != Verbosity::kQuiet) c.out << fmt::format("== {} ==\n", modeName(m));
    }
    // --html and --sweep-dim: every call's measured seconds, and the first repeat's records.
    auto keepCalls = [&] {
      if (c.visual.html.empty() && !c.sweep) return;
      std::vector<double> perCall;
      for (const CallRecord& call : session.history())
        perCall.push_back(call.compileSeconds + call.runSeconds);
      r.html.callSeconds.push_back(std::move(perCall));
      if (rep == 0) {
        r.html.stats = session.stats();
        r.html.history = session.history();
        r.html.historyDropped = session.historyDropped();
      }
    };
    try {
      // Outputs are compared only when kernels run: model only, the calls take the dataless
      // inputs (run_trace.cpp), not a fresh random fill of every input per call.
      auto got = runTrace(session, c.trace, quiet, c.out, rep == 0 && !o.modelOnly,
                          rep == 0 && r.check ? &*r.check : nullptr,
                          rep == 0 ? r.tracker.get() : &scratch, &c.lines);
      if (rep == 0) out = std::move(got);
    } catch (const Error& e) {
      // Keep going with the other modes; this column says where and why, and the report
      // keeps the counters up to the failure, marked incomplete.
      // "failed at iteration 4 (trace:5): why" (runTrace put the mode first).
      const std::string prefix = fmt::format("{} mode, ", modeName(m));
      const std::string what = e.what();
      r.failure = "failed at " + (what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what);
      // A sweep's iteration is a size: name it.
      if (c.sweep && session.history().size() < c.sweep->sizes.size())
        r.failure += fmt::format(" (at {} = {})", c.sweep->label(),
                                 c.sweep->sizes[session.history().size()]);
      r.error = e;
      if (rep == 0 && c.sweep) keepCalls();  // the curve up to the failure
      if (rep == 0) {
        r.report = modeReport(c, session, r, warningsBefore);
        r.report["complete"] = false;
        r.report["error"] = {{"kind", errorKindName(e.kind())}, {"message", e.what()}};
      }
      break;
    }
    // Every call's, also under --history-limit (history() then holds only the last ones).
    const double run = session.stats().runSeconds;
    r.compile.push_back(session.stats().compileSeconds);
    r.run.push_back(run);
    r.total.push_back(run + session.stats().compileSeconds);
    keepCalls();
    if (rep == 0) {
      r.report = modeReport(c, session, r, warningsBefore);
      r.modeled = session.stats().modeled;
      r.calls = static_cast<double>(session.stats().iterations);
      r.modeledLastCallUs =
          session.history().empty() ? 0.0 : session.history().back().modeledDeviceUs;
    }
  }
  r.compileS = spreadOf(r.compile);
  r.runS = spreadOf(r.run);
  r.totalS = spreadOf(r.total);
  if (r.ok()) c.outputs.push_back(std::move(out));
  return r;
}

// The terminal output: the header, the table, the recompiles, the agreement of the outputs
// (with each other, and with the reference executor under --check-reference), the verdicts.
void printComparison(CompareRun& c) {
  const RunOptions& o = c.o;
  c.out << fmt::format(
      "{} over {} ({} iterations), device {}, profile {} (MODELED figures), measured {} "
      "time(s) per mode{}\n",
      o.model, c.traceName, c.trace.size(), o.device, c.profile.name, o.repeat,
      o.modelOnly ? " (model only: kernels NOT executed)" : "");
  c.out << fmt::format(
      "oneTBB arena start-up (measured once before timing, not in any mode's figures): {}\n\n",
      formatSeconds(c.tbbStartup));
  printCompareTable(c.results, o.repeat, c.out);
  for (const ModeResult& r : c.results)
    if (!r.ok()) c.out << fmt::format("{}: {}\n", modeName(r.mode), r.failure);
  if (c.sweep) {
    c.out << "\n";
    printSizeSweepTable(*c.sweep, c.curves, o.modelOnly, o.repeat, c.out);
  }
  if (c.verbosity != Verbosity::kQuiet) {
    c.out << "\nrecompiles by mode (first run of each):\n";
    for (const ModeResult& r : c.results) {
      std::ostringstream sum;
      if (r.tracker) r.tracker->printSummary(sum, "    ", false);
      c.out << fmt::format("  {}:\n{}", modeName(r.mode),
                           sum.str().empty() ? "    no compiles\n" : sum.str());
    }
  }
  for (size_t i = 1; i < c.outputs.size(); ++i)
    c.diff = std::max(c.diff, maxDiff(c.outputs[0], c.outputs[i]));
  if (o.modelOnly)
    c.out << "\noutputs not compared: model only\n";
  else
    c.out << fmt::format("\noutputs agree across modes: {} (max abs difference {:.3g})\n",
                         c.diff <= 1e-4 ? "yes" : "NO", c.diff);
  if (o.checkReference && !o.modelOnly) {
    bool all = true;
    for (const ModeResult& r : c.results) all = all && r.ok() && r.check->ok();
    c.out << fmt::format(
        "outputs agree with the reference executor (|out - ref| <= {} + {} * |ref|): {}\n", o.atol,
        o.rtol, all ? "yes, every mode" : "NO");
    for (const ModeResult& r : c.results) {
      if (!r.ok()) continue;  // its column already says why it stopped
      c.out << fmt::format("  {}:\n", modeName(r.mode));
      r.check->print(c.out, "    ");
      for (const std::string& f : r.check->failures())
        c.failures.push_back(fmt::format("{} mode: {}", modeName(r.mode), f));
    }
  }
  c.out << measuredVerdict(c.results, o.repeat) << "\n" << modeledVerdict(c.results) << "\n";
}

// Every bound: a MODE.METRIC one against its mode, a plain one against every mode.
void evaluateCompareAsserts(CompareRun& c) {
  for (const Assertion& a : c.asserts) {
    for (const ModeResult& r : c.results) {
      if (!a.mode.empty() && a.mode != modeName(r.mode)) continue;
      if (!r.ok()) {
        c.checks.push_back({fmt::format("{}: {}", modeName(r.mode), a.text), false,
                            fmt::format("{} mode failed: {}", modeName(r.mode), r.failure)});
        continue;
      }
      c.checks.push_back(evaluateAssert(a, r.report, r.tracker.get(), modeName(r.mode)));
    }
  }
  for (const AssertResult& check : c.checks)
    if (!check.ok) c.failures.push_back(check.message);
}

// The --json report: the config, the shared figures and one run report per mode.
nlohmann::ordered_json compareReport(const CompareRun& c) {
  const RunOptions& o = c.o;
  nlohmann::ordered_json j;
  j["schema_version"] = kReportSchemaVersion;
  j["tool"] = toolJson();
  j["command"] = "compare";
  bool complete = true;
  for (const ModeResult& r : c.results) complete = complete && r.ok();
  j["complete"] = complete;
  j["model"] = o.model;
  j["trace"] = c.traceName;
  {
    nlohmann::ordered_json config = configJson(toSessionOptions(o, c.modes.front()), &o);
    config.erase("mode");
    config.erase("gears");
    config["modes"] = c.modeNames;
    config["repeat"] = o.repeat;
    config["gears"] = o.gears.empty() ? nlohmann::ordered_json(nullptr)
                                      : nlohmann::ordered_json(gearsText(o.gears));
    j["config"] = std::move(config);
  }
  j["device_profile"] = c.profile.name;
  j["repeat"] = o.repeat;
  j["measured_tbb_startup_seconds"] = c.tbbStartup;
  j["max_abs_output_difference"] = c.diff;
  auto& wm = j["warning_messages"] = nlohmann::ordered_json::array();
  for (const WarningLog::Entry& w : warningLog().entries())
    wm.push_back({{"message", w.message}, {"count", w.count}});
  if (c.sweep) j["sweep"] = sizeSweepJson(*c.sweep, c.curves, o.modelOnly);
  for (const ModeResult& r : c.results) {
    auto& mj = j["modes"][modeName(r.mode)];
    mj = r.report;
    if (!r.ok()) {
      mj["failure"] = r.failure;
      continue;
    }
    if (r.check) mj["reference_check"] = r.check->json();
    for (auto [key, s] : {std::pair{"compile", &r.compileS}, std::pair{"run", &r.runS},
                          std::pair{"total", &r.totalS}}) {
      mj["measured_repeat"][key] = {
          {"median_seconds", s->median}, {"min_seconds", s->min}, {"max_seconds", s->max}};
    }
  }
  return j;
}

void writeCompareHtml(CompareRun& c) {
  const RunOptions& o = c.o;
  HtmlReport page;
  page.model = o.model;
  page.trace = c.traceName;
  page.device = o.device;
  page.profile = c.profile.name;
  page.repeat = o.repeat;
  page.iterations = static_cast<int64_t>(c.trace.size());
  page.modelOnly = o.modelOnly;
  for (ModeResult& r : c.results) {
    HtmlModeData& d = r.html;
    d.mode = modeName(r.mode);
    d.failure = r.failure;
    d.compile = {r.compileS.median, r.compileS.min, r.compileS.max};
    d.run = {r.runS.median, r.runS.min, r.runS.max};
    d.total = {r.totalS.median, r.totalS.min, r.totalS.max};
    page.modes.push_back(std::move(d));
  }
  page.verdicts = {measuredVerdict(c.results, o.repeat), modeledVerdict(c.results)};
  if (c.sweep) {
    page.sweep = &*c.sweep;
    page.sweepCurves = c.curves;
  }
  writeHtmlReport(c.visual.html, page);
  c.out << fmt::format("html report: {}\n", c.visual.html);
}

// The exit code: disagreeing modes are an error (2), a failed mode 1 or 2, a broken bound 1.
void finishCompare(CompareRun& c) {
  if (!c.o.modelOnly && c.diff > 1e-4)
    fail(ErrorKind::kShape, "modes disagree: max abs difference {}", c.diff);
  for (const ModeResult& r : c.results)
    if (!r.ok()) {
      // The recompile limit under `error` is a policy failing (1); anything else is input
      // the mode could not take (2).
      const int code = r.error && r.error->kind() == ErrorKind::kLimit ? 1 : 2;
      c.status = std::max(c.status, code);
    }
  for (const std::string& f : c.failures) c.err << "gearbox: " << f << "\n";
  if (!c.failures.empty() && c.status == 0) c.status = 1;
  if (c.verbosity != Verbosity::kQuiet && !warningLog().entries().empty()) {
    // Warnings were printed once each as they came; their repeats are counted here.
    for (const WarningLog::Entry& w : warningLog().entries())
      if (w.count > 1) c.out << fmt::format("warning repeated {} times: {}\n", w.count, w.message);
  }
}

}  // namespace

CommandResult compareCommand(RunOptions& o, std::ostream& out, std::ostream& err) {
  CompareRun c(o, out, err);
  checkCompareOptions(c);
  const ProcessThreadCap threadCap(o.threads);
  loadCompareInputs(c);
  c.tbbStartup = warmTbbArena();
  for (Mode m : c.modes) c.results.push_back(runMode(c, m));
  if (c.sweep)
    for (const ModeResult& r : c.results)
      c.curves.push_back(
          sweepCurve(*c.sweep, modeName(r.mode), r.failure, r.html.history, r.html.callSeconds));
  c.profile = toSessionOptions(o, c.modes.front()).cost;
  printComparison(c);
  CommandResult result;
  result.report = compareReport(c);
  evaluateCompareAsserts(c);
  if (!o.json.empty()) writeJsonFile(o.json, result.report);
  if (!o.junit.empty()) writeJunit(o.junit, "gearbox compare", c.checks);
  c.visual.writeTimeline(out);
  if (!c.visual.html.empty()) writeCompareHtml(c);
  finishCompare(c);
  result.exitStatus = c.status;
  return result;
}

}  // namespace gearbox::cli
