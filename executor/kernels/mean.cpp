// Mean: reference and optimized kernels. The optimized kernel sums each output's run of
// `reduce` elements (strided by `inner`) in float, a row with 16 partial sums, compiled per ISA;
// the reference sums in double. An empty reduction gives NaN (0 / 0), as in PyTorch.
#include "compiler/cpu_isa.h"
#include "executor/kernels/common.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"
#include "executor/simd/isa_target.h"

namespace gearbox::kernels {

// The two run-of-axes loops, compiled per ISA (isa_target.h): the same C++ auto-vectorised for
// SSE2, AVX2 and AVX-512. A row sum keeps 16 partial sums in an array, a form GCC vectorises
// without reassociating anything itself (one or two vector registers of partial sums).
#define GEARBOX_MEAN_BODY                                                                          \
  [[gnu::noinline]] void meanRows(const ReduceParams& p, const float* x, float* o, int64_t begin,  \
                                  int64_t end) {                                                   \
    const float scale = 1.0f / static_cast<float>(p.reduce);                                       \
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
                                   int64_t end) {                                                  \
    const float scale = 1.0f / static_cast<float>(p.reduce);                                       \
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

namespace {

void meanRun(const ReduceParams& p, int tasks, const float* x, float* o) {
  using Fn = void (*)(const ReduceParams&, const float*, float*, int64_t, int64_t);
  const bool rows = p.inner == 1;
  Fn fn = rows ? &isa_baseline::meanRows : &isa_baseline::meanInner;
#if GEARBOX_HAVE_ISA_REGIONS
  const Isa isa = activeIsa();
  if (isa == Isa::kAvx2) fn = rows ? &isa_avx2::meanRows : &isa_avx2::meanInner;
  if (isa == Isa::kAvx512) fn = rows ? &isa_avx512::meanRows : &isa_avx512::meanInner;
#endif
  detail::runRanges(tasks, p.outer, 1,
                    [&](int64_t begin, int64_t end) { fn(p, x, o, begin, end); });
}

// Axes that are not one run: walk every input element once and add it to its output.
void meanGeneral(const ReduceParams& p, const float* x, float* o, int64_t outNumel) {
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
  for (int64_t i = 0; i < outNumel; ++i) o[i] /= static_cast<float>(count);
}

}  // namespace

void ref::refMean(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  const Shape& s = ins[0].shape;
  const int r = s.rank();
  bool reduce[kMaxRank] = {};
  int64_t count = 1;
  for (int64_t a : attrs.ints(attr::Mean::axes)) {
    reduce[a < 0 ? a + r : a] = true;
  }
  for (int d = 0; d < r; ++d)
    if (reduce[d]) count *= s[d];
  std::vector<double> acc(static_cast<size_t>(out.numel()), 0.0);
  const float* x = ins[0].as<const float>();
  detail::forEachIndex(s, [&](const int64_t* idx) {
    int64_t o = 0, i = 0;
    for (int d = 0; d < r; ++d) {
      i = i * s[d] + idx[d];
      if (!reduce[d]) o = o * s[d] + idx[d];
    }
    acc[static_cast<size_t>(o)] += x[i];
  });
  float* o = out.as<float>();
  for (int64_t k = 0; k < out.numel(); ++k)
    o[k] = static_cast<float>(acc[static_cast<size_t>(k)] / static_cast<double>(count));
}

bool runMean(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<ReduceParams>(&spec.params);
  if (!p) return false;
  const float* x = static_cast<const float*>(in[0]);
  float* o = static_cast<float*>(out);
  if (p->general) {
    meanGeneral(*p, x, o, spec.output.shape.numel());
  } else {
    meanRun(*p, spec.tasks, x, o);
  }
  return true;
}

}  // namespace gearbox::kernels
