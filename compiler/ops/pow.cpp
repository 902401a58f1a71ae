// Pow: the compiler's hooks (compiler/ops/op_hooks.h); elementwise a ** b (f32) with NumPy
// broadcasting through the machinery Add uses (compiler/ops/broadcast.cpp).
#include "compiler/ops/broadcast.h"

namespace gearbox::ops {

void compilePow(KernelSpec& spec) {
  compileBinary(spec);
  raiseTasksByFlops(spec, kernelCostPow(spec.key).flops);
}
KernelCost kernelCostPow(const KernelKey& key) {
  // glibc's powf per output element: log, multiply, exp (flops::kPow).
  KernelCost c = binaryCost(key);
  c.flops *= flops::kPow;
  return c;
}
CompileCostTerms compileCostPow() {
  return {25,
          "assumption: Add's elementwise kernel with another operator, so Add's libxsmm figure"};
}
void paramsToJsonPow(const KernelSpec& spec, Json& p) {
  binaryParamsToJson(spec, p);
}
void paramsFromJsonPow(const Json& p, KernelSpec& spec) {
  binaryParamsFromJson(p, spec);
}
void checkParamsPow(const KernelSpec& spec) {
  checkBinaryParams(spec);
}
std::string opInfoInputNamePow(size_t i, size_t) {
  return i == 0 ? "self" : "exponent";
}

}  // namespace gearbox::ops
