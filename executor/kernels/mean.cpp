// Mean: reference and optimized kernels, and the run-of-axes reduction shared with ReduceSum
// (executor/kernels/reduce.h). The optimized kernel sums each output's run of `reduce` elements
// (strided by `inner`) in float, a row with 16 partial sums, compiled per ISA, then multiplies
// by `scale` (1 / count for the mean, 1 for the sum); the reference sums in double. An empty
// reduction gives NaN (0 / 0), as in PyTorch.
#include "compiler/cpu_isa.h"
#include "executor/kernels/common.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/reduce.h"
#include "executor/kernels/ref_common.h"
#include "executor/simd/isa_target.h"

namespace gearbox::kernels {

// The two run-of-axes loops, compiled per ISA (isa_target.h): the same C++ auto-vectorised for
// SSE2, AVX2 and AVX-512. A row sum keeps 16 partial sums in an array, a form GCC vectorises
// without reassociating anything itself (one or two vector registers of partial sums).
#define GEARBOX_MEAN_BODY                                                                          \
  [[gnu::noinline]] void meanRows(const ReduceParams& p, const float* x, float* o, int64_t begin,  \
                                  int64_t end, float scale) {                                      \
    for (int64_t r = begin; r < end; ++r) {                                                        \
      const float* row = x + r * p.reduce;                                                         \
      float s[16] = {};                                                                            \
      int64_t i = 0;                                                                               \
      for (; i + 16 <= p.reduce; i += 16)                                                          \
        for (int j = 0; j < 16; ++j) s[j] += row[i + j];                                           \
      for (int j = 0; i < p.reduce; ++i, ++j) s[j] += row[i];                                      \
      for (int w = 8; w >= 1; w /= 2)                                                              \
        for (int j = 0; j < w; ++j) s[j] += s[j + w];                                              \
      o[r] = s[0] * scale;                                                                         \
    }                                                                                              \
  }                                                                                                \
  /* Reduce a middle dim: accumulate whole inner rows, which vectorise. */                         \
  [[gnu::noinline]] void meanInner(const ReduceParams& p, const float* x, float* o, int64_t begin, \
                                   int64_t end, float scale) {                                     \
    for (int64_t r = begin; r < end; ++r) {                                                        \
      float* orow = o + r * p.inner;                                                               \
      for (int64_t i = 0; i < p.inner; ++i) orow[i] = 0.0f;                                        \
      for (int64_t k = 0; k < p.reduce; ++k) {                                                     \
        const float* irow = x + (r * p.reduce + k) * p.inner;                                      \
        for (int64_t i = 0; i < p.inner; ++i) orow[i] += irow[i];                                  \
      }                                                                                            \
      for (int64_t i = 0; i < p.inner; ++i) orow[i] *= scale;                                      \
    }                                                                                              \
  }

namespace isa_baseline {
GEARBOX_MEAN_BODY
}  // namespace isa_baseline
#if GEARBOX_HAVE_ISA_REGIONS
GEARBOX_ISA_BEGIN_AVX2
namespace isa_avx2 {
GEARBOX_MEAN_BODY
}  // namespace isa_avx2
GEARBOX_ISA_END
GEARBOX_ISA_BEGIN_AVX512
namespace isa_avx512 {
GEARBOX_MEAN_BODY
}  // namespace isa_avx512
GEARBOX_ISA_END
#endif
#undef GEARBOX_MEAN_BODY

void detail::reduceRun(const ReduceParams& p, int tasks, const float* x, float* o, float scale) {
  using Fn = void (*)(const ReduceParams&, const float*, float*, int64_t, int64_t, float);
  const bool rows = p.inner == 1;
  Fn fn = rows ? &isa_baseline::meanRows : &isa_baseline::meanInner;
#if GEARBOX_HAVE_ISA_REGIONS
  const Isa isa = activeIsa();
  if (isa == Isa::kAvx2) fn = rows ? &isa_avx2::meanRows : &isa_avx2::meanInner;
  if (isa == Isa::kAvx512) fn = rows ? &isa_avx512::meanRows : &isa_avx512::meanInner;
#endif
  detail::runRanges(tasks, p.outer, 1,
                    [&](int64_t begin, int64_t end) { fn(p, x, o, begin, end, scale); });
}

void ref::refMean(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  kernels::detail::refReduce(attrs.ints(attr::Mean::axes), ins[0], out, /*mean=*/true);
}

bool runMean(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<ReduceParams>(&spec.params);
  if (!p) return false;
  const float* x = static_cast<const float*>(in[0]);
  float* o = static_cast<float*>(out);
  if (p->general) {
    detail::reduceGeneral(*p, x, o, spec.output.shape.numel(), /*mean=*/true);
  } else {
    detail::reduceRun(*p, spec.tasks, x, o, 1.0f / static_cast<float>(p->reduce));
  }
  return true;
}

}  // namespace gearbox::kernels
