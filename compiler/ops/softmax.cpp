// Softmax: the compiler's hooks (compiler/ops/op_hooks.h). The input is viewed as
// [outer, n, inner] around the softmax axis; the kernel normalises each of the outer * inner
// lines of n elements (contiguous when the axis is the last, as in attention).
#include "compiler/ops/norm.h"

namespace gearbox::ops {

void compileSoftmax(KernelSpec& spec) {
  const Shape& x = spec.key.inputs[0].shape;
  const int r = x.rank();
  const int axis = keyAxis(spec.key, attr::Softmax::axis);
  NormParams p;
  p.outer = product(x, 0, axis);
  p.n = x[axis];
  p.inner = product(x, axis + 1, r);
  spec.work = 2 * elementBytes(spec.key.inputs[0]);
  spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
  raiseTasksByFlops(spec, kernelCostSoftmax(spec.key).flops);
  spec.params = p;
}

KernelCost kernelCostSoftmax(const KernelKey& key) {
  // Per element: the running max (1), x - max (1), exp (flops::kExp), the sum (1), the scaling
  // by 1 / sum (1); per line one division. Bandwidth-bound: the input is read once and the
  // output written once (a line stays in cache between the kernel's passes, as a GPU block
  // keeps its row in shared memory), the roofline traffic of a fused softmax.
  const TensorType& x = key.inputs[0];
  const double bytes = elementBytes(x);
  const double numel = bytes / static_cast<double>(dtypeSize(x.dtype));
  const int r = x.shape.rank();
  const int axis = keyAxis(key, attr::Softmax::axis);
  const double n =
      axis >= 0 && axis < r && x.shape[axis] > 0 ? static_cast<double>(x.shape[axis]) : 1.0;
  return KernelCost{numel * (4 + flops::kExp) + numel / n, 2 * bytes};
}
CompileCostTerms compileCostSoftmax() {
  return {40,
          "assumption: a row reduction then an elementwise pass specialised to its axis, like "
          "Mean"};
}

void paramsToJsonSoftmax(const KernelSpec& spec, Json& j) {
  normParamsToJson(spec, j);
}
void paramsFromJsonSoftmax(const Json& j, KernelSpec& spec) {
  normParamsFromJson(j, spec);
}
void checkParamsSoftmax(const KernelSpec& spec) {
  checkByRecompile<NormParams>(spec, compileSoftmax);
}
std::string opInfoInputNameSoftmax(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
