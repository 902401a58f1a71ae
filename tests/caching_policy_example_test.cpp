// An example for CI suites that regression-test a caching policy from C++: run a model over a
// fixed trace and bound the counters exactly, the way `gearbox run --assert` does from the CLI.
// Copy this test and replace the model, trace and budgets with your own.
#include <gtest/gtest.h>

#include "driver/trace.h"
#include "executor/session.h"
#include "graph/text.h"

namespace gearbox {
namespace {

TEST(CachingPolicyExample, FourOpModelStaysWithinItsCompileBudget) {
  const std::string dir = std::string(GEARBOX_SOURCE_DIR) + "/examples/";
  const Graph g = loadGraph(dir + "four_ops.gbx");
  const auto trace = cli::loadTrace(dir + "four_ops.trace.jsonl", g);

  SessionOptions o;
  o.mode = Mode::kAuto;  // the policy under test: automatic dynamic
  o.recompileLimit = 4;
  Session s(g, o);
  for (size_t i = 0; i < trace.size(); ++i) s.run(makeInputs(g, trace[i], i));

  const SessionStats& st = s.stats();
  // Budgets: the first call (batch 1) compiles a static plan; the first change of batch makes
  // that dim dynamic, and one dynamic plan serves every later batch.
  EXPECT_LE(st.graphCompiles, 2);
  EXPECT_EQ(st.fallbackRuns, 0);    // never hit the recompile limit
  EXPECT_EQ(st.kernelCompiles, 6);  // 3 kernels after fusion, static and shape-generic
  EXPECT_EQ(st.passesFired, (std::vector<std::string>{"fuse-cat-index-select", "dce"}));
}

}  // namespace
}  // namespace gearbox
