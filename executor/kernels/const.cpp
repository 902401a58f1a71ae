// Const is data, not a kernel: both hooks refuse (the dispatchers never reach them for a
// Const, which compileKernelSpec and ref::runOp reject first).
#include "executor/kernels/op_kernels.h"
#include "graph/error.h"

namespace gearbox::kernels {

void ref::refConst(const Attrs&, std::span<const TensorView>, const TensorView&) {
  fail(ErrorKind::kShape, "reference: const is data, not a kernel");
}

bool runConst(const KernelSpec&, const void* const*, void*) {
  return false;
}

}  // namespace gearbox::kernels
