// Geared mode's hybrid fallbacks and lazy gears (issue 25): --gear-fallback dynamic and eager
// run a call that is not a gear the way dynamic and eager mode run it, counted exactly and
// matching the reference executor; --gear-compile lazy compiles a gear in the call that first
// uses it, so unused gears never compile and start-up moves into the first calls.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "executor/modes/geared.h"
#include "executor/session.h"
#include "graph/error.h"
#include "test_models.h"

namespace gearbox {
namespace {

using testing_models::fourOps;

SessionOptions geared(GearFallback fallback, GearCompile compile = GearCompile::kEager) {
  SessionOptions o;
  o.mode = Mode::kGeared;
  gearOptions(o).fallback = fallback;
  gearOptions(o).compile = compile;
  return o;
}

// fourOps with gears x: {2, 4, 8}: 3 gears, 3 kernels each (add, matmul, and cat +
// index_select, which the passes fuse into one cat_gather).
std::vector<Tensor> batch(const Session& s, int64_t n, uint64_t seed) {
  return makeInputs(s.graph(), {Shape{n, 4}, Shape{4, 3}}, seed);
}

void expectMatchesReference(const Session& s, const std::vector<Tensor>& in,
                            const std::vector<Tensor>& out, int64_t n) {
  const auto ref = referenceRun(s.graph(), in);
  ASSERT_EQ(out.size(), ref.size());
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(out[i].shape(), ref[i].shape()) << "batch " << n;
    EXPECT_LE(maxAbsDiff(out[i], ref[i]), 1e-5) << "batch " << n;
  }
}

// The acceptance trace: gears 2, 4, 8 and calls above the largest (9, 12, 20).
const std::vector<int64_t> kTrace = {2, 9, 4, 12, 9, 8, 20};
constexpr int64_t kAboveLargest = 4;  // 9, 12, 9, 20

TEST(GearedFallback, DynamicRunsCallsAboveTheLargestGearOnOneDynamicPlan) {
  Session s(fourOps(), geared(GearFallback::kDynamic));
  set_dim_gears(s, "x", {{0, {2, 4, 8}}});
  compileGears(s);
  const int64_t gearKernels = s.stats().kernelCompiles;
  EXPECT_EQ(gearKernels, 9);
  for (size_t i = 0; i < kTrace.size(); ++i) {
    auto in = batch(s, kTrace[i], 10 + i);
    expectMatchesReference(s, in, s.run(in), kTrace[i]);
  }
  const SessionStats& st = s.stats();
  EXPECT_EQ(st.graphCompiles, 3 + 1);  // the gears and the one dynamic plan
  const GearedCounters gc = gearedCounters(st);
  EXPECT_EQ(gc.gears, 3);
  EXPECT_EQ(gc.fallbackCalls, kAboveLargest);
  EXPECT_EQ(gc.paddedCalls, 0);
  EXPECT_EQ(st.modeCounter("fallback_calls"), kAboveLargest);
  EXPECT_EQ(st.planCacheMisses, 1);  // the call that compiled the dynamic plan
  EXPECT_EQ(st.planCacheHits, 3 + 3);
  EXPECT_EQ(st.fallbackRuns, 0);  // the recompile limit's fallback is another thing
  // Only the first call outside the gears compiled (the dynamic plan and its kernels).
  const auto& h = s.history();
  ASSERT_EQ(h.size(), kTrace.size());
  for (size_t i = 0; i < h.size(); ++i) {
    const GearedCall c = gearedCall(h[i]);
    const bool outside = kTrace[i] > 8;
    EXPECT_EQ(c.fallback, outside ? "dynamic" : "") << i;
    EXPECT_EQ(c.gear, outside ? -1 : (kTrace[i] == 2 ? 0 : kTrace[i] == 4 ? 1 : 2)) << i;
    EXPECT_EQ(h[i].graphCompiled, i == 1) << i;
    EXPECT_EQ(h[i].kernelsCompiled.empty(), i != 1) << i;
    if (outside) {
      EXPECT_EQ(h[i].planId, 4u) << i;  // numbered after the gears' 1, 2, 3
    }
  }
  EXPECT_NE(h[1].reason.find("gear fallback dynamic"), std::string::npos) << h[1].reason;
  EXPECT_EQ(st.kernelCompiles, gearKernels + static_cast<int64_t>(h[1].kernelsCompiled.size()));
  EXPECT_GT(h[3].modeled.hostDynamicUs, 0);  // op by op: host shape inference per op

  // MODELED as dynamic mode costs the same calls: the compile of its plan, then op by op.
  SessionOptions dynOptions;
  dynOptions.mode = Mode::kDynamic;
  Session dyn(fourOps(), dynOptions);
  dyn.run(batch(dyn, 9, 11));
  dyn.run(batch(dyn, 12, 13));
  EXPECT_EQ(dyn.stats().graphCompiles, 1);
  EXPECT_DOUBLE_EQ(h[1].modeled.compileUs, dyn.history()[0].modeled.compileUs);
  EXPECT_DOUBLE_EQ(h[3].modeled.computeUs, dyn.history()[1].modeled.computeUs);
  EXPECT_DOUBLE_EQ(h[3].modeled.hostDynamicUs, dyn.history()[1].modeled.hostDynamicUs);
  EXPECT_EQ(h[3].launches, dyn.history()[1].launches);
  EXPECT_EQ(h[3].syncs, dyn.history()[1].syncs);
}

TEST(GearedFallback, EagerRunsOpByOpCompilingKernelsPerNewOpShape) {
  Session s(fourOps(), geared(GearFallback::kEager));
  set_dim_gears(s, "x", {{0, {2, 4, 8}}});
  compileGears(s);
  for (size_t i = 0; i < kTrace.size(); ++i) {
    auto in = batch(s, kTrace[i], 10 + i);
    expectMatchesReference(s, in, s.run(in), kTrace[i]);
  }
  const SessionStats& st = s.stats();
  EXPECT_EQ(st.graphCompiles, 3);  // the gears only: eager compiles no plan
  EXPECT_EQ(gearedCounters(st).fallbackCalls, kAboveLargest);
  // Three new batch sizes (9, 12, 20), three kernels each; the second 9 compiles nothing.
  EXPECT_EQ(st.kernelCompiles, 9 + 3 * 3);
  const auto& h = s.history();
  EXPECT_EQ(h[1].kernelsCompiled.size(), 3u);
  EXPECT_EQ(h[3].kernelsCompiled.size(), 3u);
  EXPECT_TRUE(h[4].kernelsCompiled.empty());
  EXPECT_EQ(h[6].kernelsCompiled.size(), 3u);
  for (size_t i : {1, 3, 4, 6}) {
    EXPECT_EQ(gearedCall(h[i]).fallback, "eager") << i;
    EXPECT_FALSE(h[i].graphCompiled) << i;
    EXPECT_EQ(h[i].planId, 0u) << i;
    EXPECT_EQ(h[i].launches, 3) << i;  // one launch per op
  }
  // The same kernels and MODELED op-by-op terms as eager mode running those sizes.
  SessionOptions eagerOptions;
  eagerOptions.mode = Mode::kEager;
  Session eager(fourOps(), eagerOptions);
  eager.run(batch(eager, 9, 11));
  EXPECT_EQ(eager.stats().kernelCompiles, 3);
  EXPECT_DOUBLE_EQ(h[1].modeled.compileUs, eager.history()[0].modeled.compileUs);
  EXPECT_DOUBLE_EQ(h[1].modeled.computeUs, eager.history()[0].modeled.computeUs);
  EXPECT_DOUBLE_EQ(h[1].modeled.hostDynamicUs, eager.history()[0].modeled.hostDynamicUs);
}

TEST(GearedFallback, DynamicSpecialisesSizeOneAsDynamicModeDoes) {
  Session s(fourOps(), geared(GearFallback::kDynamic));
  set_dim_gears(s, "x", {{0, {2, 4}}});
  for (int64_t n : {1, 9, 1, 3}) {
    auto in = batch(s, n, 7 + n);
    expectMatchesReference(s, in, s.run(in), n);
  }
  // Size 1 gets a static plan, as Dynamo and dynamic mode specialise it; 9 and 3 share the
  // plan with dynamic dims.
  EXPECT_EQ(s.stats().graphCompiles, 2 + 2);
  EXPECT_EQ(gearedCounters(s.stats()).fallbackCalls, 4);
}

// vLLM's hybrid (pad+dynamic, pad+eager): a call a gear covers pads up to it; only the calls
// above the largest gear take the fallback path.
TEST(GearedFallback, PadThenFallbackPadsCoveredCallsAndRunsTheRestOnTheFallback) {
  const std::vector<int64_t> trace = {2, 3, 9, 4, 7, 12, 8, 20, 3};
  for (GearFallback f : {GearFallback::kPadDynamic, GearFallback::kPadEager}) {
    Session s(fourOps(), geared(f));
    set_dim_gears(s, "x", {{0, {2, 4, 8}}});
    for (size_t i = 0; i < trace.size(); ++i) {
      auto in = batch(s, trace[i], 30 + i);
      expectMatchesReference(s, in, s.run(in), trace[i]);
    }
    const SessionStats& st = s.stats();
    const GearedCounters gc = gearedCounters(st);
    EXPECT_EQ(gc.paddedCalls, 3) << gearFallbackName(f);    // 3 -> 4, 7 -> 8, 3 -> 4
    EXPECT_EQ(gc.fallbackCalls, 3) << gearFallbackName(f);  // 9, 12, 20
    const bool dynamic = f == GearFallback::kPadDynamic;
    EXPECT_EQ(st.graphCompiles, dynamic ? 3 + 1 : 3) << gearFallbackName(f);
    // Eager: three new batch sizes above the gears, three kernels each.
    if (!dynamic) {
      EXPECT_EQ(st.kernelCompiles, 9 + 3 * 3);
    }
    const auto& h = s.history();
    for (size_t i = 0; i < trace.size(); ++i) {
      const GearedCall c = gearedCall(h[i]);
      EXPECT_EQ(c.fallback, trace[i] > 8 ? (dynamic ? "dynamic" : "eager") : "") << i;
      EXPECT_EQ(c.padded, trace[i] == 3 || trace[i] == 7) << i;
    }
  }
  EXPECT_EQ(parseGearFallback("pad+dynamic"), GearFallback::kPadDynamic);
  EXPECT_EQ(parseGearFallback("pad+eager"), GearFallback::kPadEager);
  EXPECT_TRUE(gearFallbackPads(GearFallback::kPadEager));
  EXPECT_FALSE(gearFallbackPads(GearFallback::kDynamic));
  EXPECT_EQ(gearFallbackPath(GearFallback::kPadDynamic), GearFallback::kDynamic);
  EXPECT_EQ(gearFallbackPath(GearFallback::kPad), GearFallback::kPad);
}

TEST(GearedFallback, ErrorAndPadKeepTheirCountersAndPadToRefusesTheNewFallbacks) {
  Session s(fourOps(), geared(GearFallback::kError));
  set_dim_gears(s, "x", {{0, {2, 4}}});
  EXPECT_THROW(s.run(batch(s, 9, 1)), Error);
  // No fallback counter without a dynamic or eager fallback: the report stays as it was.
  EXPECT_EQ(s.stats().modeCounters.size(), 4u);
  for (GearFallback f : {GearFallback::kDynamic, GearFallback::kEager, GearFallback::kPadDynamic,
                         GearFallback::kPadEager}) {
    SessionOptions o = geared(f);
    gearOptions(o).padTo = {{"x", Shape{8, 4}}};
    try {
      Session bad(fourOps(), o);
      ADD_FAILURE() << "expected Error(kConfig)";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kConfig);
      EXPECT_NE(std::string(e.what()).find(gearFallbackName(f)), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parseGearFallback("dynamic"), GearFallback::kDynamic);
  EXPECT_EQ(parseGearCompile("lazy"), GearCompile::kLazy);
  EXPECT_THROW(parseGearFallback("graph"), Error);
  EXPECT_THROW(parseGearCompile("later"), Error);
}

TEST(GearedLazy, UnusedGearsNeverCompile) {
  Session s(fourOps(), geared(GearFallback::kError, GearCompile::kLazy));
  set_dim_gears(s, "x", {{0, {2, 4, 8, 16}}});
  compileGears(s);
  EXPECT_EQ(s.stats().graphCompiles, 0);
  EXPECT_EQ(s.stats().kernelCompiles, 0);
  EXPECT_EQ(s.stats().startup.graphCompiles, 0);
  EXPECT_EQ(s.stats().startup.modeledCompileUs, 0);
  for (int64_t n : {2, 8, 2, 8}) {
    auto in = batch(s, n, n);
    expectMatchesReference(s, in, s.run(in), n);
  }
  const SessionStats& st = s.stats();
  EXPECT_EQ(st.graphCompiles, 2);  // gears 4 and 16 never ran, never compiled
  EXPECT_EQ(st.kernelCompiles, 6);
  EXPECT_EQ(st.planCacheMisses, 2);
  EXPECT_EQ(st.planCacheHits, 2);
  const GearedCounters gc = gearedCounters(st);
  EXPECT_EQ(gc.gears, 4);
  EXPECT_EQ(gc.gearsCompiledOnFirstUse, 2);
  const auto& h = s.history();
  EXPECT_TRUE(h[0].graphCompiled);
  EXPECT_TRUE(h[1].graphCompiled);
  EXPECT_FALSE(h[2].graphCompiled);
  EXPECT_NE(h[0].reason.find("gear 0 compiled on first use"), std::string::npos) << h[0].reason;
  EXPECT_EQ(gearedCall(h[1]).gear, 2);
  EXPECT_GT(h[0].modeled.compileUs, 0);  // the gear's compile is the call's
}

// MODELED device memory: a lazy gear is resident from its first use, in the graph pool as an
// up-front gear is; once every gear is used the figures are eager's.
TEST(GearedLazy, AGearIsResidentInModeledMemoryFromItsFirstUse) {
  for (GraphPool pool : {GraphPool::kShared, GraphPool::kSeparate}) {
    auto run = [&](GearCompile compile, const std::vector<int64_t>& sizes) {
      SessionOptions o = geared(GearFallback::kError, compile);
      o.graphPool = pool;
      auto s = std::make_unique<Session>(fourOps(), o);
      set_dim_gears(*s, "x", {{0, {2, 4, 8}}});
      compileGears(*s);
      for (int64_t n : sizes) s->run(batch(*s, n, n));
      return s;
    };
    const auto lazyOne = run(GearCompile::kLazy, {8});
    EXPECT_EQ(lazyOne->stats().memory.residentPlans, 1);
    const auto lazyAll = run(GearCompile::kLazy, {2, 4, 8});
    const auto eagerAll = run(GearCompile::kEager, {2, 4, 8});
    EXPECT_EQ(lazyAll->stats().memory.residentPlans, 3);
    EXPECT_EQ(lazyAll->stats().memory.workspaceBytes, eagerAll->stats().memory.workspaceBytes);
    EXPECT_EQ(lazyAll->stats().memory.residentBytes, eagerAll->stats().memory.residentBytes);
    // Gear 8 is the largest: alone it holds what the shared pool holds for all three.
    if (pool == GraphPool::kShared)
      EXPECT_EQ(lazyOne->stats().memory.workspaceBytes, eagerAll->stats().memory.workspaceBytes);
    else
      EXPECT_LT(lazyOne->stats().memory.workspaceBytes, eagerAll->stats().memory.workspaceBytes);
  }
}

TEST(GearedLazy, SameCompilesAsEagerWhenEveryGearIsUsedStartUpMovesToTheFirstCall) {
  auto runAll = [](GearCompile compile) {
    auto s = std::make_unique<Session>(fourOps(), geared(GearFallback::kError, compile));
    set_dim_gears(*s, "x", {{0, {2, 4, 8}}});
    compileGears(*s);
    for (int64_t n : {2, 4, 8, 4}) s->run(batch(*s, n, n));
    return s;
  };
  const auto eager = runAll(GearCompile::kEager);
  const auto lazy = runAll(GearCompile::kLazy);
  const SessionStats &e = eager->stats(), &l = lazy->stats();
  EXPECT_EQ(e.graphCompiles, 3);
  EXPECT_EQ(l.graphCompiles, 3);
  EXPECT_EQ(e.kernelCompiles, l.kernelCompiles);
  EXPECT_NEAR(e.modeled.compileUs, l.modeled.compileUs, 1e-9 * e.modeled.compileUs);
  EXPECT_EQ(e.startup.graphCompiles, 3);
  EXPECT_EQ(l.startup.graphCompiles, 0);
  // MODELED start-up: lower with lazy; MODELED first call: higher with lazy (it compiles).
  EXPECT_GT(e.startup.modeledCompileUs, 0);
  EXPECT_DOUBLE_EQ(e.startup.modeledCompileUs, e.modeled.compileUs);
  EXPECT_LT(l.startup.modeledCompileUs, e.startup.modeledCompileUs);
  EXPECT_GT(l.startup.firstCallModeledUs, e.startup.firstCallModeledUs);
  EXPECT_DOUBLE_EQ(l.startup.firstCallModeledUs, lazy->history()[0].modeledDeviceUs);
  EXPECT_EQ(gearedCounters(e).gearsCompiledOnFirstUse, 0);
  EXPECT_EQ(gearedCounters(l).gearsCompiledOnFirstUse, 3);
}

TEST(GearedLazy, PadFallbackCompilesThePadTargetOnFirstUse) {
  Session s(fourOps(), geared(GearFallback::kPad, GearCompile::kLazy));
  set_dim_gears(s, "x", {{0, {2, 4, 8}}});
  for (int64_t n : {3, 3, 7}) {
    auto in = batch(s, n, n);
    expectMatchesReference(s, in, s.run(in), n);
  }
  const SessionStats& st = s.stats();
  EXPECT_EQ(st.graphCompiles, 2);  // gear 4 (for 3) and gear 8 (for 7); gear 2 never
  EXPECT_EQ(gearedCounters(st).paddedCalls, 3);
  EXPECT_EQ(gearedCounters(st).gearsCompiledOnFirstUse, 2);
  EXPECT_TRUE(s.history()[0].graphCompiled);
  EXPECT_FALSE(s.history()[1].graphCompiled);
  EXPECT_EQ(gearedCall(s.history()[2]).gear, 2);
}

TEST(GearedLazy, WithTheDynamicFallbackOnlyTheDynamicPlanCompiles) {
  Session s(fourOps(), geared(GearFallback::kDynamic, GearCompile::kLazy));
  set_dim_gears(s, "x", {{0, {2, 4, 8}}});
  for (int64_t n : {20, 12}) {
    auto in = batch(s, n, n);
    expectMatchesReference(s, in, s.run(in), n);
  }
  EXPECT_EQ(s.stats().graphCompiles, 1);
  EXPECT_EQ(gearedCounters(s.stats()).fallbackCalls, 2);
  EXPECT_EQ(gearedCounters(s.stats()).gearsCompiledOnFirstUse, 0);
  EXPECT_EQ(s.history()[0].planId, 1u);  // the first plan of a session with lazy gears
}

}  // namespace
}  // namespace gearbox
