// Cast: the compiler's hooks (compiler/ops/op_hooks.h): one flat pass converting numel
// elements from the input's dtype to the output's (ElementwiseParams).
#include "compiler/ops/elementwise.h"
#include "compiler/ops/window_params.h"

namespace gearbox::ops {

void compileCast(KernelSpec& spec) {
  ElementwiseParams p;
  p.numel = spec.output.shape.numel();
  spec.params = p;
  spec.work = elementBytes(spec.key.inputs[0]) + elementBytes(spec.output);
  spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
}
KernelCost kernelCostCast(const KernelKey& key) {
  // One conversion per element (counted as 1 flop); the input read, the output written.
  const TensorType out = inferNode(keyContext(key));
  return KernelCost{elementBytes(key.inputs[0]) / static_cast<double>(dtypeSize(key.dtype)),
                    elementBytes(key.inputs[0]) + elementBytes(out)};
}
CompileCostTerms compileCostCast() {
  return {25, "assumption: a one-input elementwise kernel, like Relu"};
}
void paramsToJsonCast(const KernelSpec& spec, Json& p) {
  elementwiseParamsToJson(spec, p);
}
void paramsFromJsonCast(const Json& p, KernelSpec& spec) {
  elementwiseParamsFromJson(p, spec);
}
void checkParamsCast(const KernelSpec& spec) {
  checkElementwiseParams(spec);
}
std::string opInfoInputNameCast(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
