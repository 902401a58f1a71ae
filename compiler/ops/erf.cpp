// Erf: the compiler's hooks (compiler/ops/op_hooks.h): one flat pass, out = erf(x).
#include "compiler/ops/elementwise.h"

namespace gearbox::ops {

void compileErf(KernelSpec& spec) {
  compileElementwise(spec);
  raiseTasksByFlops(spec, kernelCostErf(spec.key).flops);
}
KernelCost kernelCostErf(const KernelKey& key) {
  // Eigen's rational erf per element (flops::kErf); bandwidth-bound anyway: read once, written
  // once.
  const double bytes = elementBytes(key.inputs[0]);
  return KernelCost{flops::kErf * bytes / static_cast<double>(dtypeSize(key.dtype)), 2 * bytes};
}
CompileCostTerms compileCostErf() {
  return {25, "assumption: a one-input elementwise kernel, like Relu"};
}
void paramsToJsonErf(const KernelSpec& spec, Json& p) {
  elementwiseParamsToJson(spec, p);
}
void paramsFromJsonErf(const Json& p, KernelSpec& spec) {
  elementwiseParamsFromJson(p, spec);
}
void checkParamsErf(const KernelSpec& spec) {
  checkElementwiseParams(spec);
}
std::string opInfoInputNameErf(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
