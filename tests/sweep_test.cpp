// gearbox sweep (driver/sweep.h, issue 25): exact counters per grid point, a point equal to
// `gearbox run --model-only` with its options, the same bytes twice, grid errors naming the
// axis and value, a failing point as a row, the accumulated recompile limit, gears=suggest,
// and the CLI's table and JSON against goldens (GEARBOX_UPDATE_GOLDEN=1 rewrites them).
#include "driver/sweep.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "driver/run_command.h"
#include "driver/trace.h"
#include "expect_error.h"
#include "graph/file_io.h"
#include "graph/text.h"
#include "temp_dir.h"

namespace gearbox {
namespace {

using cli::SweepOptions;
using testing_util::example;

// Expects fn to throw Error(kind) whose message holds `part`.
#define EXPECT_ERROR(fn, kind, part)                             \
  do {                                                           \
    const std::string message = testing_util::errorOf(fn, kind); \
    EXPECT_NE(message.find(part), std::string::npos) << message; \
  } while (0)

SweepOptions sweepOf(const std::string& model, const std::string& trace,
                     std::vector<std::string> grid) {
  SweepOptions o;
  o.run.model = example(model);
  o.run.trace = example(trace);
  o.grid = std::move(grid);
  return o;
}

cli::SweepResult runIt(const SweepOptions& o) {
  const Graph g = loadGraph(o.run.model);
  std::vector<int> lines;
  const auto trace = cli::loadTrace(o.run.trace, g, &lines);
  return cli::runSweep(o, g, trace, lines);
}

int64_t at(const cli::SweepPoint& p, const char* key) {
  return p.report.at(key).get<int64_t>();
}

// The acceptance case: recompile limit 1..64 over 20,000 calls of batch 1..64, static mode.
// The counters of every row follow from the trace alone: the first L distinct batch sizes
// compile, every later call of one of them hits its plan, every call of another size falls
// back (Dynamo's run-only mode).
TEST(Sweep, RecompileLimitRowsFollowFromTheTrace) {
  const SweepOptions o =
      sweepOf("mlp.gbx", "mlp_serving.trace.jsonl", {"recompile_limit=1,2,4,8,16,32,64"});
  const cli::SweepResult r = runIt(o);
  const Graph g = loadGraph(o.run.model);
  const auto trace = cli::loadTrace(o.run.trace, g);
  ASSERT_EQ(trace.size(), 20000u);
  ASSERT_EQ(r.points.size(), 7u);
  const int limits[] = {1, 2, 4, 8, 16, 32, 64};
  for (size_t i = 0; i < r.points.size(); ++i) {
    const cli::SweepPoint& p = r.points[i];
    ASSERT_TRUE(p.ok()) << p.error;
    EXPECT_EQ(p.values, std::vector<std::string>{std::to_string(limits[i])});
    std::set<int64_t> compiled;
    int64_t hits = 0, fallbacks = 0;
    for (const InputSignature& sig : trace) {
      const int64_t batch = sig[0][0];
      if (compiled.count(batch)) {
        ++hits;
      } else if (static_cast<int>(compiled.size()) < limits[i]) {
        compiled.insert(batch);
      } else {
        ++fallbacks;
      }
    }
    SCOPED_TRACE(limits[i]);
    EXPECT_EQ(at(p, "graph_compiles"), static_cast<int64_t>(compiled.size()));
    EXPECT_EQ(at(p, "fallback_runs"), fallbacks);
    EXPECT_EQ(at(p, "plan_cache_hits"), hits);
    EXPECT_EQ(at(p, "iterations"), 20000);
    // Each batch size's plan compiles 1 kernel (its two matmuls, each with its bias add as its
    // epilogue, share it: same op, same shapes); fallback calls compile none.
    EXPECT_EQ(at(p, "kernel_compiles"), static_cast<int64_t>(compiled.size()));
    EXPECT_GT(p.report.at("modeled").at("total_us").get<double>(), 0.0);
  }
  // The limit trades compiles for fallback calls: both move one way along the rows.
  for (size_t i = 1; i < r.points.size(); ++i) {
    EXPECT_GT(at(r.points[i], "graph_compiles"), at(r.points[i - 1], "graph_compiles"));
    EXPECT_LT(at(r.points[i], "fallback_runs"), at(r.points[i - 1], "fallback_runs"));
  }
  EXPECT_EQ(at(r.points.back(), "fallback_runs"), 0);  // 64 sizes, 64 plans
}

// A point is `gearbox run --model-only` with the point's options: the same counters and the
// same MODELED figures.
TEST(Sweep, APointIsTheRunOfItsOptions) {
  // Every mode that runs without gears (the mode table's list).
  SweepOptions o =
      sweepOf("seed001_add.gbx", "seed001_add.trace.jsonl",
              {"mode=" + joinModeNames(ModeSet::kWithoutGears, ",", ","), "recompile_limit=2"});
  const cli::SweepResult r = runIt(o);
  ASSERT_EQ(r.points.size(), modeNames(ModeSet::kWithoutGears).size());
  for (const cli::SweepPoint& p : r.points) {
    cli::RunOptions ro = o.run;
    ro.mode = p.values[0];
    ro.recompileLimit = 2;
    ro.modelOnly = true;
    ro.quiet = true;
    std::ostringstream out, err;
    const cli::CommandResult run = cli::runCommand(ro, out, err);
    for (const char* key : {"graph_compiles", "kernel_compiles", "fallback_runs", "plan_cache_hits",
                            "plan_cache_misses", "kernel_cache_hits", "kernel_cache_misses",
                            "launches", "syncs", "peak_bytes"})
      EXPECT_EQ(p.report.at(key), run.report.at(key)) << p.values[0] << " " << key;
    EXPECT_EQ(p.report.at("modeled"), run.report.at("modeled")) << p.values[0];
  }
}

TEST(Sweep, SameGridSameBytes) {
  const std::vector<std::string> modes = modeNames(ModeSet::kWithoutGears);
  const SweepOptions o =
      sweepOf("seed001_add.gbx", "seed001_add.trace.jsonl",
              {"recompile_limit=1,2,4", "mode=" + joinModeNames(ModeSet::kWithoutGears, ",", ",")});
  const cli::SweepResult a = runIt(o), b = runIt(o);
  EXPECT_EQ(cli::formatSweepTable(o, a), cli::formatSweepTable(o, b));
  EXPECT_EQ(cli::sweepJson(o, a).dump(), cli::sweepJson(o, b).dump());
  EXPECT_EQ(cli::renderSweepHtml(o, a), cli::renderSweepHtml(o, b));
  // Grid order: the first axis outermost.
  const size_t n = modes.size();
  ASSERT_EQ(a.points.size(), 3 * n);
  EXPECT_EQ(a.points[1].values, (std::vector<std::string>{"1", modes[1]}));
  EXPECT_EQ(a.points[n].values, (std::vector<std::string>{"2", modes[0]}));
  // No timings in a model-only report.
  EXPECT_EQ(cli::sweepJson(o, a).dump().find("seconds"), std::string::npos);
}

TEST(Sweep, GridErrorsNameTheAxisAndTheValue) {
  auto grid = [](std::vector<std::string> g) {
    return [g] { runIt(sweepOf("seed001_add.gbx", "seed001_add.trace.jsonl", g)); };
  };
  EXPECT_ERROR(grid({"recompile_limt=1,2"}), ErrorKind::kConfig, "--grid recompile_limt");
  EXPECT_ERROR(grid({"recompile_limit=1,abc"}), ErrorKind::kConfig, "recompile_limit=abc");
  EXPECT_ERROR(grid({"recompile_limit=0"}), ErrorKind::kConfig, "--grid recompile_limit=0");
  EXPECT_ERROR(grid({"mode=static,bogus"}), ErrorKind::kConfig, "'bogus'");
  EXPECT_ERROR(grid({"on-recompile-limit=sometimes"}), ErrorKind::kConfig, "sometimes");
  EXPECT_ERROR(grid({"model_only=true"}), ErrorKind::kConfig, "--measured");
  EXPECT_ERROR(grid({"json=a.json"}), ErrorKind::kConfig, "not an option a sweep point varies");
  EXPECT_ERROR(grid({"seed=1", "seed=2"}), ErrorKind::kConfig, "given twice");
  EXPECT_ERROR(grid({"seed"}), ErrorKind::kConfig, "expected NAME=V1,V2");
  EXPECT_ERROR(grid({"seed=1,,2"}), ErrorKind::kConfig, "empty value");
  EXPECT_ERROR(grid({"device_profile=no-such-profile"}), ErrorKind::kConfig,
               "--grid device_profile=no-such-profile");
  // A combination a session refuses names the point.
  EXPECT_ERROR(grid({"mode=static,geared"}), ErrorKind::kConfig, "sweep point 1 (mode=geared)");
  SweepOptions geared = sweepOf("seed001_add.gbx", "seed001_add.trace.jsonl",
                                {"gears={\"x1\": {\"0\": [2, 4]}};{\"nope\": {\"0\": [2]}}"});
  geared.run.mode = "geared";
  EXPECT_ERROR([&] { runIt(geared); }, ErrorKind::kConfig, "sweep point 1 (gears={\"nope\"");
  // ';' separates values that hold a ','.
  const cli::SweepResult r = runIt(sweepOf("seed001_add.gbx", "seed001_add.trace.jsonl",
                                           {"dynamic_dims=x1:0,x2:0;x1:0", "mode=dynamic"}));
  ASSERT_EQ(r.points.size(), 2u);
  EXPECT_EQ(r.points[0].values[0], "x1:0,x2:0");
}

// A failing point is a row saying why; the others still run.
TEST(Sweep, AFailingPointIsARow) {
  const cli::SweepResult r =
      runIt(sweepOf("seed001_add.gbx", "seed001_add.trace.jsonl",
                    {"on_recompile_limit=error,fallback", "recompile_limit=2,8"}));
  ASSERT_EQ(r.points.size(), 4u);
  EXPECT_FALSE(r.points[0].ok());
  EXPECT_EQ(r.points[0].errorKind, "recompile limit");
  EXPECT_NE(r.points[0].error.find("hit recompile_limit (2)"), std::string::npos);
  EXPECT_EQ(r.points[0].report.at("complete"), false);
  for (size_t i = 1; i < 4; ++i) EXPECT_TRUE(r.points[i].ok()) << i;
  EXPECT_EQ(at(r.points[2], "fallback_runs"), 5);   // 4, 4, 5, 5, 6 after 2 and 3
  EXPECT_EQ(at(r.points[3], "graph_compiles"), 5);  // 5 distinct sizes, limit 8
}

// --accumulated-recompile-limit counts plans and kernels: seed001_add's plan is one kernel, so
// each compile is 2 and a limit of 4 stops after the second plan.
TEST(Sweep, AccumulatedRecompileLimit) {
  const cli::SweepResult r = runIt(sweepOf("seed001_add.gbx", "seed001_add.trace.jsonl",
                                           {"accumulated_recompile_limit=0,4,6,256"}));
  ASSERT_EQ(r.points.size(), 4u);
  const int64_t compiles[] = {5, 2, 3, 5};
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(r.points[i].ok()) << r.points[i].error;
    EXPECT_EQ(at(r.points[i], "graph_compiles"), compiles[i]) << i;
    EXPECT_EQ(at(r.points[i], "graph_compiles") + at(r.points[i], "plan_cache_hits") +
                  at(r.points[i], "fallback_runs"),
              7)
        << i;
    EXPECT_EQ(r.points[i].report.at("config").at("accumulated_recompile_limit"),
              std::stoi(r.points[i].values[0]));
  }
  // Under `error` the accumulated limit fails the point in its own words.
  const cli::SweepResult e =
      runIt(sweepOf("seed001_add.gbx", "seed001_add.trace.jsonl",
                    {"accumulated_recompile_limit=4", "on_recompile_limit=error"}));
  ASSERT_FALSE(e.points[0].ok());
  EXPECT_NE(e.points[0].error.find("hit accumulated_recompile_limit (4;"), std::string::npos)
      << e.points[0].error;
}

TEST(Sweep, GearsSuggestAndPaddingColumns) {
  SweepOptions o = sweepOf("mlp.gbx", "mlp_serving.trace.jsonl",
                           {"gears=suggest;{\"x\": {\"0\": [16, 32, 48, 64]}}"});
  o.run.mode = "geared";
  o.run.gearFallback = "pad";
  const cli::SweepResult r = runIt(o);
  ASSERT_EQ(r.points.size(), 2u);
  ASSERT_TRUE(r.points[0].ok()) << r.points[0].error;
  ASSERT_TRUE(r.points[1].ok()) << r.points[1].error;
  EXPECT_FALSE(r.points[0].suggestedGears.empty());
  EXPECT_EQ(at(r.points[1], "gears"), 4);
  EXPECT_EQ(at(r.points[1], "graph_compiles"), 4);
  EXPECT_EQ(at(r.points[1], "fallback_runs"), 0);
  std::vector<std::string> headers;
  for (const cli::SweepColumn* c : r.columns()) headers.push_back(c->header);
  for (const char* h : {"padded calls", "modeled padding waste (us)"})
    EXPECT_NE(std::find(headers.begin(), headers.end(), h), headers.end()) << h;
  const std::string html = cli::renderSweepHtml(o, r);
  EXPECT_NE(html.find("data-plot=\"total-vs-graph_compiles\""), std::string::npos);
  EXPECT_NE(html.find("data-plot=\"total-vs-modeled_peak_bytes\""), std::string::npos);
}

// The CLI: the table on stdout and --json against goldens, exit 0 with a failing point, and a
// bad axis exits 2 naming it. Paths are relative to the source dir, so the goldens hold them.
std::string golden(const std::string& name) {
  return std::string(GEARBOX_SOURCE_DIR) + "/tests/golden/sweep/" + name;
}

void checkGolden(const std::string& name, const std::string& got) {
  if (std::getenv("GEARBOX_UPDATE_GOLDEN")) {
    writeFileAtomic(golden(name), got);
    return;
  }
  EXPECT_EQ(got, readFile(golden(name))) << "GEARBOX_UPDATE_GOLDEN=1 rewrites " << name;
}

TEST(SweepCli, TableAndJsonGoldens) {
  testing_util::TempDir dir;
  const std::string args =
      "sweep examples/seed001_add.gbx --trace examples/seed001_add.trace.jsonl "
      "--grid recompile_limit=1,2,4 --grid on_recompile_limit=fallback,error --json " +
      testing_util::shellQuote(dir.file("s.json")) + " --html " +
      testing_util::shellQuote(dir.file("s.html"));
  const auto r =
      testing_util::runShell("cd " + testing_util::shellQuote(GEARBOX_SOURCE_DIR) + " && exec " +
                             testing_util::shellQuote(GEARBOX_BINARY) + " " + args);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  // The html line names the temp dir; the goldens hold the rest.
  std::string table = r.output.substr(0, r.output.find("html report: "));
  checkGolden("seed001_limits.txt", table);
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(readFile(dir.file("s.json")));
  j.erase("tool");  // the version
  checkGolden("seed001_limits.json", j.dump(2) + "\n");
  const std::string html = readFile(dir.file("s.html"));
  EXPECT_NE(html.find("data-plot=\"total-vs-graph_compiles\""), std::string::npos);
  const auto bad = testing_util::runGearbox(
      "sweep " + testing_util::shellQuote(example("seed001_add.gbx")) + " --trace " +
      testing_util::shellQuote(example("seed001_add.trace.jsonl")) +
      " --grid recompile_limit=1,many");
  EXPECT_EQ(bad.exitCode, 2) << bad.output;
  EXPECT_NE(bad.output.find("recompile_limit=many"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace gearbox
