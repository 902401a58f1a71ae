#pragma once
// Reductions over axes shared by Mean and ReduceSum (executor/kernels/mean.cpp,
// reduce_sum.cpp): the optimized kernel sums each output's run of `reduce` elements (strided by
// `inner`) in float, then multiplies by `scale` (1 / count for the mean, 1 for the sum); the
// reference sums in double. Internal to the executor library.
#include "compiler/kernel_spec.h"
#include "executor/kernels/common.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels::detail {

// The run-of-axes reduction (compiled per ISA, executor/kernels/mean.cpp): each output is the
// float sum of its run of `reduce` elements (strided by `inner`) times `scale`.
void reduceRun(const ReduceParams& p, int tasks, const float* x, float* o, float scale);

// Axes that are not one run: walk every input element once and add it to its output; then
// divide by the count of reduced elements when `mean`.
inline void reduceGeneral(const ReduceParams& p, const float* x, float* o, int64_t outNumel,
                          bool mean) {
  std::fill(o, o + outNumel, 0.0f);
  Shape in;
  for (int d = 0; d < p.rank; ++d) in.push(p.dims[d]);
  int64_t count = 1;
  for (int d = 0; d < p.rank; ++d)
    if (p.mask >> d & 1) count *= p.dims[d];
  ref::detail::forEachIndex(in, [&](const int64_t* idx) {
    int64_t out = 0, inOff = 0;
    for (int d = 0; d < p.rank; ++d) {
      inOff = inOff * p.dims[d] + idx[d];
      if (!(p.mask >> d & 1)) out = out * p.dims[d] + idx[d];
    }
    o[out] += x[inOff];
  });
  if (mean)
    for (int64_t i = 0; i < outNumel; ++i) o[i] /= static_cast<float>(count);
}

// The reference: every element added in double to its output; the mean divides by the count.
inline void refReduce(std::span<const int64_t> axes, const TensorView& in, const TensorView& out,
                      bool mean) {
  const Shape& s = in.shape;
  const int r = s.rank();
  bool reduce[kMaxRank] = {};
  int64_t count = 1;
  for (int64_t a : axes) reduce[a < 0 ? a + r : a] = true;
  for (int d = 0; d < r; ++d)
    if (reduce[d]) count *= s[d];
  std::vector<double> acc(static_cast<size_t>(out.numel()), 0.0);
  const float* x = in.as<const float>();
  ref::detail::forEachIndex(s, [&](const int64_t* idx) {
    int64_t o = 0, i = 0;
    for (int d = 0; d < r; ++d) {
      i = i * s[d] + idx[d];
      if (!reduce[d]) o = o * s[d] + idx[d];
    }
    acc[static_cast<size_t>(o)] += x[i];
  });
  float* o = out.as<float>();
  for (int64_t k = 0; k < out.numel(); ++k)
    o[k] = static_cast<float>(mean ? acc[static_cast<size_t>(k)] / static_cast<double>(count)
                                   : acc[static_cast<size_t>(k)]);
}

}  // namespace gearbox::kernels::detail
