// gearbox compare MODEL --trace TRACE [--modes M1,M2,...] [--repeat N] [--json F]
//                 [--check-reference]
//
// Runs every mode over the same trace and the same data, checks that they return the same
// outputs, and prints one side-by-side table of counters, measured host times (median and
// spread over --repeat fresh sessions) and the MODELED device time with its breakdown, then
// which mode is fastest and why. A measured verdict is given only when the winner beats the
// runner-up by more than the spread. A mode that fails keeps its column, saying why. With
// --check-reference every mode is also checked against the reference executor (a bug shared by
// every mode would pass the agreement check alone).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>
#include <sstream>

#include "driver/compare.h"
#include "driver/gear_suggest.h"
#include "driver/html_report.h"
#include "driver/run_report.h"
#include "driver/trace.h"
#include "graph/error.h"
#include "graph/text.h"
#include "tools/commands.h"
#include "tools/run_options.h"
#include "tools/visual_options.h"

namespace gearbox::cli {

void registerCompare(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  // The default set: every mode that runs without gear specs, in table order.
  auto modes = std::make_shared<std::string>(joinModeNames(ModeSet::kWithoutGears, ",", ","));
  auto repeat = std::make_shared<int>(5);
  auto visual = std::make_shared<VisualOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "Run every mode over the same trace and data and compare them side by side");
  addCommonOptions(cmd, *o);
  cmd->add_option("--modes", *modes,
                  "Comma-separated modes (default " + *modes +
                      ", plus the modes that need gears when --gears is given)");
  cmd->add_option("--repeat", *repeat,
                  "Fresh sessions per mode for the measured figures (median and spread; "
                  "default 5). Modeled figures are exact and run once")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--json", o->json, "Write every mode's report as JSON (atomically)");
  cmd->add_option("--assert", o->asserts,
                  "Bound on a metric of every mode ('graph_compiles<=5') or of one mode "
                  "('static.graph_compiles<=5'); exit 1 when broken");
  addTimelineOptions(cmd, *visual);
  addHtmlOption(cmd, *visual);
  cmd->callback([o, modes, repeat, visual] {
    visual->prepare();
    // Options, bounds and output paths are checked before anything runs.
    const Verbosity verbosity = verbosityOf(*o);
    const IterationDetail detail = parseIterationDetail(o->iterations);
    if (!o->jsonl.empty())
      fail(ErrorKind::kConfig, "--jsonl is for gearbox run (compare runs several sessions)");
    if (!o->json.empty()) checkOutputPath("--json", o->json);
    if (!o->junit.empty()) checkOutputPath("--junit", o->junit);
    checkOutputsAreNotInputs({{"--json", o->json},
                              {"--junit", o->junit},
                              {"--timeline", visual->timeline},
                              {"--html", visual->html},
                              {"--log", o->logFile}},
                             inputPaths(*o));
    // Modes that need gears join the comparison whenever gears are given.
    if (!o->gears.empty() || !o->padTo.empty()) {
      const std::vector<Mode> asked = parseModes(*modes);
      for (const ModeInfo& m : modeTable())
        if (m.needsGears && std::find(asked.begin(), asked.end(), m.mode) == asked.end())
          *modes += "," + std::string(m.name);
    }
    configureLogFromOptions(*o);
    const Graph g = loadGraph(o->model);
    std::vector<int> lines;
    const auto trace = loadTrace(o->trace, g, &lines);
    // --gears suggest: the gears suggest-gears would choose for this trace and profile.
    if (o->gears == "suggest") {
      SuggestOptions so;
      so.references = false;
      so.runPasses = !o->noPasses;
      so.merge = parseMergePolicy(o->merge);
      o->gears = suggestGears(g, trace, toSessionOptions(*o, Mode::kStatic).cost, so).gearsJson;
      if (verbosity != Verbosity::kQuiet) std::cout << "suggested gears: " << o->gears << "\n";
      if (o->gearFallback == "error") o->gearFallback = "pad";  // the suggestion pads by design
    }
    const std::vector<Mode> modeList = parseModes(*modes);
    std::vector<std::string> modeNameList;
    for (Mode m : modeList) modeNameList.push_back(modeName(m));
    const std::vector<Assertion> asserts = parseAsserts(o->asserts, modeNameList);
    // Option errors (bad profile, missing gears) are the user's: report them before running.
    for (Mode m : modeList) toSessionOptions(*o, m);
    const double tbbStartup = warmTbbArena();
    std::vector<ModeResult> results;
    std::vector<std::vector<std::vector<Tensor>>> outputs;
    RunOptions quiet = *o;
    quiet.quiet = true;
    // Per-iteration lines of the first repeat: every call with -v, the compiles with their
    // guard failures with --explain, none by default (the summary below groups them).
    const Verbosity lineLevel = verbosity == Verbosity::kVerbose ? Verbosity::kVerbose
                                : o->explain                     ? Verbosity::kDefault
                                                                 : Verbosity::kQuiet;
    for (Mode m : modeList) {
      ModeResult r;
      r.mode = m;
      std::vector<std::vector<Tensor>> out;
      // The warning log is the process's; this mode's count is what its first run added.
      int64_t warningsBefore = 0;
      for (int rep = 0; rep < *repeat && r.ok(); ++rep) {
        SessionOptions sessionOptions = toSessionOptions(*o, m);
        // The timeline shows the first repeat of every mode (the others only add samples).
        if (rep == 0) visual->attach(sessionOptions, modeName(m));
        Session session(g, std::move(sessionOptions));
        if (rep == 0 && o->checkReference) r.check.emplace(g, o->tolerance);
        RunTracker scratch(session.graph(), Verbosity::kQuiet, false);
        if (rep == 0) {
          warningsBefore = totalWarnings();
          r.tracker = std::make_unique<RunTracker>(session.graph(), lineLevel, o->explain);
          if (lineLevel != Verbosity::kQuiet) std::cout << fmt::format("== {} ==\n", modeName(m));
        }
        try {
          auto got = runTrace(session, trace, quiet, std::cout, rep == 0,
                              rep == 0 && r.check ? &*r.check : nullptr,
                              rep == 0 ? r.tracker.get() : &scratch, &lines);
          if (rep == 0) out = std::move(got);
        } catch (const Error& e) {
          // Keep going with the other modes; this column says where and why, and the report
          // keeps the counters up to the failure, marked incomplete.
          // "failed at iteration 4 (trace:5): why" (runTrace put the mode first).
          const std::string prefix = fmt::format("{} mode, ", modeName(m));
          const std::string what = e.what();
          r.failure =
              "failed at " + (what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what);
          r.error = e;
          if (rep == 0) {
            r.report = reportJson(session, o->model, o->trace, {o.get(), r.tracker.get(), detail});
            r.report["warnings"] = totalWarnings() - warningsBefore;
            r.report.erase("warning_messages");  // the compare report lists them once
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
        if (!visual->html.empty()) {
          std::vector<double> perCall;
          for (const CallRecord& c : session.history())
            perCall.push_back(c.compileSeconds + c.runSeconds);
          r.html.callSeconds.push_back(std::move(perCall));
          if (rep == 0) {
            r.html.stats = session.stats();
            r.html.history = session.history();
            r.html.historyDropped = session.historyDropped();
          }
        }
        if (rep == 0) {
          r.report = reportJson(session, o->model, o->trace, {o.get(), r.tracker.get(), detail});
          r.report["warnings"] = totalWarnings() - warningsBefore;
          r.report.erase("warning_messages");  // the compare report lists them once
          r.modeled = session.stats().modeled;
          r.calls = static_cast<double>(session.stats().iterations);
          r.modeledLastCallUs =
              session.history().empty() ? 0.0 : session.history().back().modeledDeviceUs;
        }
      }
      r.compileS = spreadOf(r.compile);
      r.runS = spreadOf(r.run);
      r.totalS = spreadOf(r.total);
      if (r.ok()) outputs.push_back(std::move(out));
      results.push_back(std::move(r));
    }
    const CostModel profile = toSessionOptions(*o, modeList.front()).cost;
    std::cout << fmt::format(
        "{} over {} ({} iterations), device {}, profile {} (MODELED figures), measured {} "
        "time(s) per mode{}\n",
        o->model, o->trace, trace.size(), o->device, profile.name, *repeat,
        o->modelOnly ? " (model only: kernels NOT executed)" : "");
    std::cout << fmt::format(
        "oneTBB arena start-up (measured once before timing, not in any mode's figures): {}\n\n",
        formatSeconds(tbbStartup));
    printCompareTable(results, *repeat, std::cout);
    for (const ModeResult& r : results)
      if (!r.ok()) std::cout << fmt::format("{}: {}\n", modeName(r.mode), r.failure);
    if (verbosity != Verbosity::kQuiet) {
      std::cout << "\nrecompiles by mode (first run of each):\n";
      for (const ModeResult& r : results) {
        std::ostringstream sum;
        if (r.tracker) r.tracker->printSummary(sum, "    ", false);
        std::cout << fmt::format("  {}:\n{}", modeName(r.mode),
                                 sum.str().empty() ? "    no compiles\n" : sum.str());
      }
    }
    double diff = 0;
    for (size_t i = 1; i < outputs.size(); ++i)
      diff = std::max(diff, maxDiff(outputs[0], outputs[i]));
    if (o->modelOnly)
      std::cout << "\noutputs not compared: model only\n";
    else
      std::cout << fmt::format("\noutputs agree across modes: {} (max abs difference {:.3g})\n",
                               diff <= 1e-4 ? "yes" : "NO", diff);
    std::vector<std::string> failures;
    if (o->checkReference && !o->modelOnly) {
      bool all = true;
      for (const ModeResult& r : results) all = all && r.ok() && r.check->ok();
      std::cout << fmt::format(
          "outputs agree with the reference executor (|out - ref| <= {} + {} * |ref|): {}\n",
          o->tolerance.atol, o->tolerance.rtol, all ? "yes, every mode" : "NO");
      for (const ModeResult& r : results) {
        if (!r.ok()) continue;  // its column already says why it stopped
        std::cout << fmt::format("  {}:\n", modeName(r.mode));
        r.check->print(std::cout, "    ");
        for (const std::string& f : r.check->failures())
          failures.push_back(fmt::format("{} mode: {}", modeName(r.mode), f));
      }
    }
    std::cout << measuredVerdict(results, *repeat) << "\n" << modeledVerdict(results) << "\n";
    nlohmann::ordered_json j;
    j["schema_version"] = kReportSchemaVersion;
    j["tool"] = toolJson();
    j["command"] = "compare";
    bool complete = true;
    for (const ModeResult& r : results) complete = complete && r.ok();
    j["complete"] = complete;
    j["model"] = o->model;
    j["trace"] = o->trace;
    {
      nlohmann::ordered_json c = configJson(toSessionOptions(*o, modeList.front()), o.get());
      c.erase("mode");
      c.erase("gears");
      c["modes"] = modeNameList;
      c["repeat"] = *repeat;
      c["gears"] = o->gears.empty() ? nlohmann::ordered_json(nullptr)
                                    : nlohmann::ordered_json(gearsText(o->gears));
      j["config"] = std::move(c);
    }
    j["device_profile"] = profile.name;
    j["repeat"] = *repeat;
    j["measured_tbb_startup_seconds"] = tbbStartup;
    j["max_abs_output_difference"] = diff;
    auto& wm = j["warning_messages"] = nlohmann::ordered_json::array();
    for (const WarningLog::Entry& w : warningLog().entries())
      wm.push_back({{"message", w.message}, {"count", w.count}});
    for (const ModeResult& r : results) {
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
    // Every bound: a MODE.METRIC one against its mode, a plain one against every mode.
    std::vector<AssertResult> checks;
    for (const Assertion& a : asserts) {
      for (const ModeResult& r : results) {
        if (!a.mode.empty() && a.mode != modeName(r.mode)) continue;
        if (!r.ok()) {
          checks.push_back({fmt::format("{}: {}", modeName(r.mode), a.text), false,
                            fmt::format("{} mode failed: {}", modeName(r.mode), r.failure)});
          continue;
        }
        checks.push_back(evaluateAssert(a, r.report, r.tracker.get(), modeName(r.mode)));
      }
    }
    for (const AssertResult& c : checks)
      if (!c.ok) failures.push_back(c.message);
    if (!o->json.empty()) writeJsonFile(o->json, j);
    if (!o->junit.empty()) writeJunit(o->junit, "gearbox compare", checks);
    visual->writeTimeline(std::cout);
    if (!visual->html.empty()) {
      HtmlReport page;
      page.model = o->model;
      page.trace = o->trace;
      page.device = o->device;
      page.profile = profile.name;
      page.repeat = *repeat;
      page.iterations = static_cast<int64_t>(trace.size());
      page.modelOnly = o->modelOnly;
      for (ModeResult& r : results) {
        HtmlModeData& d = r.html;
        d.mode = modeName(r.mode);
        d.failure = r.failure;
        d.compile = {r.compileS.median, r.compileS.min, r.compileS.max};
        d.run = {r.runS.median, r.runS.min, r.runS.max};
        d.total = {r.totalS.median, r.totalS.min, r.totalS.max};
        page.modes.push_back(std::move(d));
      }
      page.verdicts = {measuredVerdict(results, *repeat), modeledVerdict(results)};
      writeHtmlReport(visual->html, page);
      std::cout << fmt::format("html report: {}\n", visual->html);
    }
    if (!o->modelOnly && diff > 1e-4)
      fail(ErrorKind::kShape, "modes disagree: max abs difference {}", diff);
    for (const ModeResult& r : results)
      if (!r.ok()) {
        // The recompile limit under `error` is a policy failing (1); anything else is input
        // the mode could not take (2).
        const int code = r.error && r.error->kind() == ErrorKind::kLimit ? 1 : 2;
        gExitCode = std::max(gExitCode, code);
      }
    for (const std::string& f : failures) std::cerr << "gearbox: " << f << "\n";
    if (!failures.empty() && gExitCode == 0) gExitCode = 1;
    if (verbosity != Verbosity::kQuiet && !warningLog().entries().empty()) {
      // Warnings were printed once each as they came; their repeats are counted here.
      for (const WarningLog::Entry& w : warningLog().entries())
        if (w.count > 1)
          std::cout << fmt::format("warning repeated {} times: {}\n", w.count, w.message);
    }
  });
}

}  // namespace gearbox::cli
