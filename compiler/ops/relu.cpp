// Relu: the compiler's hooks (compiler/ops/op_hooks.h): one flat pass, out = max(x, 0).
#include "compiler/ops/elementwise.h"

namespace gearbox::ops {

void compileRelu(KernelSpec& spec) {
  compileElementwise(spec);
}
KernelCost kernelCostRelu(const KernelKey& key) {
  // One comparison per element; the input read once and the output written once.
  const double bytes = elementBytes(key.inputs[0]);
  return KernelCost{bytes / static_cast<double>(dtypeSize(key.dtype)), 2 * bytes};
}
CompileCostTerms compileCostRelu() {
  return {25, "assumption: a one-input elementwise kernel, taken equal to Add's libxsmm figure"};
}
void paramsToJsonRelu(const KernelSpec& spec, Json& p) {
  elementwiseParamsToJson(spec, p);
}
void paramsFromJsonRelu(const Json& p, KernelSpec& spec) {
  elementwiseParamsFromJson(p, spec);
}
void checkParamsRelu(const KernelSpec& spec) {
  checkElementwiseParams(spec);
}
std::string opInfoInputNameRelu(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
