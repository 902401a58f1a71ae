// Cast: reference and optimized kernels, every pair of gearbox's dtypes (graph/ops/cast.cpp
// states the rules). Conversions with undefined behaviour in C++ (a float outside an integer's
// range, NaN) are checked first and give the integer's minimum; both kernels share the one
// element conversion below, so they agree bit for bit.
#include <cmath>
#include <limits>

#include "executor/kernels/common.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

template <typename To, typename From>
To convert(From v) {
  if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    // [min, max + 1) is exactly the range that truncates into To; both bounds are powers of
    // two, so they are exact in float.
    constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
    constexpr double hi = -lo;
    const double d = static_cast<double>(v);
    return d >= lo && d < hi ? static_cast<To>(d) : std::numeric_limits<To>::min();
  } else if constexpr (std::is_integral_v<From> && std::is_integral_v<To>) {
    // Two's complement wrap, defined through the unsigned type.
    return static_cast<To>(static_cast<std::make_unsigned_t<To>>(v));
  } else {
    return static_cast<To>(v);
  }
}

template <typename To, typename From>
[[gnu::noinline]] void runCastT(const ElementwiseParams& p, int tasks, const void* in, void* out) {
  const From* x = static_cast<const From*>(in);
  To* o = static_cast<To*>(out);
  detail::runRanges(tasks, p.numel, 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) o[i] = convert<To>(x[i]);
  });
}

template <typename Fn>
void dispatchPair(DType from, DType to, Fn&& fn) {
  dispatchDType(from, [&](auto f) { dispatchDType(to, [&](auto t) { fn(f, t); }); });
}

}  // namespace

void ref::refCast(const Attrs&, std::span<const TensorView> ins, const TensorView& out) {
  dispatchPair(ins[0].dtype, out.dtype, [&](auto f, auto t) {
    using From = decltype(f);
    using To = decltype(t);
    const From* x = ins[0].as<const From>();
    To* o = out.as<To>();
    for (int64_t i = 0; i < out.numel(); ++i) o[i] = convert<To>(x[i]);
  });
}

bool runCast(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<ElementwiseParams>(&spec.params);
  if (!p) return false;
  dispatchPair(spec.key.dtype, spec.output.dtype, [&](auto f, auto t) {
    runCastT<decltype(t), decltype(f)>(*p, spec.tasks, in[0], out);
  });
  return true;
}

}  // namespace gearbox::kernels
