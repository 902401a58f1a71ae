// ReduceSum: reference and optimized kernels, the reductions shared with Mean
// (executor/kernels/reduce.h) without the scaling. An empty reduction sums to 0.
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/reduce.h"

namespace gearbox::kernels {

void ref::refReduceSum(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  kernels::detail::refReduce(attrs.ints(attr::ReduceSum::axes), ins[0], out, /*mean=*/false);
}

bool runReduceSum(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<ReduceParams>(&spec.params);
  if (!p) return false;
  const float* x = static_cast<const float*>(in[0]);
  float* o = static_cast<float*>(out);
  if (p->general) {
    detail::reduceGeneral(*p, x, o, spec.output.shape.numel(), /*mean=*/false);
  } else {
    detail::reduceRun(*p, spec.tasks, x, o, 1.0f);
  }
  return true;
}

}  // namespace gearbox::kernels
