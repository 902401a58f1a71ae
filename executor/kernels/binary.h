#pragma once
// NumPy-broadcast binary elementwise kernels (Add, Mul): one implementation of every path of
// BinaryParams (binary_body.inc), instantiated per operator (executor/kernels/add.cpp, mul.cpp)
// and per ISA: the same C++ loops compiled for the baseline, AVX2 and AVX-512 in their own
// namespaces (isa_target.h), chosen at run time from activeIsa(). Internal to the executor
// library.
#include "compiler/cpu_isa.h"
#include "compiler/kernel_spec.h"
#include "executor/kernels/common.h"
#include "executor/simd/isa_target.h"

namespace gearbox::kernels {

namespace isa_baseline {
using namespace gearbox::kernels::detail;
#include "executor/simd/binary_body.inc"
}  // namespace isa_baseline

#if GEARBOX_HAVE_ISA_REGIONS
GEARBOX_ISA_BEGIN_AVX2
namespace isa_avx2 {
using namespace gearbox::kernels::detail;
#include "executor/simd/binary_body.inc"
}  // namespace isa_avx2
GEARBOX_ISA_END

GEARBOX_ISA_BEGIN_AVX512
namespace isa_avx512 {
using namespace gearbox::kernels::detail;
#include "executor/simd/binary_body.inc"
}  // namespace isa_avx512
GEARBOX_ISA_END
#endif

namespace detail {

template <typename T, typename Op>
using BinaryRangeFn = void (*)(const BinaryParams&, const T*, const T*, T*, int64_t, int64_t);

// The binaryRange of the ISA the kernels run with.
template <typename T, typename Op>
BinaryRangeFn<T, Op> binaryRangeFor(Isa isa) {
#if GEARBOX_HAVE_ISA_REGIONS
  if (isa == Isa::kAvx512) return &isa_avx512::binaryRange<T, Op>;
  if (isa == Isa::kAvx2) return &isa_avx2::binaryRange<T, Op>;
#endif
  (void)isa;
  return &isa_baseline::binaryRange<T, Op>;
}

// Not inlined into the dispatch, so run() stays a small switch whose frame costs nothing; each
// op pays only for its own frame.
template <typename T, typename Op>
[[gnu::noinline]] void runBinary(const BinaryParams& p, int tasks, const void* const* in,
                                 void* out) {
  const T* a = static_cast<const T*>(in[0]);
  const T* b = static_cast<const T*>(in[1]);
  T* o = static_cast<T*>(out);
  using Path = AddParams::Path;
  int64_t units = p.numel;  // elements for the flat paths
  if (p.path == Path::kRowA || p.path == Path::kRowB) units = p.rows;
  if (p.path == Path::kGeneral) units = p.numel / p.outDims[p.rank - 1];
  const int64_t align = units == p.numel ? 64 / static_cast<int64_t>(sizeof(T)) : 1;
  const BinaryRangeFn<T, Op> range = binaryRangeFor<T, Op>(activeIsa());
  runRanges(tasks, units, align,
            [&](int64_t begin, int64_t end) { range(p, a, b, o, begin, end); });
}

}  // namespace detail
}  // namespace gearbox::kernels
