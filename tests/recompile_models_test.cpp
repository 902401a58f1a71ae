// The recompile report on gearbox's own logs: each bundled model runs its trace in eager mode
// with iteration markers, and `gearbox recompile-report` must analyse every kernel name in the
// log (no "not in gearbox kernel-name format") with the exact summary kept in
// tests/golden/recompile_models/<model>.txt. Set GEARBOX_UPDATE_GOLDEN=1 to rewrite the goldens
// after a deliberate change, then review the diff.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cli_util.h"
#include "temp_dir.h"

namespace gearbox {
namespace {

using testing_util::example;
using testing_util::runGearbox;
using testing_util::shellQuote;
using testing_util::TempDir;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class RecompileModels : public ::testing::TestWithParam<std::string> {};

TEST_P(RecompileModels, EagerLogIsFullyAnalysed) {
  const std::string model = GetParam();
  TempDir dir;
  const std::string log = dir.file("run.log");
  auto r = runGearbox("run " + shellQuote(example(model + ".gbx")) + " --trace " +
                      shellQuote(example(model + ".trace.jsonl")) +
                      " --mode eager -q --iter-markers --log " + shellQuote(log));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  r = runGearbox("recompile-report " + shellQuote(log) + " --stable-steps 1 -o " +
                 shellQuote(dir.file("list.txt")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_EQ(r.output.find("not in gearbox kernel-name format"), std::string::npos) << r.output;
  // The last line names the (temporary) list path; the golden holds everything before it.
  const size_t tail = r.output.rfind("op list written to ");
  ASSERT_NE(tail, std::string::npos) << r.output;
  const std::string summary = r.output.substr(0, tail);
  const std::string golden =
      std::string(GEARBOX_SOURCE_DIR) + "/tests/golden/recompile_models/" + model + ".txt";
  if (std::getenv("GEARBOX_UPDATE_GOLDEN")) {
    std::ofstream(golden, std::ios::binary) << summary;
  }
  EXPECT_EQ(summary, slurp(golden));
}

INSTANTIATE_TEST_SUITE_P(Bundled, RecompileModels,
                         ::testing::Values("shufflenet_stage", "shufflenet_view",
                                           "seed002_masked_loss"));

}  // namespace
}  // namespace gearbox
