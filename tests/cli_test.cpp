// CLI golden tests of run, compare, eval and print: exit codes, the JSON report, --assert, and
// that bad input gives one clear message and writes nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "compiler/cpu_isa.h"
#include "executor/session.h"
#include "graph/file_io.h"
#include "graph/npy.h"
#include "graph/text.h"
#include "json_schema.h"
#include "temp_dir.h"

namespace gearbox {
namespace {

using testing_util::example;
using testing_util::runGearbox;
using testing_util::shellQuote;
using testing_util::TempDir;

const std::string kSeedRun = "run " + shellQuote(example("seed001_add.gbx")) + " --trace " +
                             shellQuote(example("seed001_add.trace.jsonl"));

TEST(Cli, RunSeed001StaticJsonHasTheReferenceCounts) {
  TempDir dir;
  const std::string json = dir.file("r.json");
  auto r = runGearbox(kSeedRun + " --mode static --json " + shellQuote(json));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  auto j = nlohmann::json::parse(readFile(json));
  EXPECT_TRUE(testing_util::conformsToReportSchema(j));
  EXPECT_EQ(j["mode"], "static");
  EXPECT_EQ(j["iterations"], 7);
  EXPECT_EQ(j["graph_compiles"], 5);
  EXPECT_EQ(j["kernel_compiles"], 5);
  EXPECT_EQ(j["plan_cache_hits"], 2);
  EXPECT_EQ(j["kernel_cache_hits"], 0);
  EXPECT_EQ(j["peak_bytes"], 0);
  ASSERT_EQ(j["per_iteration"].size(), 7u);
  EXPECT_EQ(j["per_iteration"][1]["reason"],
            "input 'x1' size mismatch at dim 0: expected 2, actual 3");
  EXPECT_EQ(j["per_iteration"][3]["graph_compiled"], false);
  EXPECT_NE(r.output.find("iter   1  x1=[3, 2], x2=[3, 2]  compiled plan #2 (input 'x1' size "
                          "mismatch at dim 0: expected 2, actual 3); kernel compiled: "
                          "Add_float_ND_3_2__3_2\n"),
            std::string::npos)
      << r.output;
}

TEST(Cli, RunModesOnSeed001) {
  for (auto [mode, compiles] : {std::pair{"auto", 2}, {"dynamic", 1}, {"eager", 0}}) {
    auto r = runGearbox(kSeedRun + " -q --mode " + mode +
                        " --assert graph_compiles==" + std::to_string(compiles));
    EXPECT_EQ(r.exitCode, 0) << mode << ": " << r.output;
  }
}

TEST(Cli, AssertBrokenBoundExitsOne) {
  auto r = runGearbox(kSeedRun + " -q --assert 'graph_compiles<=3' --assert 'kernel_compiles==5'");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(
      r.output.find("gearbox: assertion failed: graph_compiles<=3 (actual graph_compiles = 5)"),
      std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("kernel_compiles==5"), std::string::npos) << "that bound holds";
  auto bad = runGearbox(kSeedRun + " -q --assert 'compiles<=3'");
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_NE(bad.output.find("unknown metric 'compiles'"), std::string::npos) << bad.output;
}

TEST(Cli, RecompileLimitErrorExitsOneWithTheLastReason) {
  // A policy failing is exit 1 (an --assert is too); 2 is kept for bad input.
  auto r = runGearbox(kSeedRun + " -q --recompile-limit 3 --on-recompile-limit error");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.output.find("hit recompile_limit (3); last reason: input "
                          "'x1' size mismatch at dim 0: expected 4, actual 5"),
            std::string::npos)
      << r.output;
}

TEST(Cli, CompareRunsEveryModeAndAgrees) {
  TempDir dir;
  auto r = runGearbox("compare " + shellQuote(example("four_ops.gbx")) + " --trace " +
                      shellQuote(example("four_ops.trace.jsonl")) +
                      " --gears '{\"x\": {\"0\": [1, 2, 4, 8]}, \"y\": {\"0\": [1, 2, 4, 8]}}'"
                      " --gear-fallback pad --json " +
                      shellQuote(dir.file("c.json")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("outputs agree across modes: yes"), std::string::npos) << r.output;
  // A measured verdict only when the winner is clear of the noise.
  EXPECT_TRUE(r.output.find("fastest by measured host time (median of 5):") != std::string::npos ||
              r.output.find("measured host time: no clear winner:") != std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("fastest by MODELED device time:"), std::string::npos);
  auto j = nlohmann::json::parse(readFile(dir.file("c.json")));
  EXPECT_TRUE(testing_util::conformsToReportSchema(j));
  // Every mode: the default set plus the modes that need gears, as --gears is given.
  for (const std::string& m : modeNames(ModeSet::kAll)) EXPECT_TRUE(j["modes"].contains(m)) << m;
  EXPECT_EQ(j["modes"]["static"]["graph_compiles"], 5);
  EXPECT_EQ(j["modes"]["geared"]["graph_compiles"], 4);
  EXPECT_EQ(j["modes"]["geared"]["padded_calls"], 1);
  EXPECT_EQ(j["modes"]["eager"]["graph_compiles"], 0);
}

// Issue 25: --gear-fallback dynamic on four_ops' trace with gears 1, 2, 4: the calls of 3 and 8
// (8 above the largest gear) take the dynamic path, counted; one compile beyond the gears;
// outputs match the reference executor. eager: the gears only, kernels per new op shape.
TEST(Cli, GearFallbackDynamicAndEagerAreCountedAndMatchTheReference) {
  TempDir dir;
  const std::string base = "run " + shellQuote(example("four_ops.gbx")) + " --trace " +
                           shellQuote(example("four_ops.trace.jsonl")) +
                           " --mode geared --gears '{\"x\": {\"0\": [1, 2, 4]}}' "
                           "--check-reference -v --gear-fallback ";
  auto r = runGearbox(base + "dynamic --json " + shellQuote(dir.file("d.json")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("agrees"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("not a gear: gear fallback dynamic, ran plan #4 op by op"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("geared: fallback_calls 2"), std::string::npos) << r.output;
  auto d = nlohmann::json::parse(readFile(dir.file("d.json")));
  EXPECT_TRUE(testing_util::conformsToReportSchema(d));
  EXPECT_EQ(d["graph_compiles"], 3 + 1);
  EXPECT_EQ(d["mode_counters"]["fallback_calls"], 2);
  EXPECT_EQ(d["config"]["gears"]["fallback"], "dynamic");
  EXPECT_EQ(d["per_iteration"][4]["gear"], -1);
  EXPECT_EQ(d["per_iteration"][4]["mode_fields"]["gear_fallback"], "dynamic");
  EXPECT_EQ(d["reference_check"]["calls"], 8);

  r = runGearbox(base + "eager --json " + shellQuote(dir.file("e.json")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("agrees"), std::string::npos) << r.output;
  auto e = nlohmann::json::parse(readFile(dir.file("e.json")));
  EXPECT_TRUE(testing_util::conformsToReportSchema(e));
  EXPECT_EQ(e["graph_compiles"], 3);
  EXPECT_EQ(e["mode_counters"]["fallback_calls"], 2);
  // The gears' 3 x 3 kernels, then 3 per new size outside them (3 and 8).
  EXPECT_EQ(e["kernel_compiles"], 9 + 2 * 3);
}

// Issue 25: --gear-compile lazy vs eager: an unused gear (16) never compiles lazily; start-up
// (MODELED) is lower with lazy and the first call (MODELED) higher.
TEST(Cli, GearCompileLazyCompilesOnFirstUseAndReportsStartUp) {
  TempDir dir;
  const std::string base = "run " + shellQuote(example("four_ops.gbx")) + " --trace " +
                           shellQuote(example("four_ops.trace.jsonl")) +
                           " --mode geared --gears '{\"x\": {\"0\": [1, 2, 4, 8, 16]}}' "
                           "--gear-fallback pad --check-reference --gear-compile ";
  auto lazyRun = runGearbox(base + "lazy --json " + shellQuote(dir.file("l.json")));
  ASSERT_EQ(lazyRun.exitCode, 0) << lazyRun.output;
  EXPECT_NE(lazyRun.output.find("gears compiled on first use 4 of 5"), std::string::npos)
      << lazyRun.output;
  EXPECT_NE(lazyRun.output.find("start-up: 0 graph compiles up front"), std::string::npos)
      << lazyRun.output;
  auto eagerRun = runGearbox(base + "eager --json " + shellQuote(dir.file("e.json")));
  ASSERT_EQ(eagerRun.exitCode, 0) << eagerRun.output;
  EXPECT_NE(eagerRun.output.find("start-up: 5 graph compiles up front"), std::string::npos)
      << eagerRun.output;
  auto l = nlohmann::json::parse(readFile(dir.file("l.json")));
  auto e = nlohmann::json::parse(readFile(dir.file("e.json")));
  EXPECT_TRUE(testing_util::conformsToReportSchema(l));
  EXPECT_EQ(l["config"]["gears"]["compile"], "lazy");
  EXPECT_EQ(l["graph_compiles"], 4);  // gears 1, 2, 4, 8; 16 is never used
  EXPECT_EQ(e["graph_compiles"], 5);
  EXPECT_EQ(l["mode_counters"]["gears_compiled_on_first_use"], 4);
  EXPECT_EQ(l["startup"]["up_front_graph_compiles"], 0);
  EXPECT_EQ(e["startup"]["up_front_graph_compiles"], 5);
  EXPECT_LT(l["startup"]["modeled_up_front_compile_us"].get<double>(),
            e["startup"]["modeled_up_front_compile_us"].get<double>());
  EXPECT_GT(l["startup"]["modeled_first_call_us"].get<double>(),
            e["startup"]["modeled_first_call_us"].get<double>());
  EXPECT_EQ(l["padded_calls"], e["padded_calls"]);
}

TEST(Cli, EvalWritesEveryOutputAndMatchesTheReference) {
  TempDir dir;
  const Graph g = loadGraph(example("four_ops.gbx"));
  auto inputs = makeInputs(g, {Shape{3, 4}, Shape{3, 4}}, 5);
  saveNpy(dir.file("x.npy"), inputs[0]);
  saveNpy(dir.file("y.npy"), inputs[1]);
  auto r = runGearbox("eval " + shellQuote(example("four_ops.gbx")) +
                      " --input x=" + shellQuote(dir.file("x.npy")) + " --input y=" +
                      shellQuote(dir.file("y.npy")) + " --out " + shellQuote(dir.file("out")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  Tensor o = loadNpy(dir.file("out/o.npy"));
  EXPECT_TRUE(o.equals(referenceRun(g, inputs)[0]));
}

TEST(Cli, BadInputExitsTwoAndWritesNothing) {
  TempDir dir;
  const std::string out = dir.file("out");
  // A shape that does not fit the model: nothing may be written.
  saveNpy(dir.file("x.npy"), Tensor(DType::kF32, {3, 5}));
  saveNpy(dir.file("y.npy"), Tensor(DType::kF32, {3, 4}));
  auto r = runGearbox("eval " + shellQuote(example("four_ops.gbx")) +
                      " --input x=" + shellQuote(dir.file("x.npy")) +
                      " --input y=" + shellQuote(dir.file("y.npy")) + " --out " + shellQuote(out));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_EQ(r.output, "gearbox: shape error: input 'x' dim 1: declared 4, got 5\n");
  EXPECT_FALSE(std::filesystem::exists(out));

  // A trace line naming an unknown input.
  {
    std::ofstream t(dir.file("bad.jsonl"));
    t << "{\"x1\": [2, 2], \"x2\": [2, 2]}\n{\"x1\": [2, 2], \"x3\": [2, 2]}\n";
  }
  const std::string json = dir.file("r.json");
  r = runGearbox("run " + shellQuote(example("seed001_add.gbx")) + " --trace " +
                 shellQuote(dir.file("bad.jsonl")) + " --json " + shellQuote(json));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_EQ(r.output, "gearbox: parse error: " + dir.file("bad.jsonl") +
                          ":2: graph seed001 has no input 'x3'\n");
  EXPECT_FALSE(std::filesystem::exists(json));

  // A missing model file.
  r = runGearbox("run " + shellQuote(dir.file("nope.gbx")) + " --trace " +
                 shellQuote(dir.file("bad.jsonl")));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.output.find("nope.gbx"), std::string::npos) << r.output;

  // A trace dim that contradicts a static declared dim, with file:line.
  {
    std::ofstream t(dir.file("bad2.jsonl"));
    t << "{\"x1\": [2, 3], \"x2\": [2, 3]}\n";
  }
  r = runGearbox("run " + shellQuote(example("seed001_add.gbx")) + " --trace " +
                 shellQuote(dir.file("bad2.jsonl")));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_EQ(r.output, "gearbox: shape error: " + dir.file("bad2.jsonl") +
                          ":1: input 'x1' dim 1: declared 2, got 3\n");

  // A target dim expression that overflows int64 at the call's size: a shape error naming the
  // file:line, the op, the attribute and the dim, before anything is written.
  {
    std::ofstream m(dir.file("huge.gbx"));
    m << "graph g(%x: f32[B, 2]) {\n"
         "  %y = expand(%x, shape=[4611686018427387904*B, B, 2])\n"
         "  return %y\n"
         "}\n";
  }
  saveNpy(dir.file("b2.npy"), Tensor(DType::kF32, {2, 2}));
  r = runGearbox("eval " + shellQuote(dir.file("huge.gbx")) +
                 " --input x=" + shellQuote(dir.file("b2.npy")) + " --out " + shellQuote(out));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_EQ(r.output, "gearbox: shape error: " + dir.file("huge.gbx") +
                          ":2: op %y = expand: attribute shape [4611686018427387904*B, B, 2]: dim "
                          "0 (4611686018427387904*B) overflows int64 at B = 2\n");
  EXPECT_FALSE(std::filesystem::exists(out));

  // Unknown option, unknown mode.
  EXPECT_EQ(runGearbox(kSeedRun + " --mode turbo").exitCode, 2);
  EXPECT_EQ(runGearbox(kSeedRun + " --frobnicate").exitCode, 2);
}

TEST(Cli, PrintSpecialisesWhenShapesAreGiven) {
  auto r = runGearbox("print " + shellQuote(example("seed001_add.gbx")) +
                      " --shapes '{\"x1\": [3, 2], \"x2\": [3, 2]}'");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("%x1: f32[3, 2]"), std::string::npos) << r.output;
  auto plain = runGearbox("print " + shellQuote(example("seed001_add.gbx")));
  EXPECT_NE(plain.output.find("%x1: f32[-1, 2]"), std::string::npos) << plain.output;
  auto bad = runGearbox("print " + shellQuote(example("seed001_add.gbx")) +
                        " --shapes '{\"x1\": [3, 2], \"x2\": [4, 2]}'");
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_NE(bad.output.find("op %y = add"), std::string::npos) << bad.output;
}

// print --plan: the static plan for a shape, one row per kernel with its thread split decided
// at compile (a 64 x 1024 x 1024 matmul is 134 MFLOP: split for 2 threads, not for 1; each bias
// add is the matmul's epilogue: fuse-matmul-epilogue) and the params below it.
TEST(Cli, PrintPlanShowsEachKernelsThreadSplitAndParams) {
  const std::string base = "print " + shellQuote(example("mlp.gbx")) +
                           " --shapes '{\"x\": [64, 1024]}' --plan --threads ";
  auto r = runGearbox(base + "2");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("2 steps, arena 256.00 KiB (256.00 KiB without reuse)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("step  value  op      output         tasks  work          kernel\n"
                          "   0  %hb    matmul  f32[64, 1024]      2  134.22 MFLOP  "
                          "MatMul_float_ND_64_1024__1024_1024__1024__threads=2\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("   1  %y     matmul  f32[64, 1024]      2  134.22 MFLOP  MatMul_"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("      params {\"kind\":\"MatMul\",\"batch\":1,\"m\":64"),
            std::string::npos)
      << r.output;
  auto one = runGearbox(base + "1");
  ASSERT_EQ(one.exitCode, 0) << one.output;
  EXPECT_NE(one.output.find("matmul  f32[64, 1024]      1  134.22 MFLOP"), std::string::npos)
      << one.output;
  // Misuse exits 2 naming what is missing.
  const std::string model = "print " + shellQuote(example("mlp.gbx"));
  auto noShapes = runGearbox(model + " --plan");
  EXPECT_EQ(noShapes.exitCode, 2);
  EXPECT_NE(noShapes.output.find("--plan needs --shapes"), std::string::npos) << noShapes.output;
  EXPECT_EQ(runGearbox(model + " --threads 2").exitCode, 2);
  EXPECT_EQ(runGearbox(base + "2 --passes").exitCode, 2);
  EXPECT_EQ(runGearbox(model + " --shapes '{\"x\": [1, 1024]}' --plan --threads -1").exitCode, 2);
}

// A constant B of 1,040 columns on AVX-512's direct path is packed by the plan in strips of the
// tile's width (48 for 32 rows: 8 x 48 tiles), and print --plan says so under the step.
TEST(Cli, PrintPlanShowsAMatMulWeightPackedInStrips) {
  TempDir dir;
  saveNpy(dir.file("w.npy"), Tensor(DType::kF32, {300, 1040}));
  {
    std::ofstream f(dir.file("m.gbx"));
    f << "graph m(%x: f32[B, 300]) {\n  %w = const f32[300, 1040] \"w.npy\"\n"
         "  %y = matmul(%x, %w)\n  return %y\n}\n";
  }
  auto r = runGearbox("print " + shellQuote(dir.file("m.gbx")) +
                      " --shapes '{\"x\": [32, 300]}' --plan --threads 1");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const bool packed =
      r.output.find("      weight B packed by the plan in strips of 48 columns ([K][48] each") !=
      std::string::npos;
  EXPECT_EQ(packed, activeIsa() == Isa::kAvx512) << r.output;
}

TEST(Cli, LogHasOneCompileLinePerKernelAndIterationMarkers) {
  TempDir dir;
  const std::string log = dir.file("run.log");
  auto r = runGearbox(kSeedRun + " -q --mode eager --iter-markers --log " + shellQuote(log));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const std::string text = readFile(log);
  int compiles = 0, markers = 0;
  for (size_t p = 0; (p = text.find("To compile op: ", p)) != std::string::npos; ++p) ++compiles;
  for (size_t p = 0; (p = text.find("To compile op|=====iter", p)) != std::string::npos; ++p)
    ++markers;
  EXPECT_EQ(compiles, 5);
  EXPECT_EQ(markers, 7);
  EXPECT_NE(text.find("To compile op: Add_float_ND_6_2__6_2\n"), std::string::npos);
}

}  // namespace
}  // namespace gearbox

namespace gearbox {
namespace {

TEST(Cli, BundledSeed001GearsExample) {
  const std::string args =
      "run " + testing_util::shellQuote(testing_util::example("seed001_add.gbx")) + " --trace " +
      testing_util::shellQuote(testing_util::example("seed001_gears.trace.jsonl")) +
      " --mode geared --gears @" +
      testing_util::shellQuote(testing_util::example("seed001_gears.json")) + " -v";
  auto exact = testing_util::runGearbox(args);
  EXPECT_EQ(exact.exitCode, 2);
  EXPECT_NE(exact.output.find("compiled 2 gears up front (2 kernels):\n"
                              "  ge.dynamicDims = 2,2;4,4\n"
                              "  ge.dynamicNodeType = 1\n"
                              "  ge.inputShape = x1:-1,2;x2:-1,2\n"
                              "iter   0  x1=[2, 2], x2=[2, 2]  gear 0 (plan #"),
            std::string::npos)
      << exact.output;
  EXPECT_NE(exact.output.find("gearbox: gear error: geared mode, iteration 3 (" +
                              testing_util::example("seed001_gears.trace.jsonl") +
                              ":4): input 'x1' dim 0 = 3 is not in the gears [2, 4]"),
            std::string::npos)
      << exact.output;
  auto padded = testing_util::runGearbox(args +
                                         " --gear-fallback pad --assert graph_compiles==2 "
                                         "--assert kernel_compiles==2 --assert padded_calls==1");
  EXPECT_EQ(padded.exitCode, 0) << padded.output;
  EXPECT_NE(
      padded.output.find("iter   3  x1=[3, 2], x2=[3, 2]  padded 12 -> 16 elements, ran gear 1"),
      std::string::npos)
      << padded.output;
}

}  // namespace
}  // namespace gearbox
