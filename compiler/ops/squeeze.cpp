// Squeeze: the compiler's hooks (compiler/ops/op_hooks.h). Like reshape it moves no element: a view
// in static plans (compiler/compiler.cpp), else one flat copy (compiler/ops/elementwise.h).
#include "compiler/ops/elementwise.h"

namespace gearbox::ops {

void compileSqueeze(KernelSpec& spec) {
  compileElementwise(spec);
}
KernelCost kernelCostSqueeze(const KernelKey& key) {
  // Modeled as the copy (read + write once), as reshape: whether it is a view is the memory
  // plan's decision, not the kernel's.
  return KernelCost{0, 2 * elementBytes(key.inputs[0])};
}
CompileCostTerms compileCostSqueeze() {
  return {25, "assumption: a contiguous copy (a view in static plans), like Reshape"};
}
void paramsToJsonSqueeze(const KernelSpec& spec, Json& p) {
  elementwiseParamsToJson(spec, p);
}
void paramsFromJsonSqueeze(const Json& p, KernelSpec& spec) {
  elementwiseParamsFromJson(p, spec);
}
void checkParamsSqueeze(const KernelSpec& spec) {
  checkElementwiseParams(spec);
}
std::string opInfoInputNameSqueeze(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
