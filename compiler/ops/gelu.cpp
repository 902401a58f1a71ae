// Gelu: the compiler's hooks (compiler/ops/op_hooks.h): one flat pass, out = x * Phi(x) by erf
// (approximate=0) or tanh (approximate=1).
#include "compiler/ops/elementwise.h"

namespace gearbox::ops {

void compileGelu(KernelSpec& spec) {
  compileElementwise(spec);
  raiseTasksByFlops(spec, kernelCostGelu(spec.key).flops);
}
KernelCost kernelCostGelu(const KernelKey& key) {
  // erf form: x / sqrt(2) (1), erf, 1 + (1), 0.5 * x * (2): erf + 4. tanh form: x^3 (2), a
  // multiply-add (2), a multiply (1), tanh, 1 + (1), 0.5 * x * (2): tanh + 8. Bandwidth-bound
  // anyway: read once, written once.
  const double bytes = elementBytes(key.inputs[0]);
  const double perElement =
      key.attrs.i(attr::Gelu::approximate) == 1 ? flops::kTanh + 8 : flops::kErf + 4;
  return KernelCost{perElement * bytes / static_cast<double>(dtypeSize(key.dtype)), 2 * bytes};
}
CompileCostTerms compileCostGelu() {
  return {25, "assumption: a one-input elementwise kernel, like Relu"};
}
void paramsToJsonGelu(const KernelSpec& spec, Json& p) {
  elementwiseParamsToJson(spec, p);
}
void paramsFromJsonGelu(const Json& p, KernelSpec& spec) {
  elementwiseParamsFromJson(p, spec);
}
void checkParamsGelu(const KernelSpec& spec) {
  checkElementwiseParams(spec);
}
std::string opInfoInputNameGelu(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
