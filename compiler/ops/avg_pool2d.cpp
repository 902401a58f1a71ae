// AvgPool2d: the compiler's hooks (compiler/ops/op_hooks.h); shared with max_pool2d.
#include "compiler/ops/pool2d.h"

namespace gearbox::ops {

namespace a_avg = attr::AvgPool2d;

void compileAvgPool2d(KernelSpec& spec) {
  compilePool2d(spec, a_avg::kernel, a_avg::strides, a_avg::pads, -1, a_avg::count_include_pad);
}
KernelCost kernelCostAvgPool2d(const KernelKey& key) {
  return pool2dCost(key, 1.0);  // one add per window tap (the divide is per output)
}
CompileCostTerms compileCostAvgPool2d() {
  return {40, "assumption: a window loop specialised to its kernel, strides and pads, like Slice"};
}
void paramsToJsonAvgPool2d(const KernelSpec& spec, Json& p) {
  pool2dParamsToJson(spec, p);
}
void paramsFromJsonAvgPool2d(const Json& p, KernelSpec& spec) {
  pool2dParamsFromJson(p, spec);
}
void checkParamsAvgPool2d(const KernelSpec& spec) {
  checkByRecompile<PoolParams>(spec, compileAvgPool2d);
}
std::string opInfoInputNameAvgPool2d(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
