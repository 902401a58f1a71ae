// The op-level kernel cache and the plan compiler's use of it: counters, LRU eviction, sharding,
// one compile per key under concurrent lookups, failed compiles, the per-plan memo, plans
// sharing the session's graph, and gears sharing one arena.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "compiler/compiler.h"
#include "executor/modes/geared.h"
#include "executor/session.h"
#include "graph/error.h"
#include "graph/text.h"

namespace gearbox {
namespace {

KernelKey addKey(int64_t rows) {
  const TensorType t{DType::kF32, Shape{rows, 4}};
  return makeKernelKey(OpKind::kAdd, {t, t}, Attrs{});
}

TEST(KernelCache, CountsOneMissThenHits) {
  KernelCache cache(8);
  int compiled = 0;
  auto a = cache.get(addKey(2), &compiled);
  auto b = cache.get(addKey(2), &compiled);
  EXPECT_EQ(a, b);
  EXPECT_EQ(compiled, 1);
  const KernelCacheStats s = cache.stats();
  EXPECT_EQ(s.compiles, 1);
  EXPECT_EQ(s.cache.misses, 1);
  EXPECT_EQ(s.cache.hits, 1);
  EXPECT_EQ(s.cache.inserts, 1);
  EXPECT_EQ(s.cache.size, 1);
  EXPECT_EQ(a->name, "Add_float_ND_2_4__2_4");
}

TEST(KernelCache, SmallCapacityIsOneExactLru) {
  KernelCache cache(2);
  EXPECT_EQ(cache.shards(), 1u);
  cache.get(addKey(1));
  cache.get(addKey(2));
  cache.get(addKey(1));  // 1 is now the most recently used
  cache.get(addKey(3));  // evicts 2
  EXPECT_EQ(cache.stats().cache.evictions, 1);
  EXPECT_EQ(cache.stats().cache.size, 2);
  int compiled = 0;
  cache.get(addKey(1), &compiled);
  EXPECT_EQ(compiled, 0);
  cache.get(addKey(2), &compiled);
  EXPECT_EQ(compiled, 1);
}

TEST(KernelCache, LargeCapacitiesAreShardedWithTheSameTotal) {
  EXPECT_EQ(KernelCache(255).shards(), 1u);
  EXPECT_EQ(KernelCache(256).shards(), 16u);
  EXPECT_EQ(KernelCache(1024).shards(), 64u);
  EXPECT_EQ(KernelCache(100000).shards(), 64u);
  for (size_t capacity : {256u, 1000u, 1024u, 5000u}) {
    KernelCache cache(capacity);
    EXPECT_EQ(cache.stats().cache.capacity, static_cast<int64_t>(capacity));
  }
}

TEST(KernelCache, ShardedCacheNeverHoldsMoreThanItsCapacity) {
  KernelCache cache(256);
  for (int64_t rows = 1; rows <= 1000; ++rows) cache.get(addKey(rows));
  const KernelCacheStats s = cache.stats();
  EXPECT_LE(s.cache.size, 256);
  EXPECT_EQ(s.cache.size + s.cache.evictions, 1000);
  EXPECT_EQ(s.compiles, 1000);
}

TEST(KernelCache, ConcurrentLookupsCompileEachKeyOnce) {
  // Every thread asks for every key, in different orders: however the lookups interleave,
  // each key compiles once, and the other lookups are hits (some wait for the compile).
  constexpr int kThreads = 8, kKeys = 200;
  KernelCache cache(1024);
  std::atomic<int> compiled{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      int mine = 0;
      for (int i = 0; i < kKeys; ++i) {
        const int k = (i * (2 * t + 1) + t * 37) % kKeys;  // a permutation per thread
        auto spec = cache.get(addKey(k + 1), &mine);
        ASSERT_EQ(spec->key, addKey(k + 1));
      }
      compiled += mine;
    });
  }
  for (auto& th : threads) th.join();
  const KernelCacheStats s = cache.stats();
  EXPECT_EQ(compiled.load(), kKeys);
  EXPECT_EQ(s.compiles, kKeys);
  EXPECT_EQ(s.cache.misses, kKeys);
  EXPECT_EQ(s.cache.hits, kThreads * kKeys - kKeys);
  EXPECT_EQ(s.cache.size, kKeys);
}

TEST(KernelCache, AFailedCompileLeavesNothingBehindAndFailsAgain) {
  KernelCache cache(8);
  const KernelKey bad = makeKernelKey(OpKind::kConst, {}, Attrs{});
  EXPECT_THROW(cache.get(bad), Error);
  EXPECT_THROW(cache.get(bad), Error);
  const KernelCacheStats s = cache.stats();
  EXPECT_EQ(s.cache.size, 0);
  EXPECT_EQ(s.cache.misses, 2);
  EXPECT_EQ(s.compiles, 0);
  cache.get(addKey(2));  // the cache still works
  EXPECT_EQ(cache.stats().cache.size, 1);
}

TEST(CompilePlan, RepeatedOpShapesInOnePlanCountAsHits) {
  // Two Adds of the same shape: one compile, one reuse, and the cache counts one miss and one
  // hit, as if both lookups had gone to the cache.
  GraphBuilder b("twice");
  auto x = b.input("x", DType::kF32, {kAnyDim, 4});
  auto y = b.input("y", DType::kF32, {kAnyDim, 4});
  b.output(b.add(b.add(x, y), y));
  KernelCache cache;
  auto plan = compilePlan(b.build(), {Shape{3, 4}, Shape{3, 4}}, cache);
  EXPECT_EQ(plan->kernelsCompiled, 1);
  EXPECT_EQ(plan->kernelsReused, 1);
  EXPECT_TRUE(plan->steps[0].compiled);
  EXPECT_FALSE(plan->steps[1].compiled);
  EXPECT_EQ(plan->steps[0].kernel, plan->steps[1].kernel);
  EXPECT_EQ(cache.stats().cache.misses, 1);
  EXPECT_EQ(cache.stats().cache.hits, 1);
}

// A reshape in a static plan is a view: its output shares the input's arena bytes (no copy, no
// extra memory), while a reshape of a graph input or into a graph output keeps its own buffer.
TEST(CompilePlan, ReshapeOfAnIntermediateIsAView) {
  GraphBuilder b("views");
  auto x = b.input("x", DType::kF32, {symbolDim("B"), 6});
  auto r0 = b.op(OpKind::kReshape, {x}, Attrs{{}, Shape{-1}, {}}, "r0");  // of an input: copy
  auto s = b.op(OpKind::kRelu, {r0}, {}, "s");
  auto r1 = b.op(OpKind::kReshape, {s}, Attrs{{}, Shape{-1, 3}, {}}, "r1");   // a view of s
  auto r2 = b.op(OpKind::kReshape, {r1}, Attrs{{}, Shape{2, -1}, {}}, "r2");  // a view of s too
  auto m = b.op(OpKind::kMul, {r2, r2}, {}, "m");
  auto r3 = b.op(OpKind::kReshape, {m}, Attrs{{}, Shape{-1}, {}}, "r3");  // the output: copy
  b.output(r3);
  const Graph g = b.build();
  KernelCache cache;
  auto plan = compilePlan(g, {Shape{4, 6}}, cache);
  EXPECT_EQ(plan->storage[r1], Storage::kArena);
  EXPECT_EQ(plan->location[r1], plan->location[s]);
  EXPECT_EQ(plan->location[r2], plan->location[s]);
  EXPECT_EQ(plan->storage[r3], Storage::kOutput);
  EXPECT_EQ(plan->storage[r0], Storage::kArena);
  // s (and its views, read by m) and m are live together: they must not overlap.
  EXPECT_NE(plan->location[m], plan->location[s]);
  // Three buffers of 96 bytes (r0, s, m), each 64-byte aligned: 128 bytes each.
  EXPECT_EQ(plan->naiveBytes, 3 * 128);
}

TEST(CompilePlan, PlansShareTheGraphAndKeepTheirOwnTypes) {
  auto g = std::make_shared<const Graph>(
      loadGraph(std::string(GEARBOX_SOURCE_DIR) + "/examples/shufflenet_stage.gbx"));
  KernelCache cache;
  auto p3 = compilePlan(g, {Shape{3, 16, 49}}, cache);
  auto p5 = compilePlan(g, {Shape{5, 16, 49}}, cache);
  EXPECT_EQ(p3->graph, g);
  EXPECT_EQ(p5->graph, g);
  const ValueId out = g->outputs[0];
  EXPECT_EQ(p3->types[out].shape, Shape({3, 16, 49}));
  EXPECT_EQ(p5->types[out].shape, Shape({5, 16, 49}));
  // The graph itself keeps its declared (symbolic) types.
  EXPECT_FALSE(g->values[out].type.shape.isStatic());
  ASSERT_EQ(p3->types.size(), g->values.size());
  for (size_t v = 0; v < g->values.size(); ++v) EXPECT_TRUE(p3->types[v].shape.isStatic());
}

TEST(CompilePlan, ASignatureErrorNamesBothInputsOfASymbol) {
  GraphBuilder b("sym");
  const int64_t n = symbolDim("N");
  auto x = b.input("x", DType::kF32, {n, 2});
  auto y = b.input("y", DType::kF32, {n, 2});
  b.output(b.add(x, y));
  KernelCache cache;
  try {
    compilePlan(b.build(), {Shape{3, 2}, Shape{4, 2}}, cache);
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 'y' dim 0 is 4 but input 'x' dim 0 is 3"),
              std::string::npos)
        << e.what();
  }
}

TEST(Geared, GearsShareOneArenaSizedForTheLargest) {
  const Graph g = loadGraph(std::string(GEARBOX_SOURCE_DIR) + "/examples/shufflenet_stage.gbx");
  SessionOptions o;
  o.mode = Mode::kGeared;
  Session s(g, o);
  set_dim_gears(s, "x", {{0, {1, 8, 64}}});
  compileGears(s);
  // The largest gear's static plan alone needs this much; the three share it.
  KernelCache cache;
  auto largest = compilePlan(s.graph(), {Shape{64, 16, 49}}, cache);
  EXPECT_EQ(s.stats().peakBytes, largest->arenaBytes);
  EXPECT_EQ(s.stats().allocations, 1);
  for (int64_t n : {1, 8, 64, 8}) {
    auto in = makeInputs(s.graph(), {Shape{n, 16, 49}}, n);
    EXPECT_LE(maxAbsDiff(s.run(in)[0], referenceRun(s.graph(), in)[0]), 1e-4) << "batch " << n;
  }
}

}  // namespace
}  // namespace gearbox
