// Clip: the compiler's hooks (compiler/ops/op_hooks.h): one flat pass, out = min(max(x, lo), hi).
#include "compiler/ops/elementwise.h"

namespace gearbox::ops {

void compileClip(KernelSpec& spec) {
  compileElementwise(spec);
}
KernelCost kernelCostClip(const KernelKey& key) {
  // Two comparisons per element; the input read once and the output written once.
  const double bytes = elementBytes(key.inputs[0]);
  return KernelCost{2 * bytes / static_cast<double>(dtypeSize(key.dtype)), 2 * bytes};
}
CompileCostTerms compileCostClip() {
  return {25, "assumption: a one-input elementwise kernel, like Relu"};
}
void paramsToJsonClip(const KernelSpec& spec, Json& p) {
  elementwiseParamsToJson(spec, p);
}
void paramsFromJsonClip(const Json& p, KernelSpec& spec) {
  elementwiseParamsFromJson(p, spec);
}
void checkParamsClip(const KernelSpec& spec) {
  checkElementwiseParams(spec);
}
std::string opInfoInputNameClip(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
