// CLI output levels, CI-grade behaviour and `gearbox print` (issue 12 items 1, 2, 6, 8): what
// is printed at each level, the end summary, options checked before the run, errors that name
// where they happened, exit codes, per-mode bounds, compiles_after(N), --junit and --jsonl.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.h"
#include "graph/file_io.h"
#include "temp_dir.h"

namespace gearbox {
namespace {

using testing_util::example;
using testing_util::runGearbox;
using testing_util::shellQuote;
using testing_util::TempDir;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const std::string kSeed = shellQuote(example("seed001_add.gbx")) + " --trace " +
                          shellQuote(example("seed001_add.trace.jsonl"));

// The issue's b64 trace: batch sizes 1..64 for four_ops (8 compiles, then the limit).
std::string writeB64(const TempDir& dir) {
  const std::string path = dir.file("b64.jsonl");
  std::ofstream f(path);
  for (int b = 1; b <= 64; ++b) f << "{\"x\": [" << b << ", 4], \"y\": [" << b << ", 4]}\n";
  return path;
}

TEST(OutputLevels, B64PrintsOneRecompileLimitWarningAndASummaryLine) {
  TempDir dir;
  const std::string run =
      "run " + shellQuote(example("four_ops.gbx")) + " --trace " + shellQuote(writeB64(dir));
  for (const char* level : {"", " -q"}) {
    auto r = runGearbox(run + level);
    ASSERT_EQ(r.exitCode, 0) << r.output;
    EXPECT_EQ(count(r.output, "hit recompile_limit (8)"), 1u) << level << "\n" << r.output;
    EXPECT_EQ(count(r.output,
                    "recompile limit: 56 calls ran through the dynamic path (iters "
                    "8..63)\n"),
              1u)
        << r.output;
    EXPECT_EQ(count(r.output, "ran through the dynamic path (input"), 0u) << r.output;
  }
  auto v = runGearbox(run + " -v");
  ASSERT_EQ(v.exitCode, 0) << v.output;
  EXPECT_EQ(count(v.output, "recompile limit hit: ran through the dynamic path"), 56u);
}

TEST(OutputLevels, CompareCountsEachModesWarningsOnce) {
  TempDir dir;
  const std::string json = dir.file("c.json");
  auto r = runGearbox("compare " + shellQuote(example("four_ops.gbx")) + " --trace " +
                      shellQuote(writeB64(dir)) + " --repeat 2 --modes static,dynamic --json " +
                      shellQuote(json));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  // Printed once although both repeats of static hit the limit.
  EXPECT_EQ(count(r.output, "gearbox: warning: hit recompile_limit (8)"), 1u) << r.output;
  const auto j = nlohmann::json::parse(readFile(json));
  EXPECT_EQ(j["modes"]["static"]["warnings"], 1);
  EXPECT_EQ(j["modes"]["dynamic"]["warnings"], 0);
  ASSERT_EQ(j["warning_messages"].size(), 1u);
  EXPECT_EQ(j["warning_messages"][0]["count"], 2);
}

TEST(OutputLevels, DefaultPrintsCompilesOnlyVerboseEveryCallQuietNone) {
  auto def = runGearbox("run " + kSeed);
  ASSERT_EQ(def.exitCode, 0) << def.output;
  EXPECT_EQ(count(def.output, "compiled plan #"), 5u) << def.output;
  EXPECT_EQ(count(def.output, "(cache hit)"), 0u) << def.output;
  // The end summary groups the recompiles by input and dim.
  // x1 and x2 share the batch dim: their guards fail together and are reported together.
  EXPECT_NE(def.output.find("  4 recompiles: x1 dim 0 + x2 dim 0 changed 4 times (sizes 2..6) "
                            "(last iter 6); last compile at iter 6\n"),
            std::string::npos)
      << def.output;
  auto v = runGearbox("run " + kSeed + " -v");
  EXPECT_EQ(count(v.output, "\niter ") + (v.output.rfind("iter ", 0) == 0), 7u) << v.output;
  EXPECT_EQ(count(v.output, "(cache hit)"), 2u) << v.output;
  auto q = runGearbox("run " + kSeed + " -q");
  EXPECT_EQ(count(q.output, "compiled plan #"), 0u) << q.output;
  EXPECT_NE(q.output.find("4 recompiles"), std::string::npos) << q.output;
  EXPECT_EQ(runGearbox("run " + kSeed + " -q -v").exitCode, 2);
}

TEST(CiBehaviour, BadAssertMetricFailsBeforeTheRunAndWritesNothing) {
  TempDir dir;
  const std::string json = dir.file("r.json"), jsonl = dir.file("r.jsonl");
  auto r = runGearbox("run " + kSeed + " --assert 'graph_compile<=3' --json " + shellQuote(json) +
                      " --jsonl " + shellQuote(jsonl));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.output.find("unknown metric 'graph_compile'"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("iter "), std::string::npos) << "nothing ran:\n" << r.output;
  EXPECT_FALSE(std::ifstream(json).good());
  EXPECT_FALSE(std::ifstream(jsonl).good());
  // An output path in a missing directory is found before the run too.
  auto p = runGearbox("run " + kSeed + " --json " + shellQuote(dir.file("no/such/dir/r.json")));
  EXPECT_EQ(p.exitCode, 2);
  EXPECT_NE(p.output.find("--json"), std::string::npos) << p.output;
  EXPECT_EQ(p.output.find("iter "), std::string::npos) << p.output;
  // --gears outside geared mode is an error, not ignored.
  auto g = runGearbox("run " + kSeed + " --gears @" + shellQuote(example("seed001_gears.json")));
  EXPECT_EQ(g.exitCode, 2);
  EXPECT_NE(g.output.find("--gears is for --mode geared"), std::string::npos) << g.output;
}

TEST(CiBehaviour, RuntimeErrorNamesModeIterationAndTraceLine) {
  TempDir dir;
  const std::string json = dir.file("r.json");
  auto r = runGearbox("run " + kSeed + " -q --mode geared --gears @" +
                      shellQuote(example("seed001_gears.json")) + " --json " + shellQuote(json));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(
      r.output.find("geared mode, iteration 1 (" + example("seed001_add.trace.jsonl") + ":2): "),
      std::string::npos)
      << r.output;
  const auto j = nlohmann::json::parse(readFile(json));
  EXPECT_EQ(j["complete"], false);
  EXPECT_EQ(j["iterations"], 1);
}

TEST(CiBehaviour, AnErrorBeforeTheFirstCallPrintsNoReportAndWritesNothing) {
  // --pad-to over a conv's spatial dims is refused up front (padding would leak into real
  // outputs): exit 2 with the reason, and no summary of zero iterations, no --json.
  TempDir dir;
  const std::string model = dir.file("conv.gbx"), trace = dir.file("t.jsonl"),
                    json = dir.file("r.json");
  // A 3x3 conv with zero weights over input dims `xDims`.
  auto writeConv = [&](const std::string& xDims) {
    std::string zeros = "0";
    for (int i = 1; i < 36; ++i) zeros += ", 0";
    std::ofstream(model) << "graph g(%x: f32[" << xDims << "]) {\n  %w = const f32[2, 2, 3, 3] ["
                         << zeros
                         << "]\n  %y = conv2d(%x, %w, pads=[1, 1, 1, 1])\n  return %y\n}\n";
  };
  writeConv("N, 2, H, H");
  std::ofstream(trace) << "{\"x\": [1, 2, 5, 5]}\n{\"x\": [2, 2, 7, 7]}\n";
  auto r = runGearbox("run " + shellQuote(model) + " --trace " + shellQuote(trace) +
                      " -q --mode geared --pad-to x=2,2,8,8 --json " + shellQuote(json));
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_NE(r.output.find("cannot pad input 'x' dim 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("spatial dim"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("0 iterations"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(json));
  // Padding only the batch is fine (rows of a batch never meet in a conv).
  writeConv("N, 2, 8, 8");
  std::ofstream(trace) << "{\"x\": [1, 2, 8, 8]}\n{\"x\": [2, 2, 8, 8]}\n";
  auto b = runGearbox("run " + shellQuote(model) + " --trace " + shellQuote(trace) +
                      " -q --mode geared --pad-to x=2,2,8,8");
  EXPECT_EQ(b.exitCode, 0) << b.output;
  EXPECT_NE(b.output.find("padded calls 1"), std::string::npos) << b.output;
}

TEST(CiBehaviour, RecompileLimitErrorIsAPolicyFailureExitOne) {
  TempDir dir;
  const std::string json = dir.file("r.json");
  auto r =
      runGearbox("run " + kSeed + " -q --recompile-limit 3 --on-recompile-limit error --json " +
                 shellQuote(json));
  EXPECT_EQ(r.exitCode, 1) << r.output;
  EXPECT_NE(r.output.find("static mode, iteration 4"), std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(readFile(json));
  EXPECT_EQ(j["complete"], false);
  EXPECT_EQ(j["graph_compiles"], 3);
}

TEST(CiBehaviour, CompareAssertsPerModeAndCompilesAfter) {
  const std::string cmp = "compare " + kSeed + " -q --repeat 1 --modes static,auto";
  EXPECT_EQ(runGearbox(cmp + " --assert 'static.graph_compiles<=5'").exitCode, 0);
  auto broken = runGearbox(cmp + " --assert 'static.graph_compiles<=4'");
  EXPECT_EQ(broken.exitCode, 1);
  EXPECT_NE(broken.output.find("assertion failed: static.graph_compiles<=4 (actual "
                               "graph_compiles = 5)"),
            std::string::npos)
      << broken.output;
  // A plain bound holds for every mode: auto compiles twice, static five times.
  auto every = runGearbox(cmp + " --assert 'graph_compiles<=2'");
  EXPECT_EQ(every.exitCode, 1);
  EXPECT_NE(every.output.find("static: graph_compiles<=2"), std::string::npos) << every.output;
  EXPECT_EQ(every.output.find("auto: graph_compiles<=2"), std::string::npos) << every.output;
  EXPECT_EQ(runGearbox(cmp + " --assert 'turbo.graph_compiles<=4'").exitCode, 2);
  // compiles_after(N): auto's last compile is at iteration 1, static's at 6.
  EXPECT_EQ(runGearbox(cmp + " --assert 'auto.compiles_after(2)==0'").exitCode, 0);
  EXPECT_EQ(runGearbox(cmp + " --assert 'static.compiles_after(2)==3'").exitCode, 0);
  EXPECT_EQ(runGearbox("run " + kSeed + " -q --assert 'compiles_after(7)==0'").exitCode, 0);
  EXPECT_EQ(runGearbox("run " + kSeed + " -q --assert 'compiles_after(x)==0'").exitCode, 2);
}

TEST(CiBehaviour, JunitHasOneTestcasePerAssertion) {
  TempDir dir;
  const std::string xml = dir.file("j.xml");
  auto r = runGearbox("run " + kSeed +
                      " -q --assert 'graph_compiles<=3' --assert "
                      "'launches>=1' --junit " +
                      shellQuote(xml));
  EXPECT_EQ(r.exitCode, 1);
  const std::string x = readFile(xml);
  EXPECT_EQ(count(x, "<testcase "), 2u) << x;
  EXPECT_EQ(count(x, "<failure "), 1u) << x;
  EXPECT_NE(x.find("name=\"graph_compiles&lt;=3\""), std::string::npos) << x;
  EXPECT_NE(x.find("tests=\"2\" failures=\"1\""), std::string::npos) << x;
}

TEST(CiBehaviour, JsonlStreamsOneRecordPerIteration) {
  TempDir dir;
  const std::string jsonl = dir.file("r.jsonl");
  ASSERT_EQ(runGearbox("run " + kSeed + " -q --jsonl " + shellQuote(jsonl)).exitCode, 0);
  std::ifstream f(jsonl);
  int lines = 0;
  for (std::string line; std::getline(f, line); ++lines) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["iteration"], lines);
    EXPECT_TRUE(j["shapes"].is_object());
  }
  EXPECT_EQ(lines, 7);
}

TEST(Report, EagerPeakBytesAndPaddedCallsApartFromMisses) {
  TempDir dir;
  const std::string json = dir.file("r.json");
  ASSERT_EQ(runGearbox("run " + shellQuote(example("four_ops.gbx")) + " --trace " +
                       shellQuote(example("four_ops.trace.jsonl")) + " -q --mode eager --json " +
                       shellQuote(json))
                .exitCode,
            0);
  EXPECT_GT(nlohmann::json::parse(readFile(json))["peak_bytes"].get<int64_t>(), 0);
  // Geared with padding: seed001's 3-row call pads to the gear of 4.
  {
    std::ofstream t(dir.file("t.jsonl"));
    t << "{\"x1\": [2, 2], \"x2\": [2, 2]}\n{\"x1\": [3, 2], \"x2\": [3, 2]}\n"
         "{\"x1\": [4, 2], \"x2\": [4, 2]}\n{\"x1\": [1, 2], \"x2\": [1, 2]}\n";
  }
  auto g = runGearbox("run " + kSeed.substr(0, kSeed.find(" --trace")) + " --trace " +
                      shellQuote(dir.file("t.jsonl")) +
                      " -q --mode geared --gear-fallback pad "
                      "--gears @" +
                      shellQuote(example("seed001_gears.json")) + " --json " + shellQuote(json));
  ASSERT_EQ(g.exitCode, 0) << g.output;
  const auto j = nlohmann::json::parse(readFile(json));
  EXPECT_EQ(j["padded_calls"], 2);
  EXPECT_EQ(j["plan_cache_misses"], 0);
  EXPECT_EQ(j["plan_cache_hits"], 2);
}

TEST(Print, ShapesShowEveryInferredTypeDotAndPassDiffs) {
  auto r = runGearbox("print " + shellQuote(example("four_ops.gbx")) +
                      " --shapes '{\"x\": [3, 4], \"y\": [3, 4]}'");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("%m = matmul(%s, %w)  # f32[3, 3]\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("%c = cat(%m, %s, dim=1)  # f32[3, 7]\n"), std::string::npos) << r.output;
  TempDir dir;
  const std::string dot = dir.file("g.dot");
  ASSERT_EQ(runGearbox("print " + shellQuote(example("four_ops.gbx")) + " --dot " + shellQuote(dot))
                .exitCode,
            0);
  const std::string d = readFile(dot);
  EXPECT_EQ(d.rfind("digraph \"four_ops\" {", 0), 0u) << d;
  EXPECT_EQ(count(d, "shape=box"), 6u) << d;  // add, 2 consts, matmul, cat, index_select
  auto p = runGearbox("print " + shellQuote(example("four_ops.gbx")) + " --passes");
  ASSERT_EQ(p.exitCode, 0) << p.output;
  // The graph before and after, and per pass only the lines it changed.
  EXPECT_EQ(count(p.output, "graph four_ops("), 2u) << p.output;
  EXPECT_NE(p.output.find("\n-  %c = cat(%m, %s, dim=1)\n"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("\n+  %o = cat_gather("), std::string::npos) << p.output;
}

}  // namespace
}  // namespace gearbox

namespace gearbox {
namespace {

TEST(SmallMisses, CompareHonoursQuietAndExplain) {
  const std::string cmp = "compare " + shellQuote(example("seed001_add.gbx")) + " --trace " +
                          shellQuote(example("seed001_add.trace.jsonl")) +
                          " --repeat 1 --modes static,auto";
  auto def = runGearbox(cmp);
  ASSERT_EQ(def.exitCode, 0) << def.output;
  EXPECT_NE(def.output.find("recompiles by mode"), std::string::npos) << def.output;
  EXPECT_EQ(def.output.find("triggered by"), std::string::npos) << def.output;
  auto q = runGearbox(cmp + " -q");
  EXPECT_EQ(q.output.find("recompiles by mode"), std::string::npos) << q.output;
  auto e = runGearbox(cmp + " --explain");
  EXPECT_NE(e.output.find("== static ==\niter   0"), std::string::npos) << e.output;
  EXPECT_NE(e.output.find("          - plan #1: input 'x1' size mismatch at dim 0: expected 2, "
                          "actual 3\n"),
            std::string::npos)
      << e.output;
}

TEST(SmallMisses, RecompileReportHintsAtTheSeedsBasicRegexGrep) {
  TempDir dir;
  const std::string log = dir.file("recompile_op.log");
  {
    // What `grep "To compile op|=====iter"` leaves: the markers only ('|' is literal in a BRE).
    std::ofstream f(log);
    for (int i = 0; i < 4; ++i) f << "To compile op|=====iter" << i << "\n";
  }
  auto r =
      runGearbox("recompile-report " + shellQuote(log) + " -o " + shellQuote(dir.file("list.txt")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("hint: the log has iteration markers but no 'To compile op: <kernel>' "
                          "lines"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("grep -E"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gearbox
