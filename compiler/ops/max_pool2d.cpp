// MaxPool2d: the compiler's hooks (compiler/ops/op_hooks.h); shared with avg_pool2d.
#include "compiler/ops/pool2d.h"

namespace gearbox::ops {

namespace a_max = attr::MaxPool2d;

void compileMaxPool2d(KernelSpec& spec) {
  compilePool2d(spec, a_max::kernel, a_max::strides, a_max::pads, a_max::dilations, -1);
}
KernelCost kernelCostMaxPool2d(const KernelKey& key) {
  return pool2dCost(key, 1.0);  // one comparison per window tap
}
CompileCostTerms compileCostMaxPool2d() {
  return {40, "assumption: a window loop specialised to its kernel, strides and pads, like Slice"};
}
void paramsToJsonMaxPool2d(const KernelSpec& spec, Json& p) {
  pool2dParamsToJson(spec, p);
}
void paramsFromJsonMaxPool2d(const Json& p, KernelSpec& spec) {
  pool2dParamsFromJson(p, spec);
}
void checkParamsMaxPool2d(const KernelSpec& spec) {
  checkByRecompile<PoolParams>(spec, compileMaxPool2d);
}
std::string opInfoInputNameMaxPool2d(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
