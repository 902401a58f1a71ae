// Seed 000's workflow end to end: eager mode with iteration markers writes the compile log,
// `gearbox recompile-report` turns it into recompile_op_list.txt and flags exactly the ops
// whose shapes vary after step 3.
#include <gtest/gtest.h>

#include <fstream>

#include "cli_util.h"
#include "graph/file_io.h"
#include "temp_dir.h"

namespace gearbox {
namespace {

using testing_util::runGearbox;
using testing_util::shellQuote;
using testing_util::TempDir;

TEST(RecompileWorkflow, EagerLogThenReportFlagsExactlyTheVaryingOps) {
  TempDir dir;
  {
    // %x's batch varies; %b never does, so its Add must not be flagged.
    std::ofstream m(dir.file("demo.gbx"));
    m << "graph demo(%x: f32[B, 4], %w: f32[4, 3], %b: f32[3, 3]) {\n"
         "  %s = add(%x, %x)\n"
         "  %m = matmul(%s, %w)\n"
         "  %t = add(%b, %b)\n"
         "  return %m, %t\n"
         "}\n";
    std::ofstream t(dir.file("demo.jsonl"));
    for (int b : {2, 2, 2, 3, 4, 5})
      t << "{\"x\": [" << b << ", 4], \"w\": [4, 3], \"b\": [3, 3]}\n";
  }
  const std::string log = dir.file("run.log");
  auto r = runGearbox("run " + shellQuote(dir.file("demo.gbx")) + " --trace " +
                      shellQuote(dir.file("demo.jsonl")) +
                      " --mode eager -q --iter-markers --log " + shellQuote(log));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const std::string list = dir.file("recompile_op_list.txt");
  r = runGearbox("recompile-report " + shellQuote(log) + " -o " + shellQuote(list));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_EQ(readFile(list),
            "iter: 0\n\n"
            "iter: 1\n"
            "Add_float_ND_2_4__2_4,MatMul_float_ND_2_4__4_3,Add_float_ND_3_3__3_3\n"
            "iter: 2\n\n"
            "iter: 3\n\n"
            "iter: 4\n"
            "Add_float_ND_3_4__3_4,MatMul_float_ND_3_4__4_3\n"
            "iter: 5\n"
            "Add_float_ND_4_4__4_4,MatMul_float_ND_4_4__4_3\n"
            "iter: 6\n"
            "Add_float_ND_5_4__5_4,MatMul_float_ND_5_4__4_3\n");
  EXPECT_NE(
      r.output.find("dynamic-shape suspects (compiled after iter 3): 6 kernels of 2 op types"),
      std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("MatMul: 3 kernels compiled after iter 3 (input 0 dim 0 varies: 2..5)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("Add_float_ND_3_3__3_3 (iter"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gearbox
