// Flatten: the compiler's hooks (compiler/ops/op_hooks.h). Like reshape it moves no element: a view
// in static plans (compiler/compiler.cpp), else one flat copy (compiler/ops/elementwise.h).
#include "compiler/ops/elementwise.h"

namespace gearbox::ops {

void compileFlatten(KernelSpec& spec) {
  compileElementwise(spec);
}
KernelCost kernelCostFlatten(const KernelKey& key) {
  // Modeled as the copy (read + write once), as reshape: whether it is a view is the memory
  // plan's decision, not the kernel's.
  return KernelCost{0, 2 * elementBytes(key.inputs[0])};
}
CompileCostTerms compileCostFlatten() {
  return {25, "assumption: a contiguous copy (a view in static plans), like Reshape"};
}
void paramsToJsonFlatten(const KernelSpec& spec, Json& p) {
  elementwiseParamsToJson(spec, p);
}
void paramsFromJsonFlatten(const Json& p, KernelSpec& spec) {
  elementwiseParamsFromJson(p, spec);
}
void checkParamsFlatten(const KernelSpec& spec) {
  checkElementwiseParams(spec);
}
std::string opInfoInputNameFlatten(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
