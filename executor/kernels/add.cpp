// Add: reference and optimized kernels. The optimized paths (same shape, scalar, row, general
// strided) are the broadcast machinery shared with Mul (executor/kernels/binary.h).
#include <functional>

#include "executor/kernels/binary.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {

void ref::refAdd(const Attrs&, std::span<const TensorView> ins, const TensorView& out) {
  ref::detail::binary(ins[0], ins[1], out, std::plus<>{});
}

bool runAdd(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<BinaryParams>(&spec.params);
  if (!p) return false;
  dispatchDType(spec.key.dtype, [&](auto tag) {
    using T = decltype(tag);
    detail::runBinary<T, std::plus<T>>(*p, spec.tasks, in, out);
  });
  return true;
}

}  // namespace gearbox::kernels
