// Mul: the compiler's hooks (compiler/ops/op_hooks.h); elementwise a * b with NumPy
// broadcasting through the machinery Add uses (compiler/ops/broadcast.cpp).
#include "compiler/ops/broadcast.h"

namespace gearbox::ops {

void compileMul(KernelSpec& spec) {
  compileBinary(spec);
}
KernelCost kernelCostMul(const KernelKey& key) {
  return binaryCost(key);
}
CompileCostTerms compileCostMul() {
  return {25,
          "assumption: Add's elementwise kernel with another operator, so Add's libxsmm figure"};
}
void paramsToJsonMul(const KernelSpec& spec, Json& p) {
  binaryParamsToJson(spec, p);
}
void paramsFromJsonMul(const Json& p, KernelSpec& spec) {
  binaryParamsFromJson(p, spec);
}
void checkParamsMul(const KernelSpec& spec) {
  checkBinaryParams(spec);
}
std::string opInfoInputNameMul(size_t i, size_t) {
  return i == 0 ? "self" : "other";
}

}  // namespace gearbox::ops
