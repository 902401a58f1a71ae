// The op-level kernel cache and the plan compiler's use of it: counters, LRU eviction, sharding,
// one compile per key under concurrent lookups, failed compiles, the per-plan memo, plans
// sharing the session's graph, and gears sharing one arena.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "compiler/compiler.h"
#include "compiler/weight_pack.h"
#include "executor/modes/geared.h"
#include "executor/modes/mode_table.h"
#include "executor/plan_runner.h"
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

// ---- weights packed by the plan (compiler/weight_pack.h) ----------------------------------

// A conv over 7 x 7 planes with 70 output channels and K = 81: on AVX-512 the channel-tile
// path, whose constant weight the plan packs once for all plans of the graph.
// A conv of stride 1 padded by 1, its ReLU fused (act_min 0).
Attrs paddedConvRelu() {
  Attrs a;
  a.setInts(attr::Conv2d::strides, {1, 1});
  a.setInts(attr::Conv2d::pads, {1, 1, 1, 1});
  a.setInts(attr::Conv2d::dilations, {1, 1});
  a.setInt(attr::Conv2d::group, 1);
  a.setFloat(attr::Conv2d::act_min, 0.0f);
  return a;
}

Graph packedConvGraph(bool weightIsInput) {
  GraphBuilder b("packed");
  auto x = b.input("x", DType::kF32, {symbolDim("N"), 9, 7, 7});
  auto w = weightIsInput ? b.input("w", DType::kF32, {70, 9, 3, 3})
                         : b.constant(randomTensor(DType::kF32, Shape{70, 9, 3, 3}, 5), "w");
  auto bias = b.constant(randomTensor(DType::kF32, Shape{70}, 6), "b");
  b.output(b.op(OpKind::kConv2d, {x, w, bias}, paddedConvRelu(), "y"));
  return b.build();
}

// A 1x1 conv, stride 1, no padding.
Attrs pointwiseConv() {
  Attrs a;
  a.setInts(attr::Conv2d::strides, {1, 1});
  a.setInts(attr::Conv2d::pads, {0, 0, 0, 0});
  a.setInts(attr::Conv2d::dilations, {1, 1});
  a.setInt(attr::Conv2d::group, 1);
  return a;
}

// The plan of `g` for `sig` with batch tiles and without, compiled for `threads`.
std::pair<std::shared_ptr<Plan>, std::shared_ptr<Plan>> tiledAndPlain(
    const std::shared_ptr<const Graph>& g, const InputSignature& sig, int threads) {
  KernelCache cache(64, threads);
  PlanCompileOptions whole;
  whole.batchTiles = false;
  auto tiled = compilePlan(g, sig, cache);
  return {tiled, compilePlan(g, sig, cache, whole)};
}

std::vector<Tensor> runPlanOn(const Plan& plan, const std::vector<Tensor>& ins) {
  std::vector<TensorView> inViews;
  for (const Tensor& t : ins) inViews.push_back(t.view());
  auto outs = allocateOutputs(plan);
  std::vector<TensorView> outViews;
  for (const Tensor& t : outs) outViews.push_back(t.view());
  runStaticPlan(plan, inViews, outViews);
  return outs;
}

void expectPlanMatchesReference(const Plan& plan, uint64_t seed) {
  const auto ins = makeInputs(*plan.graph, plan.signature, seed);
  const auto outs = runPlanOn(plan, ins);
  const auto want = referenceRun(*plan.graph, ins);
  const float* got = outs[0].as<float>();
  const float* exp = want[0].as<float>();
  for (int64_t i = 0; i < want[0].numel(); ++i)
    ASSERT_NEAR(got[i], exp[i], 1e-4 * (1.0 + std::fabs(exp[i]))) << "element " << i;
}

// A static plan fills its argument table once per arena, then rewrites only the slots that read
// a graph input or output (executor/plan_runner.cpp): every call brings new input and output
// buffers here, and a new arena from the third call on, the old one kept alive and filled with
// NaN so an argument still pointing into it would show in the result.
TEST(PlanRunner, EachCallRebindsInputsAndOutputsAndANewArenaRebindsEveryArgument) {
  GraphBuilder b("rebind");
  const ValueId x = b.input("x", DType::kF32, {3, 5});
  const ValueId y = b.input("y", DType::kF32, {3, 5});
  const ValueId s = b.add(x, y);  // input + input -> arena
  const ValueId t = b.add(s, x);  // arena + input
  b.output(b.add(t, s));          // arena + arena -> output 0
  b.output(t);
  KernelCache cache;
  auto plan = compilePlan(b.build(), {Shape{3, 5}, Shape{3, 5}}, cache);
  ASSERT_GT(plan->arenaBytes, 0);
  std::shared_ptr<std::byte> old;
  for (int call = 0; call < 4; ++call) {
    SCOPED_TRACE(call);
    if (call == 2) {
      old = plan->arena;
      bindArena(*plan, allocateArena(plan->hostArenaBytes));
      float* f = reinterpret_cast<float*>(old.get());
      std::fill(f, f + plan->hostArenaBytes / 4, std::numeric_limits<float>::quiet_NaN());
    }
    expectPlanMatchesReference(*plan, 100 + call);
  }
}

// A call on the same input and output buffers as the last rewrites no argument (plan_runner.cpp
// compares them): new contents in those buffers must still be read, and a call on other
// buffers, then the first ones again (A, B, A), must rebind each time.
TEST(PlanRunner, TheSameBuffersAgainReadTheirNewContentsAndOtherBuffersRebind) {
  GraphBuilder b("again");
  const ValueId x = b.input("x", DType::kF32, {2, 3});
  const ValueId y = b.input("y", DType::kF32, {2, 3});
  const ValueId s = b.add(x, y);
  b.output(b.add(s, y));  // x + 2y
  KernelCache cache;
  auto plan = compilePlan(b.build(), {Shape{2, 3}, Shape{2, 3}}, cache);
  std::vector<Tensor> setA = {randomTensor(DType::kF32, {2, 3}, 1),
                              randomTensor(DType::kF32, {2, 3}, 2)};
  std::vector<Tensor> setB = {randomTensor(DType::kF32, {2, 3}, 3),
                              randomTensor(DType::kF32, {2, 3}, 4)};
  Tensor outA(DType::kF32, {2, 3}), outB(DType::kF32, {2, 3});
  auto call = [&](std::vector<Tensor>& ins, Tensor& out, uint64_t seed) {
    // New contents in the same buffers each call.
    for (size_t i = 0; i < ins.size(); ++i) {
      const Tensor fresh = randomTensor(DType::kF32, {2, 3}, seed + i);
      std::copy(fresh.as<float>(), fresh.as<float>() + 6, ins[i].as<float>());
    }
    const TensorView in[] = {ins[0].view(), ins[1].view()};
    const TensorView ov[] = {out.view()};
    runStaticPlan(*plan, in, ov);
    for (int64_t i = 0; i < 6; ++i)
      ASSERT_FLOAT_EQ(out.as<float>()[i],
                      ins[0].as<float>()[i] + ins[1].as<float>()[i] + ins[1].as<float>()[i])
          << "element " << i << ", seed " << seed;
  };
  call(setA, outA, 10);
  call(setA, outA, 20);  // the same buffers: nothing rebound
  call(setB, outB, 30);
  call(setA, outA, 40);
  call(setA, outB, 50);  // the same inputs, another output
  call(setA, outB, 60);
  call(setB, outB, 70);  // other inputs, the same output
  // A new arena with the same buffers: every argument is bound again (the old arena, kept alive
  // and filled with NaN, would show through a stale one).
  std::shared_ptr<std::byte> old = plan->arena;
  bindArena(*plan, allocateArena(plan->hostArenaBytes));
  float* f = reinterpret_cast<float*>(old.get());
  std::fill(f, f + plan->hostArenaBytes / 4, std::numeric_limits<float>::quiet_NaN());
  call(setB, outB, 80);
}

TEST(WeightPack, PlansOfOneGraphShareOnePackOfAConstantWeight) {
  auto g = std::make_shared<const Graph>(packedConvGraph(false));
  KernelCache cache;
  const CacheStats before = weightPackCache().stats();
  auto p1 = compilePlan(g, {Shape{1, 9, 7, 7}}, cache);
  auto p3 = compilePlan(g, {Shape{3, 9, 7, 7}}, cache);
  const CacheStats after = weightPackCache().stats();
  const bool tiles = std::get<ConvParams>(p1->steps[0].kernel->params).channelTiles == 1;
  EXPECT_EQ(tiles, activeIsa() == Isa::kAvx512);
  if (tiles) {
    // m = 70 rounds up to 80 channels (5 vectors), K = 9 * 3 * 3.
    EXPECT_EQ(p1->packedWeightBytes, 80 * 81 * 4);
    EXPECT_EQ(p1->weightsPackedNow, 1);
    EXPECT_EQ(p3->weightsPackedNow, 0);
    EXPECT_EQ(p1->steps[0].packedWeight, p3->steps[0].packedWeight);
    EXPECT_EQ(std::get<ConvParams>(p1->steps[0].kernel->params).weightsPacked, 1);
    EXPECT_EQ(after.misses - before.misses, 1);
    EXPECT_EQ(after.hits - before.hits, 1);
    // The kernel cache holds the spec as compiled: the plan's copy says the weight is packed.
    EXPECT_EQ(std::get<ConvParams>(cache.get(p1->steps[0].kernel->key)->params).weightsPacked, 0);
  } else {
    EXPECT_EQ(p1->packedWeightBytes, 0);
    EXPECT_EQ(p1->steps[0].packedWeight, nullptr);
  }
  expectPlanMatchesReference(*p1, 11);
  expectPlanMatchesReference(*p3, 12);
  // Once no plan holds the pack, the next plan packs again: the cache owns no memory.
  const std::weak_ptr<const float> held = p1->steps[0].packedWeight;
  p1.reset();
  p3.reset();
  EXPECT_TRUE(held.expired());
  auto p2 = compilePlan(g, {Shape{2, 9, 7, 7}}, cache);
  EXPECT_EQ(p2->weightsPackedNow, tiles ? 1 : 0);
  expectPlanMatchesReference(*p2, 13);
}

TEST(WeightPack, AWeightFedAsAnInputIsNeverPacked) {
  auto g = std::make_shared<const Graph>(packedConvGraph(true));
  KernelCache cache;
  auto plan = compilePlan(g, {Shape{2, 9, 7, 7}, Shape{70, 9, 3, 3}}, cache);
  EXPECT_EQ(plan->steps[0].packedWeight, nullptr);
  EXPECT_EQ(plan->packedWeightBytes, 0);
  EXPECT_EQ(std::get<ConvParams>(plan->steps[0].kernel->params).weightsPacked, 0);
  expectPlanMatchesReference(*plan, 14);
}

// MatMul's constant B in strips (compiler.cpp's bindPackedMatMulB): x [N, 300] times B [300, n],
// with a bias and relu fused (act_min = 0) or plain.
Graph packedMatMulGraph(bool bIsInput, int64_t n, bool epilogue) {
  GraphBuilder b("mm");
  auto x = b.input("x", DType::kF32, {symbolDim("N"), 300});
  auto w = bIsInput ? b.input("w", DType::kF32, {300, n})
                    : b.constant(randomTensor(DType::kF32, Shape{300, n}, 7), "w");
  if (!epilogue) {
    b.output(b.op(OpKind::kMatMul, {x, w}, Attrs{}, "y"));
  } else {
    Attrs relu;
    relu.setFloat(attr::MatMul::act_min, 0.0);
    auto bias = b.constant(randomTensor(DType::kF32, Shape{n}, 8), "bias");
    b.output(b.op(OpKind::kMatMul, {x, w, bias}, relu, "y"));
  }
  return b.build();
}

const MatMulParams& stepMatMul(const Plan& plan) {
  return std::get<MatMulParams>(plan.steps.at(0).kernel->params);
}

// N = 1040 on AVX-512's direct path: 8 and 32 rows run 8 x 48 tiles (21 strips of 48 and 32
// columns in a zero-padded 22nd), 6 and 13 rows 6 x 64 (16 strips and 16 columns); on two threads
// row splits read the one pack, and a column split that would start inside a strip keeps B in
// place; a plan reads the other tile's strips where another plan holds them.
// Every plan against the reference executor.
TEST(WeightPack, AConstantMatMulBIsPackedInStripsOfItsTile) {
  for (bool epilogue : {false, true})
    for (int threads : {1, 2}) {
      auto g = std::make_shared<const Graph>(packedMatMulGraph(false, 1040, epilogue));
      KernelCache cache(64, threads);
      for (int64_t m : {8, 32, 6, 13, 300}) {
        SCOPED_TRACE(fmt::format("epilogue {} threads {} m {}", epilogue, threads, m));
        auto plan = compilePlan(g, {Shape{m, 300}}, cache);
        const MatMulParams& p = stepMatMul(*plan);
        const bool direct = activeIsa() == Isa::kAvx512 && p.gemm.path == GemmPath::kDirect;
        EXPECT_EQ(direct, activeIsa() == Isa::kAvx512);
        const int64_t width = gemmDirectTile(m).vectors * 16;
        const bool packs = direct && p.colsPerTask % width == 0;
        EXPECT_EQ(p.bPacked, packs ? width : 0);
        EXPECT_EQ(plan->steps[0].packedWeight != nullptr, packs);
        EXPECT_EQ(plan->packedWeightBytes,
                  packs ? (1040 + width - 1) / width * width * 300 * 4 : 0);
        // The kernel cache holds the spec as compiled.
        EXPECT_EQ(std::get<MatMulParams>(cache.get(plan->steps[0].kernel->key)->params).bPacked, 0);
        expectPlanMatchesReference(*plan, 20 + static_cast<uint64_t>(m));
        if (packs) {
          // The ISA lowered after the plan packed B: the AVX-512 logic on AVX2, or the plain loop.
          for (Isa lower : {Isa::kAvx2, Isa::kBaseline}) {
            ScopedIsaOverride forced(lower);
            expectPlanMatchesReference(*plan, 40 + static_cast<uint64_t>(m));
          }
        }
      }
      if (activeIsa() == Isa::kAvx512) {
        // 32 and 8 rows on one thread share one pack of 48-column strips.
        auto a = compilePlan(g, {Shape{32, 300}}, cache);
        auto b = compilePlan(g, {Shape{8, 300}}, cache);
        if (threads == 1) {
          EXPECT_EQ(a->steps[0].packedWeight, b->steps[0].packedWeight);
          EXPECT_EQ(b->weightsPackedNow, 0);
        }
        // 6 and 13 rows (6 x 64 tiles of their own) read the 48-column strips `a` holds, in that
        // width's tile, where their column split starts each task on one: one copy of B for
        // every gear (always on one thread), one hit in the cache's stats and no pack.
        for (int64_t m : {6, 13}) {
          SCOPED_TRACE(
              fmt::format("epilogue {} threads {} m {} beside m 32", epilogue, threads, m));
          const CacheStats before = weightPackCache().stats();
          auto c = compilePlan(g, {Shape{m, 300}}, cache);
          const CacheStats after = weightPackCache().stats();
          const MatMulParams& p = stepMatMul(*c);
          const bool shares = p.colsPerTask % 48 == 0;
          if (threads == 1) {
            EXPECT_TRUE(shares);
          }
          EXPECT_EQ(p.bPacked, shares ? 48 : 64);
          EXPECT_EQ(c->steps[0].packedWeight == a->steps[0].packedWeight, shares);
          EXPECT_EQ(c->weightsPackedNow, shares ? 0 : 1);
          EXPECT_EQ(after.hits - before.hits, shares ? 1 : 0);
          EXPECT_EQ(after.misses - before.misses, shares ? 0 : 1);
          const int64_t width = p.bPacked;
          EXPECT_EQ(c->packedWeightBytes, (1040 + width - 1) / width * width * 300 * 4);
          expectPlanMatchesReference(*c, 50 + static_cast<uint64_t>(m));
          for (Isa lower : {Isa::kAvx2, Isa::kBaseline}) {
            ScopedIsaOverride forced(lower);
            expectPlanMatchesReference(*c, 60 + static_cast<uint64_t>(m));
          }
        }
        // With no plan holding the 48-column strips, 6 rows on one thread pack their own
        // 64-column ones, and 8 and 32 rows then read those in the 6 x 64 tile.
        a.reset();
        b.reset();
        if (threads == 1) {
          auto six = compilePlan(g, {Shape{6, 300}}, cache);
          EXPECT_EQ(stepMatMul(*six).bPacked, 64);
          EXPECT_EQ(six->weightsPackedNow, 1);
          for (int64_t m : {8, 32}) {
            SCOPED_TRACE(fmt::format("epilogue {} m {} beside m 6", epilogue, m));
            auto eight = compilePlan(g, {Shape{m, 300}}, cache);
            EXPECT_EQ(stepMatMul(*eight).bPacked, 64);
            EXPECT_EQ(eight->steps[0].packedWeight, six->steps[0].packedWeight);
            EXPECT_EQ(eight->weightsPackedNow, 0);
            expectPlanMatchesReference(*eight, 70 + static_cast<uint64_t>(m));
          }
        }
      }
    }
}

// One or two rows: the compile chooses AVX-512's skinny path (B read in place), and a plan that
// packs a constant B runs the direct path from its strips instead, with that path's split (the
// kernel cache keeps the spec as compiled); a B fed as an input stays on the skinny path. Three
// rows take the direct path either way. AVX2 keeps B in place on the skinny path (the baseline
// on Eigen's).
TEST(WeightPack, OneOrTwoRowsReadAPackedBOnTheDirectPath) {
  const bool avx512 = activeIsa() == Isa::kAvx512;
  for (bool epilogue : {false, true})
    for (int threads : {1, 2}) {
      auto g = std::make_shared<const Graph>(packedMatMulGraph(false, 1040, epilogue));
      auto fedGraph = std::make_shared<const Graph>(packedMatMulGraph(true, 1040, epilogue));
      KernelCache cache(64, threads);
      for (int64_t m : {1, 2, 3}) {
        SCOPED_TRACE(fmt::format("epilogue {} threads {} m {}", epilogue, threads, m));
        auto plan = compilePlan(g, {Shape{m, 300}}, cache);
        const MatMulParams& p = stepMatMul(*plan);
        const MatMulParams& compiled =
            std::get<MatMulParams>(cache.get(plan->steps[0].kernel->key)->params);
        // AVX2: skinny; the baseline: Eigen.
        const GemmPath here = chooseGemmBlocking(activeIsa(), DType::kF32, m, 1040, 300).path;
        EXPECT_EQ(compiled.gemm.path, avx512 && m == 3 ? GemmPath::kDirect : here);
        if (avx512) {
          EXPECT_EQ(here, m == 3 ? GemmPath::kDirect : GemmPath::kSkinny);
        }
        EXPECT_EQ(compiled.bPacked, 0);
        const int64_t width = gemmDirectTile(m).vectors * 16;
        EXPECT_EQ(p.gemm.path, avx512 ? GemmPath::kDirect : here);
        EXPECT_EQ(p.bPacked, avx512 ? width : 0);
        if (avx512) {
          // The direct path's blocking and split: whole strips per task, as many tasks.
          EXPECT_EQ(p.gemm,
                    chooseGemmBlocking(Isa::kAvx512, DType::kF32, m, 1040, 300, false, true));
          EXPECT_EQ(p.colsPerTask % width, 0);
          EXPECT_EQ(plan->steps[0].kernel->tasks, threads);
          EXPECT_EQ(p.colsPerTask > 0, threads == 2);
        }
        expectPlanMatchesReference(*plan, 80 + static_cast<uint64_t>(m));
        auto fed = compilePlan(fedGraph, {Shape{m, 300}, Shape{300, 1040}}, cache);
        EXPECT_EQ(stepMatMul(*fed).bPacked, 0);
        EXPECT_EQ(stepMatMul(*fed).gemm.path, compiled.gemm.path);
        expectPlanMatchesReference(*fed, 90 + static_cast<uint64_t>(m));
      }
    }
}

// From 16 rows to 255 with N >= 1024, AVX-512's direct path walks a B in place panel by panel
// (kernel_spec.h, directCopiesB), where a static plan reads a constant B from strips: the two
// sum every element of C in the same order (the same K slices), so a plan fed B as an input
// and a plan holding it as a constant give the same bits, as `gearbox compare` expects of the
// modes (max abs difference 1e-4: slices near 128 for the walk broke it on examples/mlp.gbx).
TEST(WeightPack, BInPlaceAndInStripsGiveTheSameBits) {
  const bool avx512 = activeIsa() == Isa::kAvx512;
  Tensor w = randomTensor(DType::kF32, Shape{300, 1040}, 7);
  auto g = std::make_shared<const Graph>(packedMatMulGraph(false, 1040, true));
  auto fedGraph = std::make_shared<const Graph>(packedMatMulGraph(true, 1040, true));
  for (int threads : {1, 2}) {
    KernelCache cache(64, threads);
    for (int64_t m : {16, 21, 64, 255}) {
      SCOPED_TRACE(fmt::format("threads {} m {}", threads, m));
      auto plan = compilePlan(g, {Shape{m, 300}}, cache);
      auto fed = compilePlan(fedGraph, {Shape{m, 300}, Shape{300, 1040}}, cache);
      EXPECT_EQ(stepMatMul(*plan).bPacked > 0, avx512);
      EXPECT_EQ(stepMatMul(*fed).bPacked, 0);
      EXPECT_EQ(stepMatMul(*plan).gemm, stepMatMul(*fed).gemm);
      Tensor x = randomTensor(DType::kF32, Shape{m, 300}, 50 + static_cast<uint64_t>(m));
      const auto packed = runPlanOn(*plan, {x});
      const auto inPlace = runPlanOn(*fed, {x, w});
      ASSERT_EQ(packed.size(), 1u);
      ASSERT_EQ(inPlace.size(), 1u);
      ASSERT_EQ(packed[0].bytes(), inPlace[0].bytes());
      EXPECT_EQ(0, std::memcmp(packed[0].as<float>(), inPlace[0].as<float>(), packed[0].bytes()));
    }
  }
}

// A B fed as an input, a narrow B (200 columns), an empty K, a column split that starts
// inside a strip and the dynamic plan keep B in place.
TEST(WeightPack, AMatMulBInputNarrowOrInADynamicPlanStaysInPlace) {
  {
    // 16 tasks over 1040 columns: 128 each (65 rounded up to 64s: 9 blocks; to 48s it would be
    // 11), and 128 is no whole number of 8 x 48 tiles.
    KernelCache many(64, 16);
    auto split = compilePlan(std::make_shared<const Graph>(packedMatMulGraph(false, 1040, true)),
                             {Shape{8, 300}}, many);
    if (activeIsa() == Isa::kAvx512) {
      EXPECT_EQ(stepMatMul(*split).colsPerTask, 128);
    }
    EXPECT_EQ(stepMatMul(*split).bPacked, 0);
    EXPECT_EQ(split->steps[0].packedWeight, nullptr);
    expectPlanMatchesReference(*split, 32);
  }
  {
    GraphBuilder b("empty_k");
    auto x = b.input("x", DType::kF32, {symbolDim("N"), 0});
    auto w = b.constant(Tensor(DType::kF32, Shape{0, 1040}), "w");
    b.output(b.op(OpKind::kMatMul, {x, w}, Attrs{}, "y"));
    KernelCache one;
    auto empty = compilePlan(std::make_shared<const Graph>(b.build()), {Shape{8, 0}}, one);
    EXPECT_EQ(stepMatMul(*empty).bPacked, 0);
    expectPlanMatchesReference(*empty, 33);
  }
  KernelCache cache;
  auto fed = compilePlan(std::make_shared<const Graph>(packedMatMulGraph(true, 1040, false)),
                         {Shape{32, 300}, Shape{300, 1040}}, cache);
  EXPECT_EQ(stepMatMul(*fed).bPacked, 0);
  EXPECT_EQ(fed->steps[0].packedWeight, nullptr);
  expectPlanMatchesReference(*fed, 30);
  {
    // The threshold (weight_pack.cpp, kMatMulPackMinN): 256 columns pack, 255 do not.
    KernelCache one(64, 1);
    auto at = compilePlan(std::make_shared<const Graph>(packedMatMulGraph(false, 256, false)),
                          {Shape{32, 300}}, one);
    auto below = compilePlan(std::make_shared<const Graph>(packedMatMulGraph(false, 255, false)),
                             {Shape{32, 300}}, one);
    EXPECT_EQ(stepMatMul(*at).bPacked, activeIsa() == Isa::kAvx512 ? 48 : 0);
    EXPECT_EQ(stepMatMul(*below).bPacked, 0);
    expectPlanMatchesReference(*at, 34);
    expectPlanMatchesReference(*below, 35);
  }
  auto narrow = compilePlan(std::make_shared<const Graph>(packedMatMulGraph(false, 200, true)),
                            {Shape{32, 300}}, cache);
  EXPECT_EQ(stepMatMul(*narrow).bPacked, 0);
  expectPlanMatchesReference(*narrow, 31);
  auto dynamic = compilePlan(std::make_shared<const Graph>(packedMatMulGraph(false, 1040, false)),
                             {Shape{symbolDim("N"), 300}}, cache);
  EXPECT_FALSE(dynamic->isStatic);
  EXPECT_EQ(dynamic->steps[0].packedWeight, nullptr);
}

// ---- activations in channel blocks (compiler.cpp's blockActivations) ------------------------

// MobileNetV2's inverted residual block without the residual: a 1x1 conv expanding c to m
// channels, a 3 x 3 depthwise conv (stride s, relu6), a 1x1 conv projecting to `outC`. Variants
// that must keep planes: the depthwise output also a graph output, the expanded value also read
// by an Add, the projection's weight a graph input.
// kResidual: the projection adds the block's input (fuse-conv-residual; c == outC, stride 1);
// kExpandResidual: the expansion adds a second graph input (so its output stays planes).
enum class BlockVariant {
  kPlain,
  kDepthwiseIsAnOutput,
  kTwoReaders,
  kProjectionWeightIsInput,
  kResidual,
  kExpandResidual
};

// hw > 0: planes of hw x hw (else symbols H and W).
Graph invertedBlock(int64_t c, int64_t m, int64_t outC, int64_t stride, BlockVariant v,
                    int64_t hw = 0) {
  GraphBuilder b("inverted");
  auto x = hw > 0 ? b.input("x", DType::kF32, {symbolDim("N"), c, hw, hw})
                  : b.input("x", DType::kF32, {symbolDim("N"), c, symbolDim("H"), symbolDim("W")});
  auto conv = [&](ValueId in, ValueId w, int64_t s, int64_t pad, int64_t group, bool relu6,
                  const std::string& name, ValueId residual = -1) {
    Attrs a;
    a.setInts(attr::Conv2d::strides, {s, s});
    a.setInts(attr::Conv2d::pads, {pad, pad, pad, pad});
    a.setInts(attr::Conv2d::dilations, {1, 1});
    a.setInt(attr::Conv2d::group, group);
    if (relu6) {
      a.setFloat(attr::Conv2d::act_min, 0.0f);
      a.setFloat(attr::Conv2d::act_max, 6.0f);
    }
    const int64_t outCh = b.graph().values[w].type.shape[0];
    auto bias = b.constant(randomTensor(DType::kF32, Shape{outCh}, 70 + outCh), name + "_b");
    if (residual >= 0) return b.op(OpKind::kConv2d, {in, w, bias, residual}, a, name);
    return b.op(OpKind::kConv2d, {in, w, bias}, a, name);
  };
  auto w1 = b.constant(randomTensor(DType::kF32, Shape{m, c, 1, 1}, 61), "w1");
  auto w2 = b.constant(randomTensor(DType::kF32, Shape{m, 1, 3, 3}, 62), "w2");
  auto w3 = v == BlockVariant::kProjectionWeightIsInput
                ? b.input("w3", DType::kF32, {outC, m, 1, 1})
                : b.constant(randomTensor(DType::kF32, Shape{outC, m, 1, 1}, 63), "w3");
  const ValueId er =
      v == BlockVariant::kExpandResidual
          ? b.input("r", DType::kF32, {symbolDim("N"), m, symbolDim("H"), symbolDim("W")})
          : ValueId{-1};
  auto e = conv(x, w1, 1, 0, 1, true, "expand", er);
  auto d = conv(e, w2, stride, 1, m, true, "dw");
  auto y = conv(d, w3, 1, 0, 1, false, "project", v == BlockVariant::kResidual ? x : ValueId{-1});
  b.output(y);
  if (v == BlockVariant::kDepthwiseIsAnOutput) b.output(d);
  if (v == BlockVariant::kTwoReaders) b.output(b.add(e, e));
  return b.build();
}

const ConvParams& stepConv(const Plan& plan, size_t i) {
  return std::get<ConvParams>(plan.steps[i].kernel->params);
}

// On AVX-512 the expanded and the depthwise values stay in channel blocks (the 1x1 convs on the
// channel-tile path, switched to it where their own compile chose another), and the plan
// matches the reference executor: rows of 7, 14 and 56 (blocks of 7 and 8 positions), odd
// sizes, 1 x 1 and 1-row planes, strides 1 and 2, 1 and 3 images, 1 and 2 threads. On AVX2
// (forced, where this machine has more) the depthwise conv runs in channel blocks with its taps
// packed, and reads the expanding 1x1's output in blocks, which that conv writes from its GEMM
// tiles run as positions x channels (its weight packed as the channel tiles'), and writes its
// output in blocks for the projecting 1x1, which reads them from tiles run the same way (its
// weight packed too). One whose output rows are 24 columns or more (48 at stride 2) compiles to
// planes, and the plan switches it to channel blocks.
TEST(ChannelBlockLayout, APlanKeepsTheDepthwiseInputAndOutputInChannelBlocks) {
  struct Case {
    int64_t n, c, m, outC, h, w, stride;
  };
  const std::vector<Case> cases = {{1, 16, 96, 24, 7, 7, 1},    {3, 24, 32, 16, 14, 14, 2},
                                   {1, 8, 48, 40, 15, 9, 1},    {2, 16, 64, 32, 56, 56, 1},
                                   {1, 32, 16, 16, 1, 1, 1},    {1, 16, 32, 64, 1, 19, 2},
                                   {1, 24, 144, 32, 28, 28, 2}, {1, 16, 32, 16, 6, 97, 2}};
  std::vector<Isa> isas = {activeIsa()};
  if (activeIsa() > Isa::kAvx2) isas.push_back(Isa::kAvx2);
  for (Isa isa : isas) {
    ScopedIsaOverride forced(isa);
    const bool on = isa == Isa::kAvx512;
    for (const Case& k : cases)
      for (int threads : {1, 2}) {
        // On AVX2 a depthwise conv whose output rows are 24 columns or more (48 at stride 2)
        // compiles to planes, and the plan switches it to channel blocks: the 1x1 before it
        // writes them.
        const bool dwPacked = on || isa == Isa::kAvx2;
        const bool wide = isa == Isa::kAvx2 && (k.w - 1) / k.stride + 1 >= 24 * k.stride;
        SCOPED_TRACE(fmt::format("{}: n {} c {} m {} out {} {}x{} s{} threads {}", isaName(isa),
                                 k.n, k.c, k.m, k.outC, k.h, k.w, k.stride, threads));
        auto g = std::make_shared<const Graph>(
            invertedBlock(k.c, k.m, k.outC, k.stride, BlockVariant::kPlain));
        KernelCache cache(64, threads);
        auto plan = compilePlan(g, {Shape{k.n, k.c, k.h, k.w}}, cache);
        ASSERT_EQ(plan->steps.size(), 3u);
        EXPECT_EQ(plan->blockedValues, dwPacked ? 2 : 0);
        EXPECT_EQ(stepConv(*plan, 0).outBlocked, dwPacked ? 1 : 0);
        EXPECT_EQ(stepConv(*plan, 0).inBlocked, 0);
        EXPECT_EQ(stepConv(*plan, 1).inBlocked, dwPacked ? 1 : 0);
        EXPECT_EQ(stepConv(*plan, 1).outBlocked, dwPacked ? 1 : 0);
        EXPECT_EQ(stepConv(*plan, 2).inBlocked, dwPacked ? 1 : 0);
        EXPECT_EQ(stepConv(*plan, 2).outBlocked, 0);
        // The depthwise taps packed too: 9 vectors per 16 channels.
        EXPECT_EQ(stepConv(*plan, 1).channelBlocks, dwPacked ? 1 : 0);
        EXPECT_EQ(stepConv(*plan, 1).weightsPacked, dwPacked ? 1 : 0);
        EXPECT_EQ(plan->steps[1].packedWeight != nullptr, dwPacked);
        EXPECT_EQ(std::get<ConvParams>(cache.get(plan->steps[1].kernel->key)->params).channelBlocks,
                  dwPacked && !wide ? 1 : 0);
        for (size_t i : {size_t{0}, size_t{2}}) {
          EXPECT_EQ(stepConv(*plan, i).channelTiles, on ? 1 : 0);
          EXPECT_EQ(stepConv(*plan, i).weightsPacked, dwPacked ? 1 : 0);
          // The cached spec is the one compiled for the op alone: no layout, whatever its path.
          const auto cached = cache.get(plan->steps[i].kernel->key);
          EXPECT_EQ(std::get<ConvParams>(cached->params).outBlocked, 0);
          EXPECT_EQ(std::get<ConvParams>(cached->params).inBlocked, 0);
        }
        expectPlanMatchesReference(*plan, 21);
        expectPlanMatchesReference(*plan, 22);
      }
  }
}

// A ResNet basic block (3 x 3 conv + ReLU, then 3 x 3 conv + the block's input + ReLU; 24
// channels on 16 x 18 planes: 72 tiles of 2 x 2 outputs) in a static plan: on AVX-512 both convs
// take the Winograd path with their weights packed as 16 transformed [m, c] matrices, and match
// the reference at batch 1 and 16 on 1 and 2 threads; at 16 the block runs in batch tiles (its
// activations, 1.3 MB, past kTileBytes), whose specs keep the whole batch's path.
TEST(WeightPack, ResNetBlocksRunWinogradOnTransformedWeights) {
  const bool on = activeIsa() == Isa::kAvx512;
  GraphBuilder b("basic_block");
  auto x = b.input("x", DType::kF32, {symbolDim("N"), 24, 16, 18});
  const Attrs attrs = paddedConvRelu();
  auto w1 = b.constant(randomTensor(DType::kF32, Shape{24, 24, 3, 3}, 71), "w1");
  auto b1 = b.constant(randomTensor(DType::kF32, Shape{24}, 72), "b1");
  auto w2 = b.constant(randomTensor(DType::kF32, Shape{24, 24, 3, 3}, 73), "w2");
  auto b2 = b.constant(randomTensor(DType::kF32, Shape{24}, 74), "b2");
  auto h = b.op(OpKind::kConv2d, {x, w1, b1}, attrs, "h");
  b.output(b.op(OpKind::kConv2d, {h, w2, b2, x}, attrs, "y"));
  auto g = std::make_shared<const Graph>(b.build());
  for (int threads : {1, 2})
    for (int64_t n : {1, 16}) {
      SCOPED_TRACE(fmt::format("threads {} batch {}", threads, n));
      KernelCache cache(64, threads);
      auto plan = compilePlan(g, {Shape{n, 24, 16, 18}}, cache);
      ASSERT_EQ(plan->steps.size(), 2u);
      for (size_t i : {size_t{0}, size_t{1}}) {
        EXPECT_EQ(stepConv(*plan, i).winograd, on ? 1 : 0);
        EXPECT_EQ(stepConv(*plan, i).weightsPacked, on ? 1 : 0);
        if (plan->steps[i].tileKernel) {
          EXPECT_EQ(std::get<ConvParams>(plan->steps[i].tileKernel->params).winograd, on ? 1 : 0);
        }
      }
      EXPECT_EQ(plan->packedWeightBytes, on ? 2 * 16 * 24 * 24 * 4 : 0);
      EXPECT_EQ(plan->batchTiles.empty(), n == 1);
      expectPlanMatchesReference(*plan, 75);
      expectPlanMatchesReference(*plan, 76);
    }
}

// ---- batch tiles (compiler.cpp's planBatchTiles) ----------------------------------------------

// The inverted block's three convs are one batch tile wherever its activations per image
// outweigh its weights: a tile's images run through all three convs, then the next tile's. The
// result is the whole batch's bit for bit (each image's sums are the same sums), and the
// reference's, with tiles of 1, 3 and 4 images (as many as divide the batch and fit the
// budget), a value the run makes for a reader after it (the Add) or for the caller (the
// depthwise output), a residual read from the graph's input, 1 and 2 threads (two lanes, each
// taking the next tile). Values made and read inside the run need a tile's bytes per lane, so
// the host's arena shrinks; the plan's memory
// (arenaBytes, the modeled device's workspace) and its steps do not change.
TEST(BatchTiles, ARunOfConvsGoesTileByTileAndMatchesTheWholeBatchBitForBit) {
  struct Case {
    int64_t n, images;
    BlockVariant v;
  };
  // 28 x 28 planes: the depthwise conv's 32 channels in and out are 196 KiB per image, so a tile
  // of up to 5 images fits the 1 MiB budget.
  const std::vector<Case> cases = {
      {6, 3, BlockVariant::kPlain},      {8, 4, BlockVariant::kPlain},
      {7, 1, BlockVariant::kPlain},      {12, 4, BlockVariant::kResidual},
      {6, 3, BlockVariant::kTwoReaders}, {9, 3, BlockVariant::kDepthwiseIsAnOutput}};
  for (const Case& k : cases)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(fmt::format("n {} variant {} threads {}", k.n, static_cast<int>(k.v), threads));
      auto g = std::make_shared<const Graph>(invertedBlock(16, 32, 16, 1, k.v));
      const InputSignature sig{Shape{k.n, 16, 28, 28}};
      const auto [tiled, plain] = tiledAndPlain(g, sig, threads);
      ASSERT_EQ(tiled->batchTiles.size(), 1u);
      EXPECT_EQ(tiled->batchTiles[0].first, 0);
      EXPECT_EQ(tiled->batchTiles[0].end, 3);
      EXPECT_EQ(tiled->batchTiles[0].images, k.images);
      EXPECT_EQ(tiled->batchTiles[0].tiles, k.n / k.images);
      EXPECT_TRUE(plain->batchTiles.empty());
      EXPECT_EQ(tiled->steps.size(), plain->steps.size());
      EXPECT_EQ(tiled->arenaBytes, plain->arenaBytes);
      EXPECT_EQ(plain->hostArenaBytes, plain->arenaBytes);
      // On two threads each thread runs whole tiles (a lane), its kernels on one task.
      EXPECT_EQ(tiled->batchTiles[0].lanes, threads);
      // kPlain: the expanded and depthwise values live inside the run, at a tile's images, one
      // per lane.
      if (k.v == BlockVariant::kPlain) {
        const int64_t image = (32 * 28 * 28) * 4;
        EXPECT_EQ(tiled->hostArenaBytes, 2 * k.images * image * threads);
        EXPECT_EQ(plain->arenaBytes, 2 * k.n * image);
      }
      for (size_t i = 0; i < tiled->steps.size(); ++i) {
        const PlanStep& step = tiled->steps[i];
        ASSERT_EQ(step.tileKernel != nullptr, i < 3) << "step " << i;
        if (!step.tileKernel) continue;
        EXPECT_EQ(std::get<ConvParams>(step.tileKernel->params).n, k.images);
        EXPECT_EQ(step.tileKernel->tasks, 1);
      }
      const auto ins = makeInputs(*g, sig, 40 + k.n);
      const auto a = runPlanOn(*tiled, ins), b = runPlanOn(*plain, ins);
      ASSERT_EQ(a.size(), b.size());
      for (size_t o = 0; o < a.size(); ++o) {
        SCOPED_TRACE(o);
        ASSERT_EQ(a[o].bytes(), b[o].bytes());
        EXPECT_EQ(std::memcmp(a[o].data(), b[o].data(), a[o].bytes()), 0);
      }
      expectPlanMatchesReference(*tiled, 41);
    }
}

// Forced to AVX2 (where this machine has more), where the expansion writes channel blocks from
// its GEMM tiles for a depthwise conv on the channel-block path (stride 2 to 14 x 14, and 14 x 14
// at stride 1), and the projection reads the depthwise conv's blocks: batch tiles of the run (tile
// specs of fewer images, each tile's items split anew) give the whole batch's bits, with the
// blocked value in both plans, and the reference's result. Two threads: two lanes of tiles.
TEST(BatchTiles, OnAvx2TheBlockedExpansionRunsTileByTileBitForBit) {
  if (detectedIsa() < Isa::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  ScopedIsaOverride forced(Isa::kAvx2);
  struct Case {
    int64_t hw, stride, n;
  };
  for (const Case& k : {Case{28, 2, 8}, Case{14, 1, 12}})
    for (int threads : {1, 2}) {
      SCOPED_TRACE(fmt::format("{}x{} s{} n {} threads {}", k.hw, k.hw, k.stride, k.n, threads));
      auto g =
          std::make_shared<const Graph>(invertedBlock(16, 64, 16, k.stride, BlockVariant::kPlain));
      const InputSignature sig{Shape{k.n, 16, k.hw, k.hw}};
      const auto [tiled, plain] = tiledAndPlain(g, sig, threads);
      ASSERT_FALSE(tiled->batchTiles.empty());
      EXPECT_TRUE(plain->batchTiles.empty());
      for (const auto* plan : {tiled.get(), plain.get()}) {
        EXPECT_EQ(plan->blockedValues, 2);
        EXPECT_EQ(stepConv(*plan, 0).outBlocked, 1);
        EXPECT_EQ(stepConv(*plan, 1).inBlocked, 1);
        EXPECT_EQ(stepConv(*plan, 1).outBlocked, 1);
        EXPECT_EQ(stepConv(*plan, 2).inBlocked, 1);
      }
      ASSERT_NE(tiled->steps[0].tileKernel, nullptr);
      EXPECT_EQ(std::get<ConvParams>(tiled->steps[0].tileKernel->params).outBlocked, 1);
      const auto ins = makeInputs(*g, sig, 60 + k.n);
      const auto a = runPlanOn(*tiled, ins), b = runPlanOn(*plain, ins);
      ASSERT_EQ(a[0].bytes(), b[0].bytes());
      EXPECT_EQ(std::memcmp(a[0].data(), b[0].data(), a[0].bytes()), 0);
      expectPlanMatchesReference(*tiled, 61);
    }
}

// Five 1x1 convs in a row, the third's output also read after the run (by an Add). That value
// is made at step 2 but must live from the run's first step: tile 1 runs steps 0 and 1 after
// tile 0 wrote its images of it, and a value of those steps may not take its bytes (a plan
// without tiles would let step 0's output, dead by step 2, share them).
TEST(BatchTiles, AValueTheRunMakesForALaterReaderLivesThroughTheWholeRun) {
  GraphBuilder b("chain");
  ValueId v = b.input("x", DType::kF32, {symbolDim("N"), 16, 56, 56});
  const Attrs a = pointwiseConv();
  ValueId third = -1;
  for (int i = 0; i < 5; ++i) {
    auto w =
        b.constant(randomTensor(DType::kF32, Shape{16, 16, 1, 1}, 90 + i), fmt::format("w{}", i));
    v = b.op(OpKind::kConv2d, {v, w}, a, fmt::format("c{}", i));
    if (i == 2) third = v;
  }
  b.output(v);
  b.output(b.add(third, third));
  auto g = std::make_shared<const Graph>(b.build());
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    const InputSignature sig{Shape{3, 16, 56, 56}};  // 392 KiB per image: tiles of 1
    const auto [tiled, plain] = tiledAndPlain(g, sig, threads);
    ASSERT_EQ(tiled->batchTiles.size(), 1u);
    EXPECT_EQ(tiled->batchTiles[0].end, 5);
    EXPECT_EQ(tiled->batchTiles[0].images, 1);
    const auto ins = makeInputs(*g, sig, 43);
    const auto x = runPlanOn(*tiled, ins), y = runPlanOn(*plain, ins);
    for (size_t o = 0; o < 2; ++o) {
      SCOPED_TRACE(o);
      EXPECT_EQ(std::memcmp(x[o].data(), y[o].data(), x[o].bytes()), 0);
    }
    expectPlanMatchesReference(*tiled, 44);
  }
}

// Lanes run unsynchronised, so a value inside a run may share bytes with another only within a
// lane's block: 1x1 convs of alternating widths (16, 32, 16, 64, 16, 48, 16 channels), whose
// values die before wider ones are made, on two lanes. Every lane's copy of every value inside
// the run is disjoint from every other lane's copy of every value (planned among the run's
// values, the 64-channel value took the 32-channel one's offset, and lane 1's 32 channels then
// overlapped lane 0's 64: ShuffleNetV2, ResNet-18 and MobileNetV2 at batch 32 on two threads
// came out wrong), and the result is the untiled plan's bit for bit.
TEST(BatchTiles, LanesNeverShareBytes) {
  GraphBuilder b("widths");
  const std::vector<int64_t> widths = {16, 32, 16, 64, 16, 48, 16};
  ValueId v = b.input("x", DType::kF32, {symbolDim("N"), widths[0], 56, 56});
  const Attrs a = pointwiseConv();
  for (size_t i = 1; i < widths.size(); ++i) {
    auto w = b.constant(randomTensor(DType::kF32, Shape{widths[i], widths[i - 1], 1, 1}, 70 + i),
                        fmt::format("w{}", i));
    v = b.op(OpKind::kConv2d, {v, w}, a, fmt::format("c{}", i));
  }
  b.output(v);
  auto g = std::make_shared<const Graph>(b.build());
  const InputSignature sig{Shape{4, 16, 56, 56}};
  const auto [tiled, plain] = tiledAndPlain(g, sig, 2);
  ASSERT_EQ(tiled->batchTiles.size(), 1u);
  const Plan::BatchTile& tile = tiled->batchTiles[0];
  ASSERT_EQ(tile.lanes, 2);
  struct Range {
    int64_t begin, end, lane;
  };
  std::vector<Range> ranges;
  for (int32_t s = tile.first; s < tile.end; ++s) {
    const PlanStep& step = tiled->steps[s];
    if (step.outLaneStride == 0) continue;  // the run's last value: the graph's output
    const int64_t bytes = tiled->types[step.out].shape.numel() * 4 / tile.tiles;
    for (int64_t lane = 0; lane < tile.lanes; ++lane) {
      const int64_t at = tiled->location[step.out] + lane * step.outLaneStride;
      ranges.push_back({at, at + bytes, lane});
    }
  }
  ASSERT_EQ(ranges.size(), 2 * (widths.size() - 2));
  for (const Range& x : ranges)
    for (const Range& y : ranges)
      if (x.lane != y.lane) {
        EXPECT_TRUE(x.end <= y.begin || y.end <= x.begin)
            << "lane " << x.lane << " [" << x.begin << ", " << x.end << ") and lane " << y.lane
            << " [" << y.begin << ", " << y.end << ")";
      }
  // Against the untiled plan (six random 1x1 convs in a row drift past the reference check's
  // tolerance, tiled or not).
  const auto ins = makeInputs(*g, sig, 45);
  const auto p = runPlanOn(*tiled, ins), q = runPlanOn(*plain, ins);
  EXPECT_EQ(std::memcmp(p[0].data(), q[0].data(), p[0].bytes()), 0);
}

// Every mode on a workload whose static plans run batch tiles (static plans, automatic-dynamic
// ones before the batch turns dynamic, and geared mode's gears, which share one host arena sized
// for the largest gear's host arena; peak_bytes stays the largest plan arena at its whole batch,
// the modeled figure). Calls of 9 and 7 pad up to the gear of 12, whose tiles then run the padded
// images too. Every call matches the reference executor, on 1 and 2 threads.
TEST(BatchTiles, EveryModeMatchesTheReferenceWhereStaticPlansRunTiles) {
  const Graph g = invertedBlock(16, 32, 16, 1, BlockVariant::kResidual, 28);
  for (Mode mode : modes())
    for (int threads : {1, 2}) {
      SCOPED_TRACE(fmt::format("mode {} threads {}", modeName(mode), threads));
      SessionOptions o;
      o.mode = mode;
      o.threads = threads;
      if (mode == Mode::kGeared) gearOptions(o).fallback = GearFallback::kPad;
      Session s(g, o);
      if (mode == Mode::kGeared) {
        set_dim_gears(s, "x", {{0, {6, 12}}});
        compileGears(s);
        KernelCache cache(64, threads);
        auto largest = compilePlan(s.graph(), {Shape{12, 16, 28, 28}}, cache);
        ASSERT_FALSE(largest->batchTiles.empty());
        EXPECT_LT(largest->hostArenaBytes, largest->arenaBytes);
        EXPECT_EQ(s.stats().peakBytes, largest->arenaBytes);
      }
      for (int64_t n : {12, 9, 7, 12}) {
        auto in = makeInputs(s.graph(), {Shape{n, 16, 28, 28}}, 50 + n);
        const auto out = s.run(in);
        EXPECT_LE(maxAbsDiff(out[0], referenceRun(s.graph(), in)[0]), 1e-4) << "batch " << n;
      }
    }
}

// A residual that is a constant of the batch's shape is addressed at each tile's images like
// any other value of the batch (only the weight and bias stay put).
TEST(BatchTiles, AConstantResidualMovesWithItsTile) {
  GraphBuilder b("constres");
  const Attrs a = pointwiseConv();
  const ValueId x = b.input("x", DType::kF32, {8, 16, 28, 28});
  const ValueId w1 = b.constant(randomTensor(DType::kF32, Shape{32, 16, 1, 1}, 81), "w1");
  const ValueId w2 = b.constant(randomTensor(DType::kF32, Shape{16, 32, 1, 1}, 82), "w2");
  const ValueId b2 = b.constant(randomTensor(DType::kF32, Shape{16}, 83), "b2");
  const ValueId r = b.constant(randomTensor(DType::kF32, Shape{8, 16, 28, 28}, 84), "r");
  const ValueId c1 = b.op(OpKind::kConv2d, {x, w1}, a, "c1");
  b.output(b.op(OpKind::kConv2d, {c1, w2, b2, r}, a, "c2"));
  auto g = std::make_shared<const Graph>(b.build());
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    const auto [tiled, plain] = tiledAndPlain(g, {Shape{8, 16, 28, 28}}, threads);
    ASSERT_EQ(tiled->batchTiles.size(), 1u);
    const auto ins = makeInputs(*g, {Shape{8, 16, 28, 28}}, 47);
    const auto p = runPlanOn(*tiled, ins), q = runPlanOn(*plain, ins);
    EXPECT_EQ(std::memcmp(p[0].data(), q[0].data(), p[0].bytes()), 0);
    expectPlanMatchesReference(*tiled, 48);
  }
}

// No tile where it cannot pay: one image, a batch whose activations fit the budget whole, a conv
// whose weight outweighs its activations per image (the deep layers of ResNet-18 and
// MobileNetV2). A conv whose weight is not a constant
// ends the run before it.
TEST(BatchTiles, OneImageASmallBatchOrHeavyWeightsAreNotTiled) {
  KernelCache cache;
  auto block = std::make_shared<const Graph>(invertedBlock(16, 32, 16, 1, BlockVariant::kPlain));
  EXPECT_TRUE(compilePlan(block, {Shape{1, 16, 28, 28}}, cache)->batchTiles.empty());
  // Five images of 196 KiB fit the budget whole; six do not.
  EXPECT_TRUE(compilePlan(block, {Shape{5, 16, 28, 28}}, cache)->batchTiles.empty());
  EXPECT_EQ(compilePlan(block, {Shape{6, 16, 28, 28}}, cache)->batchTiles.size(), 1u);
  // 2 x 2 planes: per image, 768 bytes of activations against the expansion's 2 KiB of weight,
  // 1 KiB against the depthwise conv's 1,152 bytes, 768 against the projection's 2 KiB: no run,
  // though the batch's 2,048 images are 2 MiB.
  EXPECT_TRUE(compilePlan(block, {Shape{2048, 16, 2, 2}}, cache)->batchTiles.empty());
  // The projection's weight is a graph input: the run is the expansion and the depthwise conv.
  auto fed = std::make_shared<const Graph>(
      invertedBlock(16, 32, 16, 1, BlockVariant::kProjectionWeightIsInput));
  auto plan = compilePlan(fed, {Shape{8, 16, 28, 28}, Shape{16, 32, 1, 1}}, cache);
  ASSERT_EQ(plan->batchTiles.size(), 1u);
  EXPECT_EQ(plan->batchTiles[0].end, 2);
  EXPECT_EQ(plan->steps[2].tileKernel, nullptr);
  expectPlanMatchesReference(*plan, 42);
}

// On AVX-512 and on AVX2 (forced, where this machine has more; its 9 x 9 depthwise conv runs
// in channel blocks, and on both the convs on either side of it read or write blocks).
TEST(ChannelBlockLayout, ValuesOthersSeeOrOddChannelCountsStayPlanes) {
  std::vector<Isa> isas = {activeIsa()};
  if (activeIsa() > Isa::kAvx2) isas.push_back(Isa::kAvx2);
  for (Isa isa : isas) {
    ScopedIsaOverride forced(isa);
    SCOPED_TRACE(isaName(isa));
    // Blocks on each side of the depthwise conv: its input (written by the expansion), its
    // output (read by the projection).
    const int64_t in = isa >= Isa::kAvx2 ? 1 : 0;
    KernelCache cache;
    auto compile = [&](int64_t m, BlockVariant v) {
      auto g = std::make_shared<const Graph>(
          invertedBlock(16, m, v == BlockVariant::kResidual ? 16 : 32, 1, v));
      InputSignature sig{Shape{2, 16, 9, 9}};
      if (v == BlockVariant::kProjectionWeightIsInput) sig.push_back(Shape{32, m, 1, 1});
      if (v == BlockVariant::kExpandResidual) sig.push_back(Shape{2, m, 9, 9});
      auto plan = compilePlan(g, sig, cache);
      expectPlanMatchesReference(*plan, 31);
      return plan;
    };
    // 40 channels: not whole blocks of 16.
    EXPECT_EQ(compile(40, BlockVariant::kPlain)->blockedValues, 0);
    // The depthwise output is also a graph output: only the expanded value is blocked.
    auto out = compile(32, BlockVariant::kDepthwiseIsAnOutput);
    EXPECT_EQ(out->blockedValues, in);
    EXPECT_EQ(stepConv(*out, 0).outBlocked, in);
    EXPECT_EQ(stepConv(*out, 1).inBlocked, in);
    EXPECT_EQ(stepConv(*out, 1).outBlocked, 0);
    // The expanded value is also read by an Add: only the depthwise output is blocked.
    auto two = compile(32, BlockVariant::kTwoReaders);
    EXPECT_EQ(two->blockedValues, in);
    EXPECT_EQ(stepConv(*two, 0).outBlocked, 0);
    EXPECT_EQ(stepConv(*two, 1).inBlocked, 0);
    EXPECT_EQ(stepConv(*two, 1).outBlocked, in);
    // The projection's weight may change per call, so it is not packed: its input stays planes.
    auto fed = compile(32, BlockVariant::kProjectionWeightIsInput);
    EXPECT_EQ(fed->blockedValues, in);
    EXPECT_EQ(stepConv(*fed, 1).outBlocked, 0);
    EXPECT_EQ(stepConv(*fed, 2).inBlocked, 0);
    EXPECT_EQ(stepConv(*fed, 2).weightsPacked, 0);
    // A residual is added to an output in planes: the projection still reads blocks; an
    // expansion with one keeps its output in planes.
    auto res = compile(32, BlockVariant::kResidual);
    EXPECT_EQ(res->blockedValues, 2 * in);
    EXPECT_EQ(stepConv(*res, 2).inBlocked, in);
    EXPECT_EQ(stepConv(*res, 2).outBlocked, 0);
    auto expand = compile(32, BlockVariant::kExpandResidual);
    EXPECT_EQ(expand->blockedValues, in);
    EXPECT_EQ(stepConv(*expand, 0).outBlocked, 0);
    EXPECT_EQ(stepConv(*expand, 1).outBlocked, in);
  }
}

// On AVX2 a depthwise conv 24 or more columns wide compiles to planes (transposing its input
// into blocks cost more than the planes' row loop); a static plan switches it to channel blocks
// only where the 1x1 before it writes them, and packs its taps then.
TEST(ChannelBlockLayout, OnAvx2AWideDepthwiseTakesBlocksOnlyWhenItsInputComesInThem) {
  if (detectedIsa() < Isa::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  ScopedIsaOverride forced(Isa::kAvx2);
  KernelCache cache;
  auto compile = [&](BlockVariant v) {
    auto g = std::make_shared<const Graph>(invertedBlock(16, 32, 16, 1, v));
    InputSignature sig{Shape{2, 16, 11, 30}};
    if (v == BlockVariant::kExpandResidual) sig.push_back(Shape{2, 32, 11, 30});
    auto plan = compilePlan(g, sig, cache);
    expectPlanMatchesReference(*plan, 41);
    return plan;
  };
  auto plain = compile(BlockVariant::kPlain);
  EXPECT_EQ(plain->blockedValues, 2);
  EXPECT_EQ(stepConv(*plain, 0).outBlocked, 1);
  EXPECT_EQ(stepConv(*plain, 1).inBlocked, 1);
  EXPECT_EQ(stepConv(*plain, 1).outBlocked, 1);
  EXPECT_EQ(stepConv(*plain, 2).inBlocked, 1);
  EXPECT_EQ(stepConv(*plain, 1).channelBlocks, 1);
  EXPECT_EQ(stepConv(*plain, 1).weightsPacked, 1);
  EXPECT_EQ(std::get<ConvParams>(cache.get(plain->steps[1].kernel->key)->params).channelBlocks, 0);
  // The expansion adds a residual, so it writes planes: the depthwise conv stays on them, and
  // so does its output (a depthwise conv on planes writes planes).
  auto expand = compile(BlockVariant::kExpandResidual);
  EXPECT_EQ(expand->blockedValues, 0);
  EXPECT_EQ(stepConv(*expand, 1).inBlocked, 0);
  EXPECT_EQ(stepConv(*expand, 1).channelBlocks, 0);
  EXPECT_EQ(stepConv(*expand, 1).weightsPacked, 0);
  EXPECT_EQ(stepConv(*expand, 2).inBlocked, 0);
}

// Dynamic plans (symbolic dims) run the cached specs on per-call buffers: no layout decisions.
TEST(ChannelBlockLayout, ADynamicPlanKeepsPlanes) {
  auto g = std::make_shared<const Graph>(invertedBlock(16, 32, 16, 1, BlockVariant::kPlain));
  KernelCache cache;
  auto plan = compilePlan(g, {Shape{symbolDim("N"), 16, 8, 8}}, cache);
  EXPECT_FALSE(plan->isStatic);
  EXPECT_EQ(plan->blockedValues, 0);
}

TEST(WeightPack, TheLayoutPadsChannelsToVectorsInTilesOf64) {
  ConvParams p;
  p.m = 130;
  p.c = p.cg = 2;
  p.kh = p.kw = 1;
  p.group = 1;
  EXPECT_EQ(convPackedWeightFloats(p), 144 * 2);
  std::vector<float> w(130 * 2);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i + 1);
  std::vector<float> packed(144 * 2, -1.0f);
  packConvWeights(p, w.data(), packed.data());
  // Tile 0: [K = 2][64], channel c at tap k = w[c * 2 + k].
  EXPECT_EQ(packed[0 * 64 + 5], w[5 * 2 + 0]);
  EXPECT_EQ(packed[1 * 64 + 5], w[5 * 2 + 1]);
  // Tile 2 (channels 128..143, 16 wide) at 128 * 2: channels 130.. are zeros.
  EXPECT_EQ(packed[256 + 1 * 16 + 1], w[129 * 2 + 1]);
  EXPECT_EQ(packed[256 + 0 * 16 + 2], 0.0f);
  EXPECT_EQ(packed[256 + 1 * 16 + 15], 0.0f);
  p.m = int64_t{1} << 40;
  p.c = p.cg = int64_t{1} << 30;
  EXPECT_EQ(convPackedWeightFloats(p), 0);  // overflow
  p.winograd = 1;                           // 16 m c: overflows in the 16 too
  EXPECT_EQ(convPackedWeightFloats(p), 0);
  p.m = int64_t{1} << 30;
  p.c = p.cg = int64_t{1} << 29;
  EXPECT_EQ(convPackedWeightFloats(p), 0);
  p.c = p.cg = 3;
  EXPECT_EQ(convPackedWeightFloats(p), 16 * 3 * (int64_t{1} << 30));
}

}  // namespace
}  // namespace gearbox
