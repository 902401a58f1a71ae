// Geared mode: seed 001's walkthrough, product/zip, exact match and pad-up, differential
// against the reference executor, padding refusal, and parallel up-front compiles that share
// kernels.
#include "executor/modes/geared.h"

#include <gtest/gtest.h>

#include "executor/session.h"
#include "graph/error.h"
#include "test_models.h"

namespace gearbox {
namespace {

using testing_models::seed001;
using testing_models::seed001Sig;

SessionOptions geared(MergePolicy merge = MergePolicy::kZip, bool pad = false,
                      DeviceKind device = DeviceKind::kInline) {
  SessionOptions o;
  o.mode = Mode::kGeared;
  gearOptions(o).merge = merge;
  gearOptions(o).fallback = pad ? GearFallback::kPad : GearFallback::kError;
  o.device = device;
  return o;
}

// Up-front compiles go through the host (issue 21): the gears cost exactly what static mode
// pays when it compiles the same two shapes at its calls, in every counter and MODELED term.
TEST(Geared, UpFrontCompilesCostExactlyWhatStaticPaysForTheSameShapes) {
  Session g(seed001(), geared());
  set_dim_gears(g, "x1", {{0, {2, 4}}});
  set_dim_gears(g, "x2", {{0, {2, 4}}});
  compileGears(g);
  SessionOptions so;
  so.mode = Mode::kStatic;
  Session s(seed001(), so);
  for (int64_t n : {2, 4}) s.run(makeInputs(s.graph(), seed001Sig(n), n));
  EXPECT_EQ(g.stats().graphCompiles, s.stats().graphCompiles);
  EXPECT_EQ(g.stats().kernelCompiles, s.stats().kernelCompiles);
  EXPECT_GT(g.stats().modeled.compileUs, 0);
  EXPECT_DOUBLE_EQ(g.stats().modeled.compileUs, s.stats().modeled.compileUs);
  EXPECT_DOUBLE_EQ(g.stats().modeledCompileUs, s.stats().modeledCompileUs);
}

TEST(Geared, Seed001WalkthroughCompilesTwoPlansUpFrontAndNothingAtRunTime) {
  for (DeviceKind device : {DeviceKind::kInline, DeviceKind::kStream}) {
    Session s(seed001(), geared(MergePolicy::kZip, false, device));
    set_dim_gears(s, "x1", {{0, {2, 4}}});
    set_dim_gears(s, "x2", {{0, {2, 4}}});
    compileGears(s);
    EXPECT_EQ(s.stats().graphCompiles, 2);
    EXPECT_EQ(s.stats().kernelCompiles, 2);
    EXPECT_EQ(gearOptionLines(s),
              (std::vector<std::string>{"ge.dynamicDims = 2,2;4,4", "ge.dynamicNodeType = 1",
                                        "ge.inputShape = x1:-1,2;x2:-1,2"}));
    for (int64_t n : {2, 4, 2}) {
      auto in = makeInputs(s.graph(), seed001Sig(n), n);
      auto out = s.run(in);
      EXPECT_TRUE(out[0].equals(referenceRun(s.graph(), in)[0]));
      EXPECT_FALSE(s.history().back().graphCompiled);
      EXPECT_TRUE(s.history().back().kernelsCompiled.empty());
    }
    EXPECT_EQ(s.stats().graphCompiles, 2);
    EXPECT_EQ(s.stats().kernelCompiles, 2);
    EXPECT_EQ(s.stats().launches, 3);  // one whole-graph launch per call
    EXPECT_EQ(s.stats().syncs, 3);
    EXPECT_EQ(s.stats().planCacheHits, 3);
  }
}

TEST(Geared, ProductGivesFourGears) {
  Session s(seed001(), geared(MergePolicy::kProduct));
  set_dim_gears(s, "x1", {{0, {2, 4}}});
  set_dim_gears(s, "x2", {{0, {2, 4}}});
  compileGears(s);
  EXPECT_EQ(gearSet(s)->size(), 4u);
  EXPECT_EQ(gearSet(s)->dynamicDimsOption(), "2,2;2,4;4,2;4,4");
  // (2,2)+(4,2) is a gear but does not broadcast (the seed says so too): those two gears are
  // reported and skipped, the other two compile.
  EXPECT_EQ(gearedCounters(s.stats()).gears, 2);
  EXPECT_EQ(s.stats().graphCompiles, 2);
  try {
    s.run(std::vector<Tensor>{Tensor(DType::kF32, {2, 2}), Tensor(DType::kF32, {4, 2})});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kGear) << e.what();
    EXPECT_NE(std::string(e.what()).find("match gear 1, which could not be compiled"),
              std::string::npos)
        << e.what();
  }
}

TEST(Geared, ShapeOutsideTheGearsIsAnErrorAndCompilesNothing) {
  Session s(seed001(), geared());
  set_dim_gears(s, "x1", {{0, {2, 4}}});
  set_dim_gears(s, "x2", {{0, {2, 4}}});
  compileGears(s);
  try {
    s.run(makeInputs(s.graph(), seed001Sig(3), 0));
    FAIL() << "expected a gear error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kGear);
    EXPECT_EQ(std::string(e.what()),
              "input 'x1' dim 0 = 3 is not in the gears [2, 4] (shape [3, 2] is not in the "
              "dynamic dimension list configured by dynamic_dims)");
  }
  EXPECT_EQ(s.stats().graphCompiles, 2);
  EXPECT_EQ(s.stats().kernelCompiles, 2);
}

TEST(Geared, PadRunsOnTheCoveringGearAndReturnsTheExactResult) {
  Session s(seed001(), geared(MergePolicy::kZip, true));
  set_dim_gears(s, "x1", {{0, {2, 4}}});
  set_dim_gears(s, "x2", {{0, {2, 4}}});
  auto in = makeInputs(s.graph(), seed001Sig(3), 7);
  auto out = s.run(in);  // compiles the gears on first use
  EXPECT_EQ(out[0].shape(), Shape({3, 2}));
  EXPECT_TRUE(out[0].equals(referenceRun(s.graph(), in)[0]));
  const CallRecord& r = s.history().back();
  const GearedCall call = gearedCall(r);
  EXPECT_TRUE(call.padded);
  EXPECT_EQ(call.gear, 1);
  EXPECT_EQ(call.realElements, 12);
  EXPECT_EQ(call.paddedElements, 16);
  EXPECT_EQ(gearedCounters(s.stats()).paddedCalls, 1);
  EXPECT_EQ(s.stats().allocations, 2);  // the two padded inputs, from the device pool
  // Larger than every gear: no gear covers it.
  EXPECT_THROW(s.run(makeInputs(s.graph(), seed001Sig(5), 0)), Error);
}

TEST(Geared, PaddingIsRefusedWhereItWouldReachARealOutput) {
  GraphBuilder b("catpad");
  auto x = b.input("x", DType::kF32, {kAnyDim, 2});
  auto y = b.input("y", DType::kF32, {3, 2});
  b.output(b.cat({x, y}, 0, "c"));
  Session s(b.build(), geared(MergePolicy::kZip, true));
  set_dim_gears(s, "x", {{0, {2, 4}}});
  try {
    compileGears(s);
    FAIL() << "expected the padding analysis to refuse";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kGear);
    EXPECT_NE(std::string(e.what()).find("op %c = cat"), std::string::npos) << e.what();
  }
}

// [y; x] with x padded: the padding ends the output, which is sliced back to 3 + x's real rows
// (the plan's offset), and every real row is the unpadded run's.
TEST(Geared, ACatWithThePaddedInputLastIsSlicedBackByItsOffset) {
  GraphBuilder b("cattail");
  auto x = b.input("x", DType::kF32, {kAnyDim, 2});
  auto y = b.input("y", DType::kF32, {3, 2});
  b.output(b.cat({y, x}, 0, "c"));
  Session s(b.build(), geared(MergePolicy::kZip, true));
  set_dim_gears(s, "x", {{0, {2, 4}}});
  for (int64_t rows : {1, 2, 3}) {
    auto in = makeInputs(s.graph(), {Shape{rows, 2}, Shape{3, 2}}, 40 + rows);
    auto out = s.run(in);
    EXPECT_EQ(out[0].shape(), Shape({3 + rows, 2}));
    EXPECT_TRUE(out[0].equals(referenceRun(s.graph(), in)[0])) << rows;
  }
  EXPECT_EQ(gearedCounters(s.stats()).paddedCalls, 2);
}

TEST(Geared, DifferentialExactAndPaddedOnTheFourOpModel) {
  for (bool pad : {false, true}) {
    Session s(testing_models::fourOps(), geared(MergePolicy::kZip, pad));
    set_dim_gears(s, "x", {{0, {1, 3, 8, 16}}});
    std::vector<int64_t> batches =
        pad ? std::vector<int64_t>{1, 2, 5, 7, 8, 9, 16, 3} : std::vector<int64_t>{1, 3, 8, 16, 3};
    for (size_t i = 0; i < batches.size(); ++i) {
      auto in = makeInputs(s.graph(), {Shape{batches[i], 4}, Shape{4, 3}}, 100 + i);
      auto out = s.run(in);
      auto ref = referenceRun(s.graph(), in);
      ASSERT_EQ(out[0].shape(), ref[0].shape());
      EXPECT_LE(maxAbsDiff(out[0], ref[0]), 1e-5) << "batch " << batches[i];
    }
    EXPECT_EQ(s.stats().graphCompiles, 4);
  }
}

TEST(Geared, NonGearedDimsAreSpecialisedToTheFirstSeenValue) {
  GraphBuilder b("two_dyn");
  auto x = b.input("x", DType::kF32, {kAnyDim, kAnyDim});
  b.output(b.add(x, x, "y"));
  Session s(b.build(), geared());
  set_dim_gears(s, "x", {{0, {2, 4}}});
  s.run(std::vector<Tensor>{randomTensor(DType::kF32, {2, 5}, 1)});
  EXPECT_EQ(gearOptionLines(s)[2], "ge.inputShape = x:-1,5");
  try {
    s.run(std::vector<Tensor>{randomTensor(DType::kF32, {4, 6}, 1)});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "input 'x' dim 1: expected 5, actual 6 (not a geared dim)");
  }
}

TEST(Geared, ParallelUpFrontCompileSharesKernels) {
  // Each MatMul depends on one geared input only, so across the 64 product gears the same
  // op shape recurs and must compile once, even with gears compiled in parallel.
  GraphBuilder b("share");
  auto x = b.input("x", DType::kF32, {kAnyDim, 4});
  auto y = b.input("y", DType::kF32, {kAnyDim, 4});
  auto w = b.input("w", DType::kF32, {4, 4});
  b.output(b.matmul(x, w, "mx"));
  b.output(b.matmul(y, w, "my"));
  Session s(b.build(), geared(MergePolicy::kProduct));
  set_dim_gears(s, "x", {{0, {2, 3, 4, 5, 6, 7, 8, 9}}});
  set_dim_gears(s, "y", {{0, {2, 3, 4, 5, 6, 7, 8, 9}}});
  compileGears(s);
  EXPECT_EQ(s.stats().graphCompiles, 64);
  // x@w and y@w have the same op shape for the same size: 8 distinct MatMul kernels in all.
  EXPECT_EQ(s.stats().kernelCompiles, 8);
  EXPECT_EQ(s.stats().kernelCacheHits, 64 * 2 - 8);
}

}  // namespace
}  // namespace gearbox
