// Sqrt: the compiler's hooks (compiler/ops/op_hooks.h): one flat pass, out = sqrt(x).
#include "compiler/ops/elementwise.h"

namespace gearbox::ops {

void compileSqrt(KernelSpec& spec) {
  compileElementwise(spec);
}
KernelCost kernelCostSqrt(const KernelKey& key) {
  // One square root per element (flops::kSqrt); bandwidth-bound anyway: read once, written once.
  const double bytes = elementBytes(key.inputs[0]);
  return KernelCost{flops::kSqrt * bytes / static_cast<double>(dtypeSize(key.dtype)), 2 * bytes};
}
CompileCostTerms compileCostSqrt() {
  return {25, "assumption: a one-input elementwise kernel, like Relu"};
}
void paramsToJsonSqrt(const KernelSpec& spec, Json& p) {
  elementwiseParamsToJson(spec, p);
}
void paramsFromJsonSqrt(const Json& p, KernelSpec& spec) {
  elementwiseParamsFromJson(p, spec);
}
void checkParamsSqrt(const KernelSpec& spec) {
  checkElementwiseParams(spec);
}
std::string opInfoInputNameSqrt(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
