#pragma once
// One-input f32 elementwise kernels (sqrt, erf, tanh, gelu): one flat pass, split into tasks
// and written through emitBlocks (streaming stores for large outputs), with the per-block math
// done by Eigen's vectorised packet functions. GCC does not vectorise calls to expf/erff/tanhf
// at -O3 without -ffast-math (errno, and no SIMD declarations), so a plain loop over libm
// would run one element at a time; Eigen's functions are polynomial or rational
// approximations evaluated on whole vectors (their FLOPs are compiler/kernel_cost.h's
// flops::k*). Internal to the executor library.

// GCC 12 reports false -Wmaybe-uninitialized warnings inside its own vector intrinsics when
// they are inlined from Eigen (matmul.cpp says the same).
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>
#pragma GCC diagnostic pop

#include "compiler/kernel_spec.h"
#include "executor/kernels/common.h"

namespace gearbox::kernels::detail {

using ArrayMapF = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMapF = Eigen::Map<const Eigen::ArrayXf>;

// out[i] = f(x[i]) for the spec's numel elements, f applied to Eigen array blocks:
// f(ConstArrayMapF in, ArrayMapF out).
template <typename F>
[[gnu::noinline]] void runUnaryF32(const ElementwiseParams& p, int tasks, const void* in, void* out,
                                   const F& f) {
  const float* x = static_cast<const float*>(in);
  float* o = static_cast<float*>(out);
  detail::runRanges(tasks, p.numel, 16, [&](int64_t begin, int64_t end) {
    detail::emitBlocks(o + begin, end - begin, p.streamingStores,
                       [&](float* d, int64_t off, int64_t len) {
                         f(ConstArrayMapF(x + begin + off, len), ArrayMapF(d, len));
                       });
    if (p.streamingStores) detail::streamFence();
  });
}

}  // namespace gearbox::kernels::detail
