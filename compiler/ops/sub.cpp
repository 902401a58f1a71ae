// Sub: the compiler's hooks (compiler/ops/op_hooks.h); elementwise a - b with NumPy broadcasting
// through the machinery Add uses (compiler/ops/broadcast.cpp).
#include "compiler/ops/broadcast.h"

namespace gearbox::ops {

void compileSub(KernelSpec& spec) {
  compileBinary(spec);
}
KernelCost kernelCostSub(const KernelKey& key) {
  return binaryCost(key);
}
CompileCostTerms compileCostSub() {
  return {25,
          "assumption: Add's elementwise kernel with another operator, so Add's libxsmm figure"};
}
void paramsToJsonSub(const KernelSpec& spec, Json& p) {
  binaryParamsToJson(spec, p);
}
void paramsFromJsonSub(const Json& p, KernelSpec& spec) {
  binaryParamsFromJson(p, spec);
}
void checkParamsSub(const KernelSpec& spec) {
  checkBinaryParams(spec);
}
std::string opInfoInputNameSub(size_t i, size_t) {
  return i == 0 ? "self" : "other";
}

}  // namespace gearbox::ops
