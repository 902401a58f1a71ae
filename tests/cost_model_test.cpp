#include "executor/cost_model.h"

#include <gtest/gtest.h>

#include "executor/session.h"
#include "graph/error.h"
#include "test_models.h"

namespace gearbox {
namespace {

TEST(CostModel, BundledDefaultsFileEqualsTheBuiltInDefaults) {
  const CostModel builtIn;
  const CostModel file =
      loadCostModel(std::string(GEARBOX_SOURCE_DIR) + "/examples/cost_model.json");
  EXPECT_EQ(costModelToJson(file), costModelToJson(builtIn));
}

TEST(CostModel, OverridesAndErrors) {
  CostModel m;
  applyCostOverride(m, "launch_us=3");
  applyCostOverride(m, "kernel_compile_us.MatMul=500");
  applyCostOverride(m, "sync_policy=end_only");
  EXPECT_EQ(m.launchUs, 3);
  EXPECT_EQ(m.kernelCompile("MatMul"), 500);
  EXPECT_EQ(m.syncPolicy, SyncPolicy::kEndOnly);
  EXPECT_THROW(applyCostOverride(m, "launch_us"), Error);
  EXPECT_THROW(applyCostOverride(m, "launch_us=abc"), Error);
  EXPECT_THROW(applyCostOverride(m, "warp_us=1"), Error);
  EXPECT_THROW(applyCostOverride(m, "sync_policy=sometimes"), Error);
  EXPECT_THROW(applyCostOverride(m, "sync_us=-1"), Error);
  EXPECT_THROW(applyCostJson(m, "{not json", "x.json"), Error);
}

TEST(CostModel, ModeledTimeFollowsTheCounters) {
  // Seed 001 static: 5 kernel compiles (Add 40 us), 5 graph compiles (2000 us), 7 whole-graph
  // launches (8 us) and 7 syncs (15 us).
  Session s(testing_models::seed001());
  for (int64_t n : {2, 3, 4, 4, 5, 5, 6})
    s.run(makeInputs(s.graph(), testing_models::seed001Sig(n), 0));
  EXPECT_DOUBLE_EQ(s.stats().modeledCompileUs, 5 * 40 + 5 * 2000);
  EXPECT_DOUBLE_EQ(s.stats().modeledDeviceUs, 5 * 40 + 5 * 2000 + 7 * 8 + 7 * 15);
  // Dynamic, per-op syncs: 1 generic kernel + 1 graph compile, 7 launches and 7 syncs.
  SessionOptions o;
  o.mode = Mode::kDynamic;
  o.cost.launchUs = 3;
  Session d(testing_models::seed001(), o);
  for (int64_t n : {2, 3, 4, 4, 5, 5, 6})
    d.run(makeInputs(d.graph(), testing_models::seed001Sig(n), 0));
  EXPECT_DOUBLE_EQ(d.stats().modeledDeviceUs, 40 + 2000 + 7 * 3 + 7 * 15);
}

}  // namespace
}  // namespace gearbox
