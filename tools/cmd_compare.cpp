// gearbox compare MODEL --trace TRACE [--modes M1,M2,...] [--json F] [--check-reference]
//
// Runs every mode over the same trace and the same data, checks that they return the same
// outputs, and prints one side-by-side table of counters, measured host times and modeled
// device time, then which mode is fastest on this trace and why. With --check-reference every
// mode is also checked against the reference executor (a bug shared by every mode would pass
// the agreement check alone).
#include <fmt/format.h>

#include <iostream>
#include <optional>
#include <sstream>

#include "graph/error.h"
#include "graph/text.h"
#include "tools/commands.h"
#include "tools/run_options.h"
#include "tools/trace.h"

namespace gearbox::cli {

namespace {

struct ModeResult {
  Mode mode;
  std::unique_ptr<Session> session;
  nlohmann::ordered_json report;
  double totalRunSeconds = 0;           // measured: sum over calls, compile excluded
  double totalSeconds = 0;              // measured: compile + run
  std::optional<ReferenceCheck> check;  // --check-reference
};

std::vector<Mode> parseModes(const std::string& list) {
  std::vector<Mode> modes;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto m = parseMode(item);
    if (!m)
      fail(ErrorKind::kConfig, "--modes: unknown mode '{}' ({})", item,
           joinModeNames(ModeSet::kAll, ", ", ", "));
    for (Mode seen : modes)
      if (seen == *m) fail(ErrorKind::kConfig, "--modes: '{}' given twice", item);
    modes.push_back(*m);
  }
  if (modes.empty()) fail(ErrorKind::kConfig, "--modes: no mode given");
  return modes;
}

// Largest elementwise difference between two modes' outputs over the whole trace.
double maxDiff(const std::vector<std::vector<Tensor>>& a,
               const std::vector<std::vector<Tensor>>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t k = 0; k < a[i].size(); ++k) m = std::max(m, maxAbsDiff(a[i][k], b[i][k]));
  return m;
}

void printTable(const std::vector<ModeResult>& results, std::ostream& os) {
  std::string header = fmt::format("{:<34}", "");
  for (const ModeResult& r : results) header += fmt::format("{:>14}", modeName(r.mode));
  os << header << "\n";
  auto row = [&](const std::string& label, auto&& cell) {
    std::string line = fmt::format("{:<34}", label);
    for (const ModeResult& r : results) line += fmt::format("{:>14}", cell(r));
    os << line << "\n";
  };
  auto count = [&](const char* key) {
    return [key](const ModeResult& r) { return r.report[key].dump(); };
  };
  row("graph compiles", count("graph_compiles"));
  row("kernel compiles", count("kernel_compiles"));
  row("plan cache hits", count("plan_cache_hits"));
  row("kernel cache hits", count("kernel_cache_hits"));
  row("launches", count("launches"));
  row("syncs", count("syncs"));
  row("allocations", count("allocations"));
  row("fallback runs", count("fallback_runs"));
  row("measured host compile time", [](const ModeResult& r) {
    return formatSeconds(r.report["measured_host_compile_seconds"].get<double>());
  });
  row("measured median run per call", [](const ModeResult& r) {
    return formatSeconds(r.report["measured_median_run_seconds"].get<double>());
  });
  row("measured total (compile + runs)",
      [](const ModeResult& r) { return formatSeconds(r.totalSeconds); });
  row("modeled device time", [](const ModeResult& r) {
    return fmt::format("{:.0f} us", r.report["modeled_device_us"].get<double>());
  });
}

// Explains the winner: for every other mode, whether it loses on compiles or on per-call
// cost, in the same units as the table.
std::string verdict(const std::vector<ModeResult>& results, bool modeled) {
  struct Cost {
    double compile, run, total;
  };
  auto cost = [&](const ModeResult& r) {
    if (modeled) {
      const double total = r.report["modeled_device_us"].get<double>();
      const double compile = r.report["modeled_compile_us"].get<double>();
      return Cost{compile, total - compile, total};
    }
    const double compile = r.report["measured_host_compile_seconds"].get<double>() * 1e6;
    return Cost{compile, r.totalRunSeconds * 1e6, r.totalSeconds * 1e6};
  };
  const ModeResult* best = &results[0];
  for (const ModeResult& r : results)
    if (cost(r).total < cost(*best).total) best = &r;
  const Cost b = cost(*best);
  const double calls = std::max<double>(1, best->report["iterations"].get<double>());
  std::string why;
  for (const ModeResult& r : results) {
    if (&r == best) continue;
    const Cost c = cost(r);
    std::string reason =
        c.compile - b.compile >= c.run - b.run
            ? fmt::format("{} loses on compiles ({:.0f} us vs {:.0f} us)", modeName(r.mode),
                          c.compile, b.compile)
            : fmt::format("{} loses on per-call cost ({:.1f} us vs {:.1f} us per call)",
                          modeName(r.mode), c.run / calls, b.run / calls);
    why += (why.empty() ? "" : "; ") + reason;
  }
  return fmt::format("{} {}: {:.0f} us = {:.0f} us compiling + {:.0f} us running{}{}",
                     modeled ? "fastest by MODELED device time:" : "fastest by measured host time:",
                     modeName(best->mode), b.total, b.compile, b.run, why.empty() ? "" : "\n  ",
                     why);
}

}  // namespace

void registerCompare(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  // The default set: every mode that runs without gear specs, in table order.
  auto modes = std::make_shared<std::string>(joinModeNames(ModeSet::kWithoutGears, ",", ","));
  CLI::App* cmd = app.add_subcommand(
      "compare", "Run every mode over the same trace and data and compare them side by side");
  addCommonOptions(cmd, *o);
  cmd->add_option("--modes", *modes,
                  "Comma-separated modes (default " + *modes +
                      ", plus the modes that need gears when --gears is given)");
  cmd->add_option("--json", o->json, "Write every mode's report as JSON (atomically)");
  cmd->callback([o, modes] {
    // Modes that need gears join the comparison whenever gears are given.
    if (!o->gears.empty()) {
      const std::vector<Mode> asked = parseModes(*modes);
      for (const ModeInfo& m : modeTable())
        if (m.needsGears && std::find(asked.begin(), asked.end(), m.mode) == asked.end())
          *modes += "," + std::string(m.name);
    }
    configureLogFromOptions(*o);
    const Graph g = loadGraph(o->model);
    const auto trace = loadTrace(o->trace, g);
    std::vector<ModeResult> results;
    std::vector<std::vector<std::vector<Tensor>>> outputs;
    RunOptions quiet = *o;
    quiet.quiet = true;
    for (Mode m : parseModes(*modes)) {
      ModeResult r;
      r.mode = m;
      r.session = std::make_unique<Session>(g, toSessionOptions(*o, m));
      if (o->checkReference) r.check.emplace(g, o->tolerance);
      outputs.push_back(
          runTrace(*r.session, trace, quiet, std::cout, true, r.check ? &*r.check : nullptr));
      r.report = reportJson(*r.session, o->model, o->trace);
      for (const CallRecord& c : r.session->history()) r.totalRunSeconds += c.runSeconds;
      r.totalSeconds = r.totalRunSeconds + r.session->stats().compileSeconds;
      results.push_back(std::move(r));
    }
    std::cout << fmt::format("{} over {} ({} iterations), device {}\n\n", o->model, o->trace,
                             trace.size(), o->device);
    printTable(results, std::cout);
    double diff = 0;
    for (size_t i = 1; i < outputs.size(); ++i)
      diff = std::max(diff, maxDiff(outputs[0], outputs[i]));
    std::cout << fmt::format("\noutputs agree across modes: {} (max abs difference {:.3g})\n",
                             diff <= 1e-4 ? "yes" : "NO", diff);
    std::vector<std::string> failures;
    if (o->checkReference) {
      bool all = true;
      for (const ModeResult& r : results) all = all && r.check->ok();
      std::cout << fmt::format(
          "outputs agree with the reference executor (|out - ref| <= {} + {} * |ref|): {}\n",
          o->tolerance.atol, o->tolerance.rtol, all ? "yes, every mode" : "NO");
      for (const ModeResult& r : results) {
        std::cout << fmt::format("  {}:\n", modeName(r.mode));
        r.check->print(std::cout, "    ");
        for (const std::string& f : r.check->failures())
          failures.push_back(fmt::format("{} mode: {}", modeName(r.mode), f));
      }
    }
    std::cout << verdict(results, false) << "\n" << verdict(results, true) << "\n";
    nlohmann::ordered_json j;
    j["model"] = o->model;
    j["trace"] = o->trace;
    j["max_abs_output_difference"] = diff;
    for (const ModeResult& r : results) {
      j["modes"][modeName(r.mode)] = r.report;
      if (r.check) j["modes"][modeName(r.mode)]["reference_check"] = r.check->json();
    }
    if (!o->json.empty()) writeJsonFile(o->json, j);
    if (diff > 1e-4) fail(ErrorKind::kShape, "modes disagree: max abs difference {}", diff);
    for (const std::string& f : failures) std::cerr << "gearbox: " << f << "\n";
    if (!failures.empty()) gExitCode = 1;
  });
}

}  // namespace gearbox::cli
