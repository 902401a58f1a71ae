#pragma once
// Reductions over axes shared by Mean and ReduceSum (executor/kernels/mean.cpp,
// reduce_sum.cpp): the optimized kernel sums each output's run of `reduce` elements (strided by
// `inner`) in float with four partial sums, then multiplies by `scale` (1 / count for the mean,
// 1 for the sum); the reference sums in double. Internal to the executor library.
#include "compiler/kernel_spec.h"
#include "executor/kernels/common.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels::detail {

inline void reduceRun(const ReduceParams& p, int tasks, const float* x, float* o, float scale) {
  if (p.inner == 1) {
    runRanges(tasks, p.outer, 1, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float* row = x + r * p.reduce;
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        int64_t i = 0;
        for (; i + 4 <= p.reduce; i += 4) {
          s0 += row[i];
          s1 += row[i + 1];
          s2 += row[i + 2];
          s3 += row[i + 3];
        }
        for (; i < p.reduce; ++i) s0 += row[i];
        o[r] = ((s0 + s1) + (s2 + s3)) * scale;
      }
    });
    return;
  }
  // Reduce a middle dim: accumulate whole inner rows, which vectorise.
  runRanges(tasks, p.outer, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* orow = o + r * p.inner;
      std::fill(orow, orow + p.inner, 0.0f);
      for (int64_t k = 0; k < p.reduce; ++k) {
        const float* irow = x + (r * p.reduce + k) * p.inner;
        for (int64_t i = 0; i < p.inner; ++i) orow[i] += irow[i];
      }
      if (scale != 1.0f)
        for (int64_t i = 0; i < p.inner; ++i) orow[i] *= scale;
    }
  });
}

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
