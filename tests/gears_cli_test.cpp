// Golden tests of `gearbox gears`: run the real binary, compare stdout+stderr and the exit code.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "cli_util.h"
#include "graph/file_io.h"

namespace {

using gearbox::testing_util::runGearbox;
using gearbox::testing_util::RunResult;

const char* kSeedGears = R"('{"x1": {"0": [2, 4]}, "x2": {"0": [2, 4]}}')";

TEST(GearsCli, SeedExampleZip) {
  RunResult r = runGearbox(std::string("gears --shape x1=-1,2 --shape x2=-1,2 --gears ") +
                           kSeedGears + " --merge zip");
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_EQ(r.output,
            "gear 0: x1=[2, 2] x2=[2, 2]\n"
            "gear 1: x1=[4, 2] x2=[4, 2]\n"
            "ge.inputShape = x1:-1,2;x2:-1,2\n"
            "ge.dynamicDims = 2,2;4,4\n"
            "ge.dynamicNodeType = 1\n");
}

TEST(GearsCli, SeedExampleProductAndDefaultPolicyIsZip) {
  RunResult r = runGearbox(std::string("gears --shape x1=-1,2 --shape x2=-1,2 --gears ") +
                           kSeedGears + " --merge product");
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_EQ(r.output,
            "gear 0: x1=[2, 2] x2=[2, 2]\n"
            "gear 1: x1=[2, 2] x2=[4, 2]\n"
            "gear 2: x1=[4, 2] x2=[2, 2]\n"
            "gear 3: x1=[4, 2] x2=[4, 2]\n"
            "ge.inputShape = x1:-1,2;x2:-1,2\n"
            "ge.dynamicDims = 2,2;2,4;4,2;4,4\n"
            "ge.dynamicNodeType = 1\n");
  RunResult def =
      runGearbox(std::string("gears --shape x1=-1,2 --shape x2=-1,2 --gears ") + kSeedGears);
  EXPECT_EQ(def.exitCode, 0);
  EXPECT_NE(def.output.find("ge.dynamicDims = 2,2;4,4\n"), std::string::npos) << def.output;
}

TEST(GearsCli, GearsFromAFileScalarAndFirstSeen) {
  const std::string path = ::testing::TempDir() + "gears_cli_test_gears.json";
  {
    std::ofstream f(path);
    f << R"({"x": {"0": [1, 2]}})";
  }
  RunResult r = runGearbox("gears --shape s= --shape x=-1,-1 --seen x=5,7 --gears '@" + path + "'");
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_EQ(r.output,
            "gear 0: s=[] x=[1, 7]\n"
            "gear 1: s=[] x=[2, 7]\n"
            "ge.inputShape = s:;x:-1,7\n"
            "ge.dynamicDims = 1;2\n"
            "ge.dynamicNodeType = 1\n");
  std::remove(path.c_str());
}

TEST(GearsCli, GearErrorsExitWithTwo) {
  RunResult zip = runGearbox(
      R"(gears --shape x1=-1,2 --shape x2=-1,2 --gears '{"x1": {"0": [2, 4]}, "x2": {"0": [2, 4, 8]}}')");
  EXPECT_EQ(zip.exitCode, 2);
  EXPECT_EQ(zip.output,
            "gearbox: gear error: when dynamic_gears_merge_policy is zip, input gears len must "
            "same.\n");

  RunResult limit = runGearbox(
      R"(gears --shape x1=-1,8 --shape x2=-1,8 --shape x3=-1,8 --merge product --gears '{"x1": {"0": [1,2,3,4,5,6,7,8,9]}, "x2": {"0": [1,2,3,4,5,6,7,8,9,10]}, "x3": {"0": [1,2,3,4,5,6,7,8,9,10]}}')");
  EXPECT_EQ(limit.exitCode, 2);
  EXPECT_EQ(limit.output,
            "gearbox: gear error: The total number of gears set cannot exceed 100, and the "
            "current number of gears is: 900\n");

  RunResult type = runGearbox(R"(gears --shape x1=-1,2 --gears '{"x1": {"0": [2, "4"]}}')");
  EXPECT_EQ(type.exitCode, 2);
  EXPECT_EQ(type.output,
            "gearbox: gear error: gears for input 'x1': Element at index 1 of value for dim index "
            "0 in dim_gears must be an integer, but got str.\n");

  RunResult policy = runGearbox(std::string("gears --shape x1=-1,2 --shape x2=-1,2 --gears ") +
                                kSeedGears + " --merge cartesian");
  EXPECT_EQ(policy.exitCode, 2);
  EXPECT_EQ(policy.output,
            "gearbox: gear error: dynamic_gears_merge_policy only support zip and product.\n");
}

TEST(GearsCli, BadInputIsAnErrorNotACrash) {
  RunResult json = runGearbox(R"(gears --shape x1=-1,2 --gears '{"x1": {"0": [2, 4]')");
  EXPECT_EQ(json.exitCode, 2);
  EXPECT_EQ(json.output.rfind("gearbox: gear error: gears JSON is malformed: ", 0), 0u)
      << json.output;

  RunResult file = runGearbox("gears --shape x1=-1,2 --gears @/nonexistent/gears.json");
  EXPECT_EQ(file.exitCode, 2);
  EXPECT_NE(file.output.find("cannot open gears file '/nonexistent/gears.json'"), std::string::npos)
      << file.output;

  RunResult shape = runGearbox(R"(gears --shape x1=-1,2x --gears '{"x1": {"0": [2, 4]}}')");
  EXPECT_EQ(shape.exitCode, 2);
  EXPECT_NE(shape.output.find("--shape 'x1=-1,2x': dim '2x' is neither a size nor a symbol name"),
            std::string::npos)
      << shape.output;

  RunResult missing = runGearbox(R"(gears --gears '{}')");
  EXPECT_EQ(missing.exitCode, 2);
  EXPECT_NE(missing.output.find("--shape"), std::string::npos) << missing.output;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Issue 14: gears MODEL --trace, shared symbols, suggest-gears, --pad-to

namespace {

using gearbox::testing_util::example;

TEST(GearsCli, ModelTraceCoverageAndSharedSymbol) {
  RunResult r = runGearbox("gears " + example("four_ops.gbx") +
                           R"( --gears '{"x": {"0": [1, 2, 4, 8]}}' --trace )" +
                           example("four_ops.trace.jsonl"));
  EXPECT_EQ(r.exitCode, 0) << r.output;
  const std::string want =
      "gear 0: x=[1, 4] y=[1, 4]\n"
      "gear 1: x=[2, 4] y=[2, 4]\n"
      "gear 2: x=[4, 4] y=[4, 4]\n"
      "gear 3: x=[8, 4] y=[8, 4]\n"
      "ge.inputShape = x:-1,4;y:-1,4\n"
      "ge.dynamicDims = 1,1;2,2;4,4;8,8\n"
      "ge.dynamicNodeType = 1\n"
      "note: input 'y' dim 0 follows 'x' dim 0 (same symbol B)\n";
  EXPECT_EQ(r.output.substr(0, want.size()), want);
  EXPECT_NE(r.output.find("(8 calls): 7 exact, 1 padded, 0 outside\n"), std::string::npos)
      << r.output;
  // Seed 001's gears leave three calls outside, and the first one is named.
  RunResult s =
      runGearbox("gears " + example("seed001_add.gbx") + " --gears @" +
                 example("seed001_gears.json") + " --trace " + example("seed001_add.trace.jsonl"));
  EXPECT_EQ(s.exitCode, 0) << s.output;
  EXPECT_NE(s.output.find("(7 calls): 3 exact, 1 padded, 3 outside\n"), std::string::npos)
      << s.output;
  EXPECT_NE(s.output.find("first call outside the gears: iteration 4: cannot pad to a gear: "
                          "input 'x1' dim 0 = 5 exceeds the largest gear value 4"),
            std::string::npos)
      << s.output;
  RunResult both = runGearbox("gears " + example("seed001_add.gbx") +
                              " --shape x1=-1,2 --gears '{\"x1\": {\"0\": [2, 4]}}'");
  EXPECT_EQ(both.exitCode, 2) << both.output;
}

TEST(GearsCli, SuggestGearsWritesGearsThatRunTheTrace) {
  const std::string gears = ::testing::TempDir() + "suggested_seed001.json";
  const std::string report = ::testing::TempDir() + "suggested_seed001_report.json";
  RunResult r =
      runGearbox("suggest-gears " + example("seed001_add.gbx") + " --trace " +
                 example("seed001_add.trace.jsonl") + " -o " + gears + " --json " + report);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("  suggested "), std::string::npos)
      << r.output;  // dynamic wins on 7 calls
  EXPECT_NE(r.output.find("powers of two"), std::string::npos);
  EXPECT_NE(r.output.find("vLLM capture sizes"), std::string::npos);
  EXPECT_NE(r.output.find("one per size (= static)"), std::string::npos);
  EXPECT_NE(r.output.find("dynamic"), std::string::npos);
  std::ifstream in(report);
  EXPECT_TRUE(in.good());
  RunResult run = runGearbox(
      "run " + example("seed001_add.gbx") + " --trace " + example("seed001_add.trace.jsonl") +
      " --mode geared --gear-fallback pad --check-reference --gears @" + gears);
  EXPECT_EQ(run.exitCode, 0) << run.output;
  EXPECT_NE(run.output.find("agrees"), std::string::npos) << run.output;
  RunResult cmp = runGearbox("compare " + example("seed001_add.gbx") + " --trace " +
                             example("seed001_add.trace.jsonl") + " --gears suggest --repeat 1");
  EXPECT_EQ(cmp.exitCode, 0) << cmp.output;
  EXPECT_NE(cmp.output.find("suggested gears: {\"x1\""), std::string::npos) << cmp.output;
}

TEST(GearsCli, SuggestGearsErrorsExitWithTwo) {
  const std::string trace = ::testing::TempDir() + "one_shape.trace.jsonl";
  {
    std::ofstream out(trace);
    out << "{\"x1\": [2, 2], \"x2\": [2, 2]}\n{\"x1\": [2, 2], \"x2\": [2, 2]}\n";
  }
  RunResult same = runGearbox("suggest-gears " + example("seed001_add.gbx") + " --trace " + trace);
  EXPECT_EQ(same.exitCode, 2);
  EXPECT_NE(same.output.find("no input dim varies in the trace (2 calls of one shape)"),
            std::string::npos)
      << same.output;
  RunResult one = runGearbox("suggest-gears " + example("seed001_add.gbx") + " --trace " +
                             example("seed001_add.trace.jsonl") + " --max-gears 1");
  EXPECT_EQ(one.exitCode, 2);
  EXPECT_NE(one.output.find("--max-gears 1 is below 2"), std::string::npos) << one.output;
  RunResult big = runGearbox("suggest-gears " + example("seed001_add.gbx") + " --trace " +
                             example("seed001_add.trace.jsonl") + " --max-gears 101");
  EXPECT_EQ(big.exitCode, 2) << big.output;
}

// suggest-gears --gear-fallback (issue 25 item 4): the whole table, references included,
// against a golden (GEARBOX_UPDATE_GOLDEN=1 rewrites it). On examples/mlp_rare_large the
// pad+dynamic suggestion keeps 8 and 512 and leaves the seven rare large batches to the
// dynamic fallback; the row below it is the best set that covers every size.
TEST(GearsCli, SuggestGearsFallbackTableGolden) {
  const std::string golden =
      std::string(GEARBOX_SOURCE_DIR) + "/tests/golden/suggest/mlp_rare_large_pad_dynamic.txt";
  RunResult r = runGearbox("suggest-gears " + example("mlp.gbx") + " --trace " +
                           example("mlp_rare_large.trace.jsonl") + " --gear-fallback pad+dynamic");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  if (std::getenv("GEARBOX_UPDATE_GOLDEN")) {
    gearbox::writeFileAtomic(golden, r.output);
    return;
  }
  EXPECT_EQ(r.output, gearbox::readFile(golden)) << "GEARBOX_UPDATE_GOLDEN=1 rewrites " << golden;
}

TEST(GearsCli, SuggestGearsFallbackErrorsExitWithTwo) {
  const std::string args =
      "suggest-gears " + example("mlp.gbx") + " --trace " + example("mlp_serving.trace.jsonl");
  // An unknown kind names the option and the choices, before the trace is read.
  RunResult bad = runGearbox(args + " --gear-fallback graph");
  EXPECT_EQ(bad.exitCode, 2) << bad.output;
  EXPECT_NE(bad.output.find("--gear-fallback 'graph': expected one of error, pad, dynamic, eager, "
                            "pad+dynamic, pad+eager"),
            std::string::npos)
      << bad.output;
  RunResult empty = runGearbox(args + " --gear-fallback ''");
  EXPECT_EQ(empty.exitCode, 2) << empty.output;
  // error makes every size a gear: 64 sizes fit 100 gears, not 10.
  RunResult few = runGearbox(args + " --gear-fallback error --max-gears 10 --no-references");
  EXPECT_EQ(few.exitCode, 2) << few.output;
  EXPECT_NE(few.output.find("every one must be a gear (--gear-fallback error runs only exact "
                            "gears), above the limit of 10 gears"),
            std::string::npos)
      << few.output;
  // Two symbols, exact gears chosen one by one: a product of lists cannot write them.
  const std::string model = ::testing::TempDir() + "two_symbols.gbx";
  const std::string trace = ::testing::TempDir() + "two_symbols.trace.jsonl";
  {
    std::ofstream m(model);
    m << "graph two(%a: f32[B, 4], %b: f32[C, 4]) {\n  %y = cat(%a, %b, dim=0)\n  return %y\n}\n";
    std::ofstream t(trace);
    for (int i = 0; i < 12; ++i)
      t << "{\"a\": [" << 1 + i % 3 << ", 4], \"b\": [" << 2 + i % 4 << ", 4]}\n";
  }
  const std::string two = "suggest-gears " + model + " --trace " + trace + " --no-references";
  RunResult product = runGearbox(two + " --gear-fallback eager --merge product");
  EXPECT_EQ(product.exitCode, 2) << product.output;
  EXPECT_NE(product.output.find("cannot write; use --merge zip"), std::string::npos)
      << product.output;
  EXPECT_EQ(runGearbox(two + " --gear-fallback eager").exitCode, 0);
  // The cat along the varying dims refuses padding: pad+eager cannot run there.
  RunResult pads = runGearbox(two + " --gear-fallback pad+eager");
  EXPECT_EQ(pads.exitCode, 2) << pads.output;
  EXPECT_NE(pads.output.find("--gear-fallback pad+eager pads calls up to a gear"),
            std::string::npos)
      << pads.output;
}

TEST(GearsCli, PadToCompilesOnceAndMatchesTheReference) {
  RunResult r = runGearbox("run " + example("seed002_masked_loss.gbx") + " --trace " +
                           example("seed002_masked_loss.trace.jsonl") +
                           " --mode geared --pad-to pred=5,20,4 --check-reference");
  EXPECT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("graph compiles 1,"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ge.dynamicDims = 5,5,5\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("agrees"), std::string::npos) << r.output;
  // A call above the pad shape is a clear error; set_dim_gears keeps TorchAir's 2..100 rule.
  RunResult small = runGearbox("run " + example("seed002_masked_loss.gbx") + " --trace " +
                               example("seed002_masked_loss.trace.jsonl") +
                               " --mode geared --pad-to pred=4,20,4");
  EXPECT_EQ(small.exitCode, 2);
  EXPECT_NE(small.output.find("exceeds the largest gear value 4"), std::string::npos)
      << small.output;
  RunResult one = runGearbox("run " + example("seed002_masked_loss.gbx") + " --trace " +
                             example("seed002_masked_loss.trace.jsonl") +
                             R"( --mode geared --gears '{"pred": {"0": [8]}}')");
  EXPECT_EQ(one.exitCode, 2);
  EXPECT_NE(one.output.find("Length of gears for dim index 0 in dim_gears must be in range "
                            "[2, 100], but got 1."),
            std::string::npos)
      << one.output;
  RunResult staticDim = runGearbox("run " + example("seed002_masked_loss.gbx") + " --trace " +
                                   example("seed002_masked_loss.trace.jsonl") +
                                   " --mode geared --pad-to pred=5,21,4");
  EXPECT_EQ(staticDim.exitCode, 2);
  EXPECT_NE(staticDim.output.find("dim 1 is declared static (size 20)"), std::string::npos)
      << staticDim.output;
}

}  // namespace
