// Unsqueeze: reference and optimized kernels; the same bytes as the input
// (executor/kernels/copy.h).
#include "executor/kernels/copy.h"
#include "executor/kernels/op_kernels.h"

namespace gearbox::kernels {

void ref::refUnsqueeze(const Attrs&, std::span<const TensorView> ins, const TensorView& out) {
  detail::refViewCopy(ins[0], out);
}

bool runUnsqueeze(const KernelSpec& spec, const void* const* in, void* out) {
  return detail::runViewCopy(spec, in[0], out);
}

}  // namespace gearbox::kernels
