// Unsqueeze: the compiler's hooks (compiler/ops/op_hooks.h). Like reshape it moves no element: a
// view in static plans (compiler/compiler.cpp), else one flat copy (compiler/ops/elementwise.h).
#include "compiler/ops/elementwise.h"

namespace gearbox::ops {

void compileUnsqueeze(KernelSpec& spec) {
  compileElementwise(spec);
}
KernelCost kernelCostUnsqueeze(const KernelKey& key) {
  // Modeled as the copy (read + write once), as reshape: whether it is a view is the memory
  // plan's decision, not the kernel's.
  return KernelCost{0, 2 * elementBytes(key.inputs[0])};
}
CompileCostTerms compileCostUnsqueeze() {
  return {25, "assumption: a contiguous copy (a view in static plans), like Reshape"};
}
void paramsToJsonUnsqueeze(const KernelSpec& spec, Json& p) {
  elementwiseParamsToJson(spec, p);
}
void paramsFromJsonUnsqueeze(const Json& p, KernelSpec& spec) {
  elementwiseParamsFromJson(p, spec);
}
void checkParamsUnsqueeze(const KernelSpec& spec) {
  checkElementwiseParams(spec);
}
std::string opInfoInputNameUnsqueeze(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
