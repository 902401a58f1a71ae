// Tanh: the compiler's hooks (compiler/ops/op_hooks.h): one flat pass, out = tanh(x).
#include "compiler/ops/elementwise.h"

namespace gearbox::ops {

void compileTanh(KernelSpec& spec) {
  compileElementwise(spec);
  raiseTasksByFlops(spec, kernelCostTanh(spec.key).flops);
}
KernelCost kernelCostTanh(const KernelKey& key) {
  // Eigen's rational tanh per element (flops::kTanh); bandwidth-bound anyway: read once, written
  // once.
  const double bytes = elementBytes(key.inputs[0]);
  return KernelCost{flops::kTanh * bytes / static_cast<double>(dtypeSize(key.dtype)), 2 * bytes};
}
CompileCostTerms compileCostTanh() {
  return {25, "assumption: a one-input elementwise kernel, like Relu"};
}
void paramsToJsonTanh(const KernelSpec& spec, Json& p) {
  elementwiseParamsToJson(spec, p);
}
void paramsFromJsonTanh(const Json& p, KernelSpec& spec) {
  elementwiseParamsFromJson(p, spec);
}
void checkParamsTanh(const KernelSpec& spec) {
  checkElementwiseParams(spec);
}
std::string opInfoInputNameTanh(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
