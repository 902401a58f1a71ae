// Pad: reference and optimized kernels (constant mode, negative pads crop). The optimized kernel
// writes the output one row of its innermost (merged) dim at a time: a row whose outer position
// falls in the padding is all `value`; any other row is `value`, one block copy of the input row,
// `value` again.
#include <cmath>
#include <limits>
#include <type_traits>

#include "executor/kernels/common.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

// The pad value in T: integers take it truncated toward zero, saturated at T's range so the
// conversion never overflows; NaN (impossible after normalizeAttrs) would give 0.
template <typename T>
T padValue(const Attrs& attrs) {
  const double v = attrs.f(attr::Pad::value);
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    using L = std::numeric_limits<T>;
    if (!(v == v)) return T(0);
    if (v <= static_cast<double>(L::lowest())) return L::lowest();
    if (v >= static_cast<double>(L::max())) return L::max();
    return static_cast<T>(v);
  }
}

template <typename T>
[[gnu::noinline]] void runPadT(const PadParams& p, int tasks, T value, const void* in, void* out) {
  if (p.numel == 0) return;
  const T* src = static_cast<const T*>(in);
  T* dst = static_cast<T*>(out);
  const int last = p.rank - 1;
  const int64_t outLen = p.outDims[last], inLen = p.inDims[last], b = p.begins[last];
  // The output positions [lo, hi) of a row that hold input elements (hi <= lo: none).
  const int64_t lo = std::clamp<int64_t>(b, 0, outLen);
  const int64_t hi = std::max(lo, std::clamp<int64_t>(b + inLen, 0, outLen));
  detail::runRanges(tasks, p.numel / outLen, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      T* orow = dst + r * outLen;
      // The input row of output row r, unless r lies in the padding of an outer dim.
      int64_t inRow = 0, stride = 1, rem = r;
      bool inside = true;
      for (int d = last - 1; d >= 0 && inside; --d) {
        const int64_t i = rem % p.outDims[d] - p.begins[d];
        rem /= p.outDims[d];
        inside = i >= 0 && i < p.inDims[d];
        inRow += i * stride;
        stride *= p.inDims[d];
      }
      if (!inside || hi == lo) {
        std::fill(orow, orow + outLen, value);
        continue;
      }
      std::fill(orow, orow + lo, value);
      std::memcpy(orow + lo, src + inRow * inLen + (lo - b),
                  static_cast<size_t>(hi - lo) * sizeof(T));
      std::fill(orow + hi, orow + outLen, value);
    }
  });
}

}  // namespace

void ref::refPad(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  using namespace ref::detail;
  const TensorView& in = ins[0];
  const auto pads = attrs.ints(attr::Pad::pads);
  const int r = in.shape.rank();
  dispatchDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T value = padValue<T>(attrs);
    const T* x = in.as<const T>();
    T* o = out.as<T>();
    forEachIndex(out.shape, [&](const int64_t* idx) {
      // Output index i of dim d is input index i - begin_d, if that lies inside the input.
      int64_t src[kMaxRank];
      bool inside = true;
      for (int d = 0; d < r; ++d) {
        src[d] = idx[d] - pads[d];
        inside = inside && src[d] >= 0 && src[d] < in.shape[d];
      }
      o[offsetOf(out.shape, idx)] = inside ? x[offsetOf(in.shape, src)] : value;
    });
  });
}

bool runPad(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<PadParams>(&spec.params);
  if (!p) return false;
  dispatchDType(spec.key.dtype, [&](auto tag) {
    using T = decltype(tag);
    runPadT<T>(*p, spec.tasks, padValue<T>(spec.key.attrs), in[0], out);
  });
  return true;
}

}  // namespace gearbox::kernels
