// Sigmoid: the compiler's hooks (compiler/ops/op_hooks.h): one flat pass, out = 1 / (1 + exp(-x)).
#include "compiler/ops/elementwise.h"

namespace gearbox::ops {

void compileSigmoid(KernelSpec& spec) {
  compileElementwise(spec);
}
KernelCost kernelCostSigmoid(const KernelKey& key) {
  // exp, an add and a division per element, counted as 4 flops (exp as two, a common
  // convention for transcendentals); bandwidth-bound anyway: read once, written once.
  const double bytes = elementBytes(key.inputs[0]);
  return KernelCost{4 * bytes / static_cast<double>(dtypeSize(key.dtype)), 2 * bytes};
}
CompileCostTerms compileCostSigmoid() {
  return {25, "assumption: a one-input elementwise kernel, like Relu"};
}
void paramsToJsonSigmoid(const KernelSpec& spec, Json& p) {
  elementwiseParamsToJson(spec, p);
}
void paramsFromJsonSigmoid(const Json& p, KernelSpec& spec) {
  elementwiseParamsFromJson(p, spec);
}
void checkParamsSigmoid(const KernelSpec& spec) {
  checkElementwiseParams(spec);
}
std::string opInfoInputNameSigmoid(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
