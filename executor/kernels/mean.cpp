// Mean: reference and optimized kernels, the reductions shared with ReduceSum
// (executor/kernels/reduce.h) scaled by 1 / count. An empty reduction gives NaN (0 / 0), as in
// PyTorch.
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/reduce.h"

namespace gearbox::kernels {

void ref::refMean(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  kernels::detail::refReduce(attrs.ints(attr::Mean::axes), ins[0], out, /*mean=*/true);
}

bool runMean(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<ReduceParams>(&spec.params);
  if (!p) return false;
  const float* x = static_cast<const float*>(in[0]);
  float* o = static_cast<float*>(out);
  if (p->general) {
    detail::reduceGeneral(*p, x, o, spec.output.shape.numel(), /*mean=*/true);
  } else {
    detail::reduceRun(*p, spec.tasks, x, o, 1.0f / static_cast<float>(p->reduce));
  }
  return true;
}

}  // namespace gearbox::kernels
