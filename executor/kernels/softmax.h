#pragma once
// Softmax of lines of f32, the building block of Softmax (executor/kernels/softmax.cpp) and of
// any kernel that normalises attention scores (a fused attention kernel runs softmaxLine on each
// row of Q K^T it holds). Internal to the executor library.
//
// y = exp(x - max(x)) / sum(exp(x - max(x))): subtracting the max keeps exp from overflowing
// (every exponent is <= 0), the standard form (PyTorch, ONNX Runtime). exp is Eigen's
// vectorised pexp_float; a line with a NaN is NaN throughout, as in PyTorch; exp(-inf) is about
// 3e-39 instead of 0 (pexp clamps its argument at -88.7), within f32 rounding of the sum.
#include <vector>

#include "compiler/cpu_isa.h"
#include "executor/kernels/unary.h"

namespace gearbox::kernels::detail {

// The calling thread's scratch of at least n floats (grown, never shrunk, so a static plan's
// run allocates only on a thread's first call of a size).
inline float* softmaxScratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// One contiguous line of n elements; y may alias x.
inline void softmaxLine(const float* x, float* y, int64_t n) {
  if (n <= 0) return;
  ConstArrayMapF xm(x, n);
  ArrayMapF ym(y, n);
  const float m = xm.maxCoeff();
  ym = (xm - m).exp();
  const float s = ym.sum();
  ym *= 1.0f / s;
}

// `inner` lines of n elements at stride `inner` (a softmax over a dim that is not the last),
// computed a row of `inner` at a time so the vector loops run along the contiguous dim.
inline void softmaxStrided(const float* x, float* y, int64_t n, int64_t inner) {
  if (n <= 0 || inner <= 0) return;
  float* scratch = softmaxScratch(static_cast<size_t>(2 * inner));
  ArrayMapF mx(scratch, inner), sum(scratch + inner, inner);
  mx = ConstArrayMapF(x, inner);
  for (int64_t i = 1; i < n; ++i) mx = mx.max(ConstArrayMapF(x + i * inner, inner));
  sum.setZero();
  for (int64_t i = 0; i < n; ++i) {
    ArrayMapF yi(y + i * inner, inner);
    yi = (ConstArrayMapF(x + i * inner, inner) - mx).exp();
    sum += yi;
  }
  mx = sum.inverse();  // reuse: 1 / sum
  for (int64_t i = 0; i < n; ++i) ArrayMapF(y + i * inner, inner) *= mx;
}

}  // namespace gearbox::kernels::detail

namespace gearbox::kernels {

// A softmax of one row (the fused attention's scores, a Softmax op's last-dim line), per ISA. The
// default build compiles softmaxLine (softmax.h, Eigen's vectorised exp) for baseline x86-64, whose
// 4-lane exp held the BERT-style encoder's attention at 44 GFLOP/s (8% of a batch-1 call on one
// thread, 2.9 ns a score); this row runs in AVX2 or AVX-512 vectors, with the scale and the mask
// folded into its first pass. The Softmax op runs it on lines along the last dim.
//
// y[0, n) = softmax(x * scale + mask), where mask is null (none), one float added to every score
// (maskStride 0) or n floats (maskStride 1); y may alias x. A row with a NaN (or whose scores are
// all -inf) is NaN throughout, as softmaxLine gives. False, with y untouched, where `isa` has no
// vector form here (the baseline): the caller runs softmaxLine.
bool softmaxRowIsa(Isa isa, const float* x, float* y, int64_t n, float scale, const float* mask,
                   int64_t maskStride);

}  // namespace gearbox::kernels
