// Div: reference and optimized kernels, f32 only (IEEE division). The optimized paths (same
// shape, scalar, row, general strided) are the broadcast machinery shared with Add
// (executor/kernels/binary.h). Both divide in f32, so they agree bit for bit.
#include <functional>

#include "executor/kernels/binary.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {

void ref::refDiv(const Attrs&, std::span<const TensorView> ins, const TensorView& out) {
  // Inference accepts f32 only.
  ref::detail::binary(ins[0], ins[1], out, [](float a, float b) { return a / b; });
}

bool runDiv(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<BinaryParams>(&spec.params);
  if (!p || spec.key.dtype != DType::kF32) return false;
  detail::runBinary<float, std::divides<float>>(*p, spec.tasks, in, out);
  return true;
}

}  // namespace gearbox::kernels
