// Mode counters on seed 001's trace (PyTorch's own reference counts: sizes 2,3,4,4,5,5,6 ->
// static 5 compiles, automatic dynamic 2, dynamic 1) and the recompile-limit policies, on both
// simulated devices. Every counter is exact.
#include "executor/session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "executor/modes/gear_options.h"
#include "executor/modes/geared.h"
#include "executor/output_pool.h"
#include "graph/error.h"
#include "test_models.h"

namespace gearbox {
namespace {

using testing_models::seed001;
using testing_models::seed001Sig;

const std::vector<int64_t> kSeedTrace = {2, 3, 4, 4, 5, 5, 6};

struct Expected {
  Mode mode;
  int64_t graphCompiles, kernelCompiles, planHits, launches, syncs;
};

class SeedTrace : public ::testing::TestWithParam<std::tuple<Expected, DeviceKind>> {};

TEST_P(SeedTrace, CountsMatchReference) {
  const auto [e, device] = GetParam();
  SessionOptions o;
  o.mode = e.mode;
  o.device = device;
  Session s(seed001(), o);
  for (size_t i = 0; i < kSeedTrace.size(); ++i) {
    auto in = makeInputs(s.graph(), seed001Sig(kSeedTrace[i]), i);
    auto out = s.run(in);
    auto ref = referenceRun(s.graph(), in);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].equals(ref[0])) << "iteration " << i;
  }
  const SessionStats& st = s.stats();
  EXPECT_EQ(st.iterations, 7);
  EXPECT_EQ(st.graphCompiles, e.graphCompiles);
  EXPECT_EQ(st.kernelCompiles, e.kernelCompiles);
  EXPECT_EQ(st.planCacheHits, e.planHits);
  EXPECT_EQ(st.launches, e.launches);
  EXPECT_EQ(st.syncs, e.syncs);
  EXPECT_EQ(st.allocations, 0);  // one Add: no intermediates, no arena
  EXPECT_EQ(st.fallbackRuns, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, SeedTrace,
    ::testing::Combine(::testing::Values(Expected{Mode::kStatic, 5, 5, 2, 7, 7},
                                         Expected{Mode::kEager, 0, 5, 0, 7, 7},
                                         Expected{Mode::kDynamic, 1, 1, 6, 7, 7},
                                         Expected{Mode::kAuto, 2, 2, 5, 7, 7},
                                         // one capture per signature, one generic kernel
                                         Expected{Mode::kReduceOverhead, 5, 1, 2, 7, 7}),
                       ::testing::Values(DeviceKind::kInline, DeviceKind::kStream)),
    [](const auto& info) {
      return modeIdentifier(std::get<0>(info.param).mode) + "_" +
             deviceKindName(std::get<1>(info.param));
    });

TEST(Session, StaticRecompileReasonsNameInputDimAndValues) {
  Session s(seed001());
  for (int64_t n : {2, 3}) s.run(makeInputs(s.graph(), seed001Sig(n), 0));
  const auto& h = s.history();
  EXPECT_EQ(h[0].reason, "first call");
  EXPECT_EQ(h[1].reason, "input 'x1' size mismatch at dim 0: expected 2, actual 3");
  ASSERT_EQ(h[1].guardFailures.size(), 2u);
  EXPECT_EQ(h[1].guardFailures[1], "plan #" + std::to_string(h[0].planId) +
                                       ": input 'x2' size mismatch at dim 0: expected 2, actual 3");
  EXPECT_EQ(h[1].kernelsCompiled, std::vector<std::string>{"Add_float_ND_3_2__3_2"});
}

TEST(Session, FourOpModelCountsPerMode) {
  // 4 kernels (add, matmul, cat, index_select); 3 intermediates (s, m, c).
  struct Case {
    Mode mode;
    SyncPolicy policy;
    int64_t launches, syncs, allocations, graphCompiles, kernelCompiles;
  };
  const std::vector<int64_t> batches = {2, 3, 3, 5};
  for (const Case& c : {Case{Mode::kStatic, SyncPolicy::kPerOp, 4, 4, 3, 3, 12},
                        Case{Mode::kEager, SyncPolicy::kPerOp, 16, 4, 12, 0, 12},
                        Case{Mode::kDynamic, SyncPolicy::kPerOp, 16, 16, 12, 1, 4},
                        Case{Mode::kDynamic, SyncPolicy::kEndOnly, 16, 4, 12, 1, 4},
                        Case{Mode::kAuto, SyncPolicy::kPerOp, 13, 13, 10, 2, 8}}) {
    for (DeviceKind device : {DeviceKind::kInline, DeviceKind::kStream}) {
      SessionOptions o;
      o.mode = c.mode;
      o.device = device;
      o.cost.syncPolicy = c.policy;
      // Counts the four ops as written; the fused model's counts are in passes_test.cpp.
      o.runPasses = false;
      Session s(testing_models::fourOps(), o);
      for (size_t i = 0; i < batches.size(); ++i) {
        auto in = makeInputs(s.graph(), {Shape{batches[i], 4}, Shape{4, 3}}, i);
        auto out = s.run(in);
        auto ref = referenceRun(s.graph(), in);
        EXPECT_LE(maxAbsDiff(out[0], ref[0]), 1e-5);
      }
      const SessionStats& st = s.stats();
      SCOPED_TRACE(std::string(modeName(c.mode)) + "/" + deviceKindName(device));
      EXPECT_EQ(st.launches, c.launches);
      EXPECT_EQ(st.syncs, c.syncs);
      EXPECT_EQ(st.allocations, c.allocations);
      EXPECT_EQ(st.graphCompiles, c.graphCompiles);
      EXPECT_EQ(st.kernelCompiles, c.kernelCompiles);
    }
  }
}

TEST(Session, RecompileLimitFallbackServesCachedPlansAndRunsTheRestDynamically) {
  SessionOptions o;
  o.recompileLimit = 3;
  Session s(seed001(), o);
  for (int64_t n : {2, 3, 4, 5, 6, 7, 2, 3}) {
    auto in = makeInputs(s.graph(), seed001Sig(n), n);
    auto out = s.run(in);
    EXPECT_TRUE(out[0].equals(referenceRun(s.graph(), in)[0]));
  }
  const SessionStats& st = s.stats();
  EXPECT_EQ(st.graphCompiles, 3);
  EXPECT_EQ(st.fallbackRuns, 3);
  EXPECT_EQ(st.planCacheHits, 2);
  EXPECT_EQ(st.kernelCompiles, 3);  // fallback kernels are shape-generic and not cached
  EXPECT_TRUE(s.history()[3].fallback);
  EXPECT_EQ(s.history()[3].reason, "input 'x1' size mismatch at dim 0: expected 4, actual 5");
}

TEST(Session, RecompileLimitErrorCarriesTheLastReason) {
  SessionOptions o;
  o.recompileLimit = 3;
  o.onRecompileLimit = OnRecompileLimit::kError;
  Session s(seed001(), o);
  for (int64_t n : {2, 3, 4}) s.run(makeInputs(s.graph(), seed001Sig(n), 0));
  try {
    s.run(makeInputs(s.graph(), seed001Sig(5), 0));
    FAIL() << "expected the recompile limit error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kLimit);
    EXPECT_STREQ(e.what(),
                 "hit recompile_limit (3); last reason: input 'x1' size mismatch at dim 0: "
                 "expected 4, actual 5");
  }
}

TEST(Session, AutoWithMarkDynamicCompilesOnceAndSpecialisesSizeOne) {
  SessionOptions o;
  o.mode = Mode::kAuto;
  o.dynamicDims = parseDimMarks("x1:0,x2:0");
  Session s(seed001(), o);
  for (int64_t n : {2, 3, 4, 1, 5}) s.run(makeInputs(s.graph(), seed001Sig(n), 0));
  // One dynamic plan for sizes >= 2; size 1 is specialised (as Dynamo does): 2 compiles.
  EXPECT_EQ(s.stats().graphCompiles, 2);
  EXPECT_TRUE(s.history()[3].graphCompiled);
  EXPECT_FALSE(s.history()[4].graphCompiled);
}

TEST(Session, AutoWithMarkStaticKeepsRecompiling) {
  SessionOptions o;
  o.mode = Mode::kAuto;
  o.staticDims = parseDimMarks("x1:0,x2:0");
  Session s(seed001(), o);
  for (int64_t n : {2, 3, 4, 4}) s.run(makeInputs(s.graph(), seed001Sig(n), 0));
  EXPECT_EQ(s.stats().graphCompiles, 3);
}

TEST(Session, KernelCacheCapacityEvictsLeastRecentlyUsed) {
  SessionOptions o;
  o.mode = Mode::kEager;
  o.kernelCacheCapacity = 2;
  Session s(seed001(), o);
  for (int64_t n : {2, 3, 4, 2}) s.run(makeInputs(s.graph(), seed001Sig(n), 0));
  const SessionStats& st = s.stats();
  EXPECT_EQ(st.kernelCompiles, 4);  // 2 was evicted by 4 and compiled again
  EXPECT_EQ(st.kernelCache.evictions, 2);
  EXPECT_EQ(st.kernelCache.size, 2);
}

TEST(Session, PlanCacheCapacityEvicts) {
  SessionOptions o;
  o.planCacheCapacity = 1;
  Session s(seed001(), o);
  for (int64_t n : {2, 3, 2}) s.run(makeInputs(s.graph(), seed001Sig(n), 0));
  EXPECT_EQ(s.stats().graphCompiles, 3);
  EXPECT_EQ(s.stats().planCache.evictions, 2);
  EXPECT_EQ(s.stats().kernelCompiles, 2);  // the kernel cache still had Add 2x2
}

TEST(Session, BadInputsAreErrorsNamingInputAndDim) {
  Session s(testing_models::fourOps());
  auto bad = makeInputs(s.graph(), {Shape{2, 4}, Shape{4, 3}}, 0);
  bad[1] = Tensor(DType::kF32, {5, 3});
  try {
    s.run(bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "input 'w' dim 0: declared 4, got 5");
  }
  bad[1] = Tensor(DType::kI32, {4, 3});
  EXPECT_THROW(s.run(bad), Error);
  EXPECT_EQ(s.stats().iterations, 0);
}

TEST(Session, OutOfRangeRuntimeIndexIsAClearErrorInEveryMode) {
  GraphBuilder b("gather");
  auto x = b.input("x", DType::kF32, {kAnyDim, 3});
  auto i = b.input("i", DType::kI64, {2});
  b.output(b.indexSelect(x, i, 0, "o"));
  const Graph g = b.build();
  for (Mode m : modes(ModeSet::kWithoutGears)) {
    for (DeviceKind d : {DeviceKind::kInline, DeviceKind::kStream}) {
      SessionOptions o;
      o.mode = m;
      o.device = d;
      Session s(g, o);
      std::vector<Tensor> in = {randomTensor(DType::kF32, {4, 3}, 1), Tensor(DType::kI64, {2})};
      in[1].as<int64_t>()[1] = 4;
      try {
        s.run(in);
        ADD_FAILURE() << modeName(m) << ": expected an index error";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kIndex) << e.what();
        EXPECT_NE(std::string(e.what()).find("op %o = index_select: input 1 (%i)"),
                  std::string::npos)
            << e.what();
      }
    }
  }
}

TEST(Session, StaticPlanRunReusesItsArena) {
  Session s(testing_models::fourOps());
  for (int k = 0; k < 3; ++k) s.run(makeInputs(s.graph(), {Shape{6, 4}, Shape{4, 3}}, k));
  EXPECT_EQ(s.stats().graphCompiles, 1);
  EXPECT_EQ(s.stats().allocations, 1);  // the arena, at compile time; runs allocate nothing
  // s (6x4) and m (6x3) are both live when c is written; reuse keeps peak below the sum.
  EXPECT_GT(s.stats().peakBytes, 0);
}

// ---- the output pool (executor/output_pool.h) ----------------------------------------------

TEST(SessionOutputPool, ServesAFreedBufferOfTheSameRoundedSize) {
  OutputPool pool(1 << 20);
  const void* first = nullptr;
  {
    Tensor t = pool.take(DType::kF32, Shape{3, 5});  // 60 bytes: served at 64
    first = t.data();
  }
  Tensor u = pool.take(DType::kF32, Shape{2, 7});  // 56 bytes: 64 too
  EXPECT_EQ(u.data(), first);
  EXPECT_EQ(u.shape(), (Shape{2, 7}));
  EXPECT_EQ(u.bytes(), 56u);
  Tensor v = pool.take(DType::kF32, Shape{17});  // 68 bytes: 128, another size
  EXPECT_NE(v.data(), u.data());
  const OutputPoolStats st = pool.stats();
  EXPECT_EQ(st.requests, 3);
  EXPECT_EQ(st.hits, 1);
  EXPECT_EQ(st.misses, 2);
  EXPECT_EQ(st.buffersCached, 0);
  EXPECT_EQ(st.bytesCached, 0);
  EXPECT_EQ(st.peakBytesCached, 64);
  EXPECT_EQ(st.capacityBytes, 1 << 20);
  EXPECT_EQ(OutputPool::roundedSize(1), 64u);
  EXPECT_EQ(OutputPool::roundedSize(65535), 65536u);
  EXPECT_EQ(OutputPool::roundedSize(65537), 65536u + 4096u);
}

TEST(SessionOutputPool, NeverServesABufferATensorStillHolds) {
  OutputPool pool(1 << 20);
  Tensor a = pool.take(DType::kF32, Shape{8});
  Tensor copy = a;  // a second owner of the same buffer
  a = Tensor();
  Tensor b = pool.take(DType::kF32, Shape{8});
  EXPECT_NE(b.data(), copy.data());
  EXPECT_EQ(pool.stats().hits, 0);
}

TEST(SessionOutputPool, EvictsTheLeastRecentlyFreedPastItsCapacity) {
  const Shape big{16384};  // 64 KiB of f32
  OutputPool pool(3 * 65536);
  std::vector<Tensor> held;
  std::vector<const void*> ptrs;
  for (int i = 0; i < 4; ++i) {
    held.push_back(pool.take(DType::kF32, big));
    ptrs.push_back(held.back().data());
  }
  for (Tensor& t : held) t = Tensor();  // freed in order 0, 1, 2, 3: 0 is evicted
  OutputPoolStats st = pool.stats();
  EXPECT_EQ(st.evictions, 1);
  EXPECT_EQ(st.buffersCached, 3);
  EXPECT_EQ(st.bytesCached, 3 * 65536);
  EXPECT_EQ(st.peakBytesCached, 3 * 65536);
  // Served most recently freed first: 3, 2, 1; then a fresh buffer.
  for (int i = 3; i >= 1; --i) held[i] = pool.take(DType::kF32, big);
  EXPECT_EQ(held[3].data(), ptrs[3]);
  EXPECT_EQ(held[2].data(), ptrs[2]);
  EXPECT_EQ(held[1].data(), ptrs[1]);
  held[0] = pool.take(DType::kF32, big);
  st = pool.stats();
  EXPECT_EQ(st.hits, 3);
  EXPECT_EQ(st.misses, 5);
  EXPECT_EQ(st.bytesCached, 0);
}

TEST(SessionOutputPool, KeepsNothingLargerThanItsCapacityOrWithCapacityZero) {
  OutputPool small(1000);
  { Tensor t = small.take(DType::kF32, Shape{1000}); }  // 4000 bytes > 1000
  EXPECT_EQ(small.stats().buffersCached, 0);
  EXPECT_EQ(small.stats().evictions, 0);
  OutputPool off(0);
  for (int i = 0; i < 3; ++i) Tensor t = off.take(DType::kI64, Shape{4});
  EXPECT_EQ(off.stats().misses, 3);
  EXPECT_EQ(off.stats().hits, 0);
  EXPECT_EQ(off.stats().bytesCached, 0);
}

TEST(SessionOutputPool, RefusesAShapeWithSymbolicDims) {
  OutputPool pool;
  EXPECT_THROW(pool.take(DType::kF32, Shape{2, kAnyDim}), Error);
}

TEST(SessionOutputPool, ATensorMayOutliveThePool) {
  Tensor t;
  {
    OutputPool pool(1 << 20);
    t = pool.take(DType::kF32, Shape{100});
  }
  std::fill_n(t.as<float>(), 100, 1.5f);  // ASan: still valid memory
  EXPECT_EQ(t.as<float>()[99], 1.5f);
}

TEST(SessionOutputPool, ThreadsTakeAndDropConcurrently) {
  OutputPool pool(4 * 4096);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&pool, k] {
      for (int i = 0; i < 500; ++i) {
        Tensor t = pool.take(DType::kF32, Shape{(i + k) % 3 + 1, 300});
        t.as<float>()[0] = static_cast<float>(i);
      }
    });
  for (std::thread& t : threads) t.join();
  const OutputPoolStats st = pool.stats();
  EXPECT_EQ(st.requests, 2000);
  EXPECT_EQ(st.hits + st.misses, 2000);
  EXPECT_LE(st.bytesCached, 4 * 4096);
  EXPECT_LE(st.buffersCached * 1216, 4 * 4096);  // the smallest rounded size: 1,216 bytes
}

// Builds with assertions (the sanitized flavours) poison by default: every buffer served is
// filled with 0xFF, so a kernel that leaves part of an output unwritten fails the differential
// tests there. The poison itself is checked in every build, asked for explicitly.
TEST(SessionOutputPool, APoisoningPoolFillsEveryBufferServed) {
#ifdef NDEBUG
  EXPECT_FALSE(OutputPool::kPoisonByDefault);
#else
  EXPECT_TRUE(OutputPool::kPoisonByDefault);
#endif
  OutputPool pool(1 << 20, /*poison=*/true);
  {
    Tensor t = pool.take(DType::kF32, Shape{5});
    for (int i = 0; i < 5; ++i) EXPECT_EQ(t.as<int32_t>()[i], -1);  // a fresh buffer too
    std::fill_n(t.as<float>(), 5, 0.0f);
  }
  Tensor u = pool.take(DType::kI32, Shape{5});  // the same buffer, served again
  EXPECT_EQ(pool.stats().hits, 1);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(u.as<int32_t>()[i], -1);
  // Without the poison, the buffer comes back as its last user left it.
  OutputPool plain(1 << 20, /*poison=*/false);
  { std::fill_n(plain.take(DType::kF32, Shape{5}).as<float>(), 5, 2.0f); }
  EXPECT_EQ(plain.take(DType::kF32, Shape{5}).as<float>()[4], 2.0f);
}

// A static session serves every call's outputs from its pool: seed 001's outputs are 16-48
// bytes, one rounded size, so with each call's outputs dropped only the first call allocates;
// kept, every call does; capacity 0, every call does and nothing is kept. Outputs still equal
// the reference executor's.
TEST(SessionOutputPool, StaticCallsReuseTheOutputsTheCallerDropped) {
  for (const size_t capacity : {OutputPool::kDefaultCapacity, size_t{0}}) {
    for (const bool keep : {false, true}) {
      SessionOptions o;
      o.outputPoolBytes = capacity;
      Session s(seed001(), o);
      std::vector<std::vector<Tensor>> kept;
      for (size_t i = 0; i < kSeedTrace.size(); ++i) {
        auto in = makeInputs(s.graph(), seed001Sig(kSeedTrace[i]), i);
        auto out = s.run(in);
        EXPECT_TRUE(out[0].equals(referenceRun(s.graph(), in)[0])) << "iteration " << i;
        if (keep) kept.push_back(std::move(out));
      }
      const OutputPoolStats& st = s.stats().outputPool;
      const bool pooled = capacity > 0 && !keep;
      EXPECT_EQ(st.requests, 7);
      EXPECT_EQ(st.hits, pooled ? 6 : 0) << "capacity " << capacity << " keep " << keep;
      EXPECT_EQ(st.misses, pooled ? 1 : 7);
      EXPECT_EQ(st.capacityBytes, static_cast<int64_t>(capacity));
    }
  }
}

// Geared calls take their outputs from the pool too, a padded call's sliced copy included.
TEST(SessionOutputPool, GearedCallsAndPaddedSlicesComeFromThePool) {
  SessionOptions o;
  o.mode = Mode::kGeared;
  gearOptions(o).fallback = GearFallback::kPad;
  Session s(seed001(), o);
  set_dim_gears(s, "x1", {{0, {4, 8}}});
  set_dim_gears(s, "x2", {{0, {4, 8}}});
  for (size_t i = 0; i < kSeedTrace.size(); ++i) {
    auto in = makeInputs(s.graph(), seed001Sig(kSeedTrace[i]), i);
    auto out = s.run(in);
    EXPECT_TRUE(out[0].equals(referenceRun(s.graph(), in)[0])) << "iteration " << i;
  }
  // Sizes 2, 3, 5, 6 pad (two buffers: the gear's output and the slice), 4 and 4 do not.
  const OutputPoolStats& st = s.stats().outputPool;
  EXPECT_EQ(st.requests, 5 * 2 + 2);
  EXPECT_EQ(st.misses, 2);  // the first padded call's two buffers, both 64 bytes rounded
  EXPECT_EQ(st.hits, 10);
}

}  // namespace
}  // namespace gearbox
