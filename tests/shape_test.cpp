#include <gtest/gtest.h>

#include "graph/error.h"
#include "graph/graph.h"

namespace gearbox {
namespace {

TEST(Shape, SymbolsAreInternedAndPrinted) {
  const int64_t b = symbolDim("B");
  EXPECT_EQ(b, symbolDim("B"));
  EXPECT_NE(b, symbolDim("T"));
  Shape s{b, 4, kAnyDim};
  EXPECT_EQ(s.toString(), "[B, 4, -1]");
  EXPECT_FALSE(s.isStatic());
  EXPECT_EQ(s.toKernelString(), "-1_4_-1");
}

TEST(Shape, StaticNumelHashAndWrap) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(Shape::scalar().numel(), 1);
  EXPECT_EQ(s.hash(), Shape({2, 3, 4}).hash());
  EXPECT_NE(s, Shape({2, 3}));
  EXPECT_EQ(s.wrapDim(-1, "x"), 2);
  EXPECT_THROW(s.wrapDim(3, "x"), Error);
  EXPECT_THROW(s.wrapDim(-4, "x"), Error);
}

TEST(Shape, RankLimit) {
  Shape s{1, 1, 1, 1, 1, 1};
  EXPECT_THROW(s.push(1), Error);
}

TEST(GraphBuilder, InfersEveryOpWithSymbols) {
  GraphBuilder b("demo");
  const int64_t B = symbolDim("B");
  auto x = b.input("x", DType::kF32, {B, 4});
  auto w = b.input("w", DType::kF32, {4, 3});
  auto s = b.add(x, x, "s");
  auto m = b.matmul(s, w, "m");
  auto c = b.cat({m, s}, 1, "c");
  Tensor idx(DType::kI64, {7});
  auto p = b.constant(idx, "p");
  auto o = b.indexSelect(c, p, -1, "o");
  b.output(o);
  Graph g = b.build();
  EXPECT_EQ(g.value(m).type.shape, Shape({B, 3}));
  EXPECT_EQ(g.value(c).type.shape, Shape({B, 7}));
  EXPECT_EQ(g.value(o).type.toString(), "f32[B, 7]");
}

TEST(GraphBuilder, BroadcastAndBatchedMatMul) {
  GraphBuilder b;
  auto a = b.input("a", DType::kF32, {5, 1, 3});
  auto c = b.input("c", DType::kF32, {4, 1});
  EXPECT_EQ(b.type(b.add(a, c)).shape, Shape({5, 4, 3}));
  auto x = b.input("x", DType::kF32, {2, 1, 3, 4});
  auto y = b.input("y", DType::kF32, {5, 4, 6});
  EXPECT_EQ(b.type(b.matmul(x, y)).shape, Shape({2, 5, 3, 6}));
}

TEST(GraphBuilder, ErrorsNameOpInputAndDim) {
  GraphBuilder b;
  auto a = b.input("a", DType::kF32, {2, 3});
  auto w = b.input("w", DType::kF32, {4, 3});
  try {
    b.matmul(a, w, "m");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("op %m = matmul"), std::string::npos) << msg;
    EXPECT_NE(msg.find("input 0 (%a) dim 1 is 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("input 1 (%w) dim 0 is 4"), std::string::npos) << msg;
  }
  auto i = b.input("i", DType::kF32, {3});
  EXPECT_THROW(b.indexSelect(a, i, 0), Error);  // index must be integer
  auto j = b.input("j", DType::kI32, {3});
  EXPECT_THROW(b.indexSelect(a, j, 2), Error);  // dim out of range
  auto k = b.input("k", DType::kF32, {2, 5, 1});
  EXPECT_THROW(b.cat({a, k}, 1), Error);  // rank mismatch
  auto l = b.input("l", DType::kF32, {3, 5});
  EXPECT_THROW(b.cat({a, l}, 1), Error);  // dim 0 mismatch
  EXPECT_THROW(b.add(a, w), Error);       // 2 vs 4 does not broadcast
}

}  // namespace
}  // namespace gearbox
