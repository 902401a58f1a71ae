// Div: the compiler's hooks (compiler/ops/op_hooks.h); elementwise a / b (f32) with NumPy
// broadcasting through the machinery Add uses (compiler/ops/broadcast.cpp).
#include "compiler/ops/broadcast.h"

namespace gearbox::ops {

void compileDiv(KernelSpec& spec) {
  compileBinary(spec);
}
KernelCost kernelCostDiv(const KernelKey& key) {
  // One division per output element (counted as 1 flop, like an add: see flops::kSqrt).
  return binaryCost(key);
}
CompileCostTerms compileCostDiv() {
  return {25,
          "assumption: Add's elementwise kernel with another operator, so Add's libxsmm figure"};
}
void paramsToJsonDiv(const KernelSpec& spec, Json& p) {
  binaryParamsToJson(spec, p);
}
void paramsFromJsonDiv(const Json& p, KernelSpec& spec) {
  binaryParamsFromJson(p, spec);
}
void checkParamsDiv(const KernelSpec& spec) {
  checkBinaryParams(spec);
}
std::string opInfoInputNameDiv(size_t i, size_t) {
  return i == 0 ? "self" : "other";
}

}  // namespace gearbox::ops
