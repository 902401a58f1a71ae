// gearbox run MODEL --trace TRACE.jsonl --mode MODE [--json F] [--jsonl F] [--junit F]
//             [-q|-v] [--assert BOUND] [--check-reference]
// Exit codes (docs/cli.md): 0 ok, 1 an --assert or a policy (recompile limit `error`) failed,
// 2 bad input (options, model, trace, shapes).
#include "driver/run_command.h"

#include <fmt/format.h>

#include <optional>

#include "driver/run_report.h"
#include "driver/trace.h"
#include "driver/visual_options.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "graph/text.h"

namespace gearbox::cli {

namespace {
// The calls `run` keeps in the session when --history-limit is not given: the tracker observes
// each call as it is made, so only the newest is read back.
constexpr size_t kRunHistoryWindow = 256;

// Everything that can be checked before the run is checked first, so a typo fails at once
// (exit 2) and nothing is written.
void checkRunOptions(const RunOptions& o, VisualOptions& visual) {
  visual.prepare(o);
  // In the order the CLI has always checked them: with two mistakes, the same one is named.
  verbosityOf(o);
  parseIterationDetail(o.iterations);
  parseAsserts(o.asserts);
  const Mode mode = *parseMode(o.mode);
  if (!o.gears.empty() && !modeInfo(mode).needsGears)
    fail(ErrorKind::kConfig, "--gears is for --mode geared (the {} mode ignores gears)", o.mode);
  if (!o.padTo.empty() && !modeInfo(mode).needsGears)
    fail(ErrorKind::kConfig, "--pad-to is for --mode geared (the {} mode pads nothing)", o.mode);
  if (!o.json.empty()) checkOutputPath("--json", o.json);
  if (!o.junit.empty()) checkOutputPath("--junit", o.junit);
  if (!o.jsonl.empty()) checkOutputPath("--jsonl", o.jsonl);
  checkOutputsAreNotInputs({{"--json", o.json},
                            {"--junit", o.junit},
                            {"--jsonl", o.jsonl},
                            {"--timeline", visual.timeline},
                            {"--log", o.logFile}},
                           inputPaths(o));
}
}  // namespace

CommandResult runCommand(RunOptions& o, std::ostream& out, std::ostream& err) {
  VisualOptions visual;
  checkRunOptions(o, visual);
  const ProcessThreadCap threadCap(o.threads);
  const Verbosity verbosity = verbosityOf(o);
  const IterationDetail detail = parseIterationDetail(o.iterations);
  const std::vector<Assertion> asserts = parseAsserts(o.asserts);
  const Mode mode = *parseMode(o.mode);
  configureLogFromOptions(o, err);
  Graph g = loadGraph(o.model);
  // Every line is checked before the first call; the run then streams the file again, so
  // memory stays flat whatever the trace's length (docs/hardening.md, "Scale").
  checkTrace(o.trace, g);
  std::optional<ReferenceCheck> check;
  if (o.checkReference) check.emplace(g, o.tolerance());
  SessionOptions sessionOptions = toSessionOptions(o, mode);
  // Without --history-limit the session keeps a short window (the tracker sees every call
  // and streams the report's records), not every call.
  if (o.historyLimit == 0) sessionOptions.historyLimit = kRunHistoryWindow;
  visual.attach(sessionOptions, o.mode);
  Session session(std::move(g), std::move(sessionOptions));
  RunTracker tracker(session.graph(), verbosity, o.explain);
  if (!o.jsonl.empty()) tracker.streamTo(o.jsonl);
  if (!o.json.empty() && o.historyLimit == 0 && detail != IterationDetail::kNone)
    tracker.spoolIterations(detail);
  std::optional<Error> error;
  try {
    TraceReader reader(o.trace, session.graph());
    runTrace(
        session, [&](TraceEntry& e) { return reader.next(e); }, o, out, false,
        check ? &*check : nullptr, &tracker);
  } catch (const Error& e) {
    error = e;
  }
  // Nothing ran (the up-front work or the first call failed): no report of nothing, no file
  // written, just the error (exit 2).
  if (error && tracker.calls() == 0 && error->kind() != ErrorKind::kLimit) throw *error;
  printSummary(session, out, &tracker);
  tracker.printSummary(out);
  CommandResult result;
  auto& report = result.report = reportJson(session, o.model, o.trace, {&o, &tracker, detail});
  std::vector<AssertResult> results;
  if (error) {
    // The counters up to the failure are kept, marked incomplete.
    report["complete"] = false;
    report["error"] = {{"kind", errorKindName(error->kind())}, {"message", error->what()}};
    for (const Assertion& a : asserts)
      results.push_back({a.text, false, "not evaluated: the run stopped with an error"});
  } else {
    for (const Assertion& a : asserts) results.push_back(evaluateAssert(a, report, &tracker));
  }
  std::vector<std::string> failures;
  for (const AssertResult& r : results)
    if (!r.ok && !error) failures.push_back(r.message);
  if (check && !error) {
    out << fmt::format("reference check over {} calls (|out - ref| <= {} + {} * |ref|): {}\n",
                       check->calls(), o.atol, o.rtol, check->ok() ? "agrees" : "DISAGREES");
    check->print(out);
    report["reference_check"] = check->json();
    for (const std::string& f : check->failures()) failures.push_back(f);
    results.push_back({"reference_check", check->ok(),
                       check->ok() ? "" : fmt::format("{} failures", check->failures().size())});
  }
  if (!o.json.empty()) writeReportFile(o.json, report, &tracker);
  if (!o.junit.empty()) writeJunit(o.junit, fmt::format("gearbox run {}", o.mode), results);
  // The timeline is written on error too: it shows what ran up to the failure.
  visual.writeTimeline(out);
  if (error) {
    // Hitting the recompile limit under `error` is a policy failing (exit 1), not bad input.
    if (error->kind() != ErrorKind::kLimit) throw *error;
    err << "gearbox: " << errorKindName(error->kind()) << ": " << error->what() << "\n";
    result.exitStatus = 1;
    return result;
  }
  for (const std::string& f : failures) err << "gearbox: " << f << "\n";
  if (!failures.empty()) result.exitStatus = 1;
  return result;
}

}  // namespace gearbox::cli
