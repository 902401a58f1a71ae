// The optimized CatGather kernel against the reference kernel, over row sizes on both sides of
// its 64-byte block path (rows of 1 element, 60/64/68 bytes, 196 bytes as in 14 x 14 maps, and
// large rows), 4- and 8-byte elements, both index dtypes, and 1-3 tasks (task ranges start in
// the middle of the index list).
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "executor/kernels.h"
#include "graph/error.h"

namespace gearbox {
namespace {

struct KernelCase {
  std::vector<int64_t> parts;  // sizes along the cat dim
  int64_t outer, inner;
  DType dtype, indexType;
  int tasks;
};

std::string caseName(const KernelCase& c) {
  std::string s;
  for (int64_t p : c.parts) s += std::to_string(p) + "_";
  s += "outer" + std::to_string(c.outer) + "_inner" + std::to_string(c.inner) + "_";
  s += std::string(dtypeName(c.dtype)) + "_" + std::string(dtypeName(c.indexType)) + "_tasks" +
       std::to_string(c.tasks);
  return s;
}

class CatGatherKernel : public ::testing::TestWithParam<KernelCase> {};

TEST_P(CatGatherKernel, MatchesTheReference) {
  const KernelCase& c = GetParam();
  std::vector<Tensor> ins;
  std::vector<TensorType> types;
  int64_t total = 0;
  for (size_t i = 0; i < c.parts.size(); ++i) {
    ins.push_back(randomTensor(c.dtype, {c.outer, c.parts[i], c.inner}, 17 + i));
    types.push_back({c.dtype, ins.back().shape()});
    total += c.parts[i];
  }
  // Every position once in random order, then a few repeats: a gather may read a row twice.
  std::vector<int64_t> pick(static_cast<size_t>(total));
  std::iota(pick.begin(), pick.end(), 0);
  std::mt19937 rng(5);
  std::shuffle(pick.begin(), pick.end(), rng);
  pick.push_back(0);
  pick.push_back(total - 1);
  Tensor index(c.indexType, {static_cast<int64_t>(pick.size())});
  for (size_t j = 0; j < pick.size(); ++j) {
    if (c.indexType == DType::kI32) {
      index.as<int32_t>()[j] = static_cast<int32_t>(pick[j]);
    } else {
      index.as<int64_t>()[j] = pick[j];
    }
  }
  types.push_back({c.indexType, index.shape()});

  KernelSpec spec = *compileKernelSpec(makeKernelKey(OpKind::kCatGather, types, Attrs{1}));
  spec.tasks = c.tasks;  // the split is policy; every split must give the same bytes
  std::vector<const void*> ptrs;
  std::vector<TensorView> views;
  for (const Tensor& t : ins) {
    ptrs.push_back(t.data());
    views.push_back(t.view());
  }
  ptrs.push_back(index.data());
  Tensor got(c.dtype, spec.output.shape), want(c.dtype, spec.output.shape);
  kernels::run(spec, ptrs.data(), got.data());
  kernels::ref::catGather(views, index.view(), 1, want.view());
  EXPECT_TRUE(got.equals(want));

  // An out-of-range value is an index error before anything is written.
  if (c.indexType == DType::kI32) {
    index.as<int32_t>()[1] = static_cast<int32_t>(total);
  } else {
    index.as<int64_t>()[1] = total;
  }
  try {
    kernels::run(spec, ptrs.data(), got.data());
    ADD_FAILURE() << "expected an index error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIndex);
  }
}

std::vector<KernelCase> kernelCases() {
  std::vector<KernelCase> out;
  for (int64_t inner : {1, 15, 16, 17, 49, 196, 1000})
    for (DType dtype : {DType::kF32, DType::kI64})
      for (int tasks : {1, 3})
        out.push_back({{3, 5}, 4, inner, dtype, tasks == 1 ? DType::kI64 : DType::kI32, tasks});
  out.push_back({{116, 116}, 2, 196, DType::kF32, DType::kI64, 2});
  out.push_back({{2, 3, 4}, 1, 49, DType::kF32, DType::kI32, 2});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, CatGatherKernel, ::testing::ValuesIn(kernelCases()),
                         [](const auto& info) { return caseName(info.param); });

}  // namespace
}  // namespace gearbox
