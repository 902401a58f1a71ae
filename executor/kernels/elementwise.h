#pragma once
// Unary elementwise kernels (Relu, Clip, Sigmoid): one loop (unary_body.inc) compiled for the
// baseline, AVX2 and AVX-512 in their own namespaces (isa_target.h) and chosen at run time from
// activeIsa(). Internal to the executor library.
#include "compiler/cpu_isa.h"
#include "compiler/kernel_spec.h"
#include "executor/kernels/common.h"
#include "executor/simd/isa_target.h"

namespace gearbox::kernels {

namespace isa_baseline {
using namespace gearbox::kernels::detail;
#include "executor/simd/unary_body.inc"
}  // namespace isa_baseline

#if GEARBOX_HAVE_ISA_REGIONS
GEARBOX_ISA_BEGIN_AVX2
namespace isa_avx2 {
using namespace gearbox::kernels::detail;
#include "executor/simd/unary_body.inc"
}  // namespace isa_avx2
GEARBOX_ISA_END

GEARBOX_ISA_BEGIN_AVX512
namespace isa_avx512 {
using namespace gearbox::kernels::detail;
#include "executor/simd/unary_body.inc"
}  // namespace isa_avx512
GEARBOX_ISA_END
#endif

namespace detail {

// out[i] = f(in[i]) over the spec's numel elements, split over `tasks` whole cache lines.
template <typename T, typename F>
[[gnu::noinline]] void runUnary(const ElementwiseParams& p, int tasks, const void* in, void* out,
                                const F& f) {
  using Fn = void (*)(const T*, T*, int64_t, int64_t, bool, const F&);
  Fn range = &isa_baseline::unaryRange<T, F>;
#if GEARBOX_HAVE_ISA_REGIONS
  const Isa isa = activeIsa();
  if (isa == Isa::kAvx512) range = &isa_avx512::unaryRange<T, F>;
  if (isa == Isa::kAvx2) range = &isa_avx2::unaryRange<T, F>;
#endif
  const T* x = static_cast<const T*>(in);
  T* o = static_cast<T*>(out);
  runRanges(tasks, p.numel, 64 / static_cast<int64_t>(sizeof(T)),
            [&](int64_t begin, int64_t end) { range(x, o, begin, end, p.streamingStores, f); });
}

}  // namespace detail
}  // namespace gearbox::kernels
