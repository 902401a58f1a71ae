// Golden tests of `gearbox gears`: run the real binary, compare stdout+stderr and the exit code.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "cli_util.h"

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
