// Reshape: the compiler's hooks (compiler/ops/op_hooks.h). Inputs are contiguous, so a reshape
// moves no element: when the memory plan lets the output share the input's buffer (a view, see
// compiler/memory_plan.h) the kernel finds out == in and does nothing; otherwise it is one flat
// copy of numel elements.
#include "compiler/ops/elementwise.h"

namespace gearbox::ops {

void compileReshape(KernelSpec& spec) {
  compileElementwise(spec);
}
KernelCost kernelCostReshape(const KernelKey& key) {
  // Modeled as the copy (read + write once): the view case moves nothing, but whether a view is
  // possible is the memory plan's decision, not the kernel's.
  return KernelCost{0, 2 * elementBytes(key.inputs[0])};
}
CompileCostTerms compileCostReshape() {
  return {25,
          "assumption: a contiguous copy (a view in static plans), taken equal to Add's libxsmm "
          "figure"};
}
void paramsToJsonReshape(const KernelSpec& spec, Json& p) {
  elementwiseParamsToJson(spec, p);
}
void paramsFromJsonReshape(const Json& p, KernelSpec& spec) {
  elementwiseParamsFromJson(p, spec);
}
void checkParamsReshape(const KernelSpec& spec) {
  checkElementwiseParams(spec);
}
std::string opInfoInputNameReshape(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
