// Clip: reference and optimized kernels, out = min(max(x, lo), hi). Written as two comparisons
// that are false for NaN, so NaN stays NaN; with lo > hi every element becomes hi (numpy.clip,
// ONNX Clip).
#include <cmath>
#include <limits>
#include <type_traits>

#include "executor/kernels/elementwise.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

// The attribute bounds in T. Integers clip to the bounds rounded inward (x >= 1.5 is x >= 2),
// and a bound beyond T's range is T's end, so no conversion overflows.
template <typename T>
std::pair<T, T> clipBounds(const Attrs& attrs) {
  const double lo = attrs.f(attr::Clip::min), hi = attrs.f(attr::Clip::max);
  if constexpr (std::is_floating_point_v<T>) {
    return {static_cast<T>(lo), static_cast<T>(hi)};
  } else {
    using L = std::numeric_limits<T>;
    // double(L::max()) rounds up to 2^63 for int64: compare with >= so the cast stays in range.
    auto toT = [](double v) {
      if (v <= static_cast<double>(L::lowest())) return L::lowest();
      if (v >= static_cast<double>(L::max())) return L::max();
      return static_cast<T>(v);
    };
    return {toT(std::ceil(lo)), toT(std::floor(hi))};
  }
}

template <typename T>
inline T clipOne(T x, T lo, T hi) {
  const T y = x < lo ? lo : x;
  return y > hi ? hi : y;
}

template <typename T>
struct ClipOp {
  T lo, hi;
  T operator()(T x) const { return clipOne(x, lo, hi); }
};

}  // namespace

void ref::refClip(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  dispatchDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto [lo, hi] = clipBounds<T>(attrs);
    const T* x = ins[0].as<const T>();
    T* o = out.as<T>();
    for (int64_t i = 0; i < out.numel(); ++i) o[i] = std::min(std::max(x[i], lo), hi);
  });
}

bool runClip(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<ElementwiseParams>(&spec.params);
  if (!p) return false;
  dispatchDType(spec.key.dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto [lo, hi] = clipBounds<T>(spec.key.attrs);
    detail::runUnary<T>(*p, spec.tasks, in[0], out, ClipOp<T>{lo, hi});
  });
  return true;
}

}  // namespace gearbox::kernels
