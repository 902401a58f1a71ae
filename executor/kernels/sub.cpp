// Sub: reference and optimized kernels. The optimized paths (same shape, scalar, row, general
// strided) are the broadcast machinery shared with Add (executor/kernels/binary.h). Integer
// subtraction wraps (computed in the unsigned type, where overflow is defined).
#include <type_traits>

#include "executor/kernels/binary.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

template <typename T>
struct Minus {
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
    } else {
      return a - b;
    }
  }
};

}  // namespace

void ref::refSub(const Attrs&, std::span<const TensorView> ins, const TensorView& out) {
  ref::detail::binary(ins[0], ins[1], out,
                      [](auto a, auto b) { return Minus<decltype(a)>{}(a, b); });
}

bool runSub(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<BinaryParams>(&spec.params);
  if (!p) return false;
  dispatchDType(spec.key.dtype, [&](auto tag) {
    using T = decltype(tag);
    detail::runBinary<T, Minus<T>>(*p, spec.tasks, in, out);
  });
  return true;
}

}  // namespace gearbox::kernels
