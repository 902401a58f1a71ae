// Tensor::wrap: tensors over storage the caller owns (how the Python binding passes NumPy
// arrays without a copy). Run under ASan too, which the Python tests are not.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "executor/session.h"
#include "graph/error.h"
#include "graph/text.h"

namespace gearbox {
namespace {

const char* kSeed001 =
    "graph seed001(%x1: f32[-1, 2], %x2: f32[-1, 2]) {\n  %y = add(%x1, %x2)\n  return %y\n}\n";

// Wraps `count` floats starting `offset` floats into `buf`, counting releases.
Tensor wrapFloats(std::vector<float>& buf, size_t offset, const Shape& shape, int& releases) {
  auto* p = reinterpret_cast<std::byte*>(buf.data() + offset);
  return Tensor::wrap(DType::kF32, shape,
                      std::shared_ptr<std::byte>(p, [&releases](std::byte*) { ++releases; }));
}

class TensorWrap : public ::testing::TestWithParam<std::string> {};

TEST_P(TensorWrap, EveryModeReadsWrappedUnalignedInputs) {
  const Mode mode = *parseMode(GetParam());
  for (int64_t rows : {1, 3, 7}) {
    // Offset by one float: 4-byte aligned, never 64-byte aligned.
    std::vector<float> a(static_cast<size_t>(rows * 2 + 1)), b(a.size());
    std::iota(a.begin(), a.end(), 0.0f);
    std::iota(b.begin(), b.end(), 100.0f);
    int releases = 0;
    {
      SessionOptions opts;
      opts.mode = mode;
      Session s(parseGraph(kSeed001), opts);
      std::vector<Tensor> in;
      in.push_back(wrapFloats(a, 1, Shape{rows, 2}, releases));
      in.push_back(wrapFloats(b, 1, Shape{rows, 2}, releases));
      EXPECT_EQ(in[0].bytes(), static_cast<size_t>(rows * 2 * 4));
      const auto out = s.run(in);
      const auto ref = referenceRun(s.graph(), in);
      ASSERT_EQ(out.size(), 1u);
      EXPECT_TRUE(out[0].equals(ref[0]));
      EXPECT_EQ(out[0].as<float>()[0], a[1] + b[1]);
      EXPECT_EQ(releases, 0);  // still referenced by `in`
    }
    EXPECT_EQ(releases, 2);  // each wrapped buffer released exactly once
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, TensorWrap,
                         ::testing::Values("static", "eager", "dynamic", "auto"));

TEST(TensorWrapShape, NonStaticShapeIsAShapeError) {
  std::vector<float> buf(4);
  int releases = 0;
  EXPECT_THROW(wrapFloats(buf, 0, Shape{-1, 2}, releases), Error);
}

}  // namespace
}  // namespace gearbox
