// gearbox run MODEL --trace TRACE.jsonl --mode MODE [--json F] [--check-reference]
#include <fmt/format.h>

#include <iostream>
#include <optional>

#include "compiler/compile_log.h"
#include "graph/error.h"
#include "graph/text.h"
#include "tools/commands.h"
#include "tools/run_options.h"
#include "tools/trace.h"
#include "tools/visual_options.h"

namespace gearbox::cli {

namespace {

// One line per iteration: what ran, what compiled and why.
void printIteration(const CallRecord& r, bool explain, std::ostream& os) {
  std::string what;
  if (r.fallback) {
    what = fmt::format("recompile limit hit: ran through the dynamic path ({})", r.reason);
  } else if (r.graphCompiled) {
    what = fmt::format("compiled plan #{} ({})", r.planId, r.reason);
  } else if (r.gear >= 0) {
    what = r.padded ? fmt::format("padded {} -> {} elements, ran gear {} (plan #{})",
                                  r.realElements, r.paddedElements, r.gear, r.planId)
                    : fmt::format("gear {} (plan #{})", r.gear, r.planId);
  } else if (r.planId) {
    what = fmt::format("plan #{} (cache hit)", r.planId);
  } else {
    what = "eager";
  }
  os << fmt::format("iter {:>3}  {}  {}", r.iteration, r.signature, what);
  if (!r.kernelsCompiled.empty())
    os << fmt::format("; kernels compiled: {}", fmt::join(r.kernelsCompiled, ", "));
  os << "\n";
  if (explain && r.guardFailures.size() > 0) {
    os << "          triggered by the following guard failure(s):\n";
    for (const std::string& g : r.guardFailures) os << "          - " << g << "\n";
  }
}

}  // namespace

std::vector<std::vector<Tensor>> runTrace(Session& session,
                                          const std::vector<InputSignature>& trace,
                                          const RunOptions& o, std::ostream& os, bool keepOutputs,
                                          ReferenceCheck* check) {
  std::vector<std::vector<Tensor>> outputs;
  // The mode's up-front work (geared: every gear compiled before the first call; non-geared
  // dynamic dims take the first iteration's sizes).
  session.prepare(trace.front());
  if (modeInfo(session.options().mode).needsGears) {
    if (!o.quiet) {
      os << fmt::format("compiled {} gears up front ({} kernels):\n", session.stats().gears,
                        session.stats().kernelCompiles);
      for (const std::string& line : session.gearOptionLines()) os << "  " << line << "\n";
    }
  }
  for (size_t i = 0; i < trace.size(); ++i) {
    if (o.iterMarkers) compileLogger()->info("To compile op|=====iter{}", i);
    auto inputs = makeInputs(session.graph(), trace[i], o.seed + i);
    auto out = session.run(inputs);
    if (check) check->check(inputs, out);
    if (keepOutputs) outputs.push_back(std::move(out));
    if (!o.quiet) printIteration(session.history().back(), o.explain, os);
  }
  return outputs;
}

void registerRun(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto visual = std::make_shared<VisualOptions>();
  CLI::App* cmd = app.add_subcommand("run",
                                     "Run a model over a trace in one mode and report "
                                     "compiles, cache hits, launches and times");
  addCommonOptions(cmd, *o);
  cmd->add_option("--mode", o->mode, joinModeNames(ModeSet::kAll))
      ->check(CLI::IsMember(modeNames(ModeSet::kAll)))
      ->capture_default_str();
  cmd->add_option("--json", o->json, "Write the report as JSON (atomically)");
  cmd->add_option("--assert", o->asserts,
                  "Bound on a report metric, e.g. 'graph_compiles<=3' (exit 1 when broken)");
  addTimelineOptions(cmd, *visual);
  cmd->callback([o, visual] {
    visual->prepare();
    configureLogFromOptions(*o);
    Graph g = loadGraph(o->model);
    const auto trace = loadTrace(o->trace, g);
    std::optional<ReferenceCheck> check;
    if (o->checkReference) check.emplace(g, o->tolerance);
    SessionOptions sessionOptions = toSessionOptions(*o, *parseMode(o->mode));
    visual->attach(sessionOptions, o->mode);
    Session session(std::move(g), std::move(sessionOptions));
    runTrace(session, trace, *o, std::cout, false, check ? &*check : nullptr);
    printSummary(session, std::cout);
    auto report = reportJson(session, o->model, o->trace);
    auto failures = checkAsserts(report, o->asserts);
    if (check) {
      std::cout << fmt::format(
          "reference check over {} calls (|out - ref| <= {} + {} * |ref|): {}\n", check->calls(),
          o->tolerance.atol, o->tolerance.rtol, check->ok() ? "agrees" : "DISAGREES");
      check->print(std::cout);
      report["reference_check"] = check->json();
      for (const std::string& f : check->failures()) failures.push_back(f);
    }
    if (!o->json.empty()) writeJsonFile(o->json, report);
    visual->writeTimeline(std::cout);
    for (const std::string& f : failures) std::cerr << "gearbox: " << f << "\n";
    if (!failures.empty()) gExitCode = 1;
  });
}

}  // namespace gearbox::cli
