// Add: the compiler's hooks (compiler/ops/op_hooks.h); the broadcast machinery it shares with
// Mul is in compiler/ops/broadcast.cpp.
#include "compiler/ops/broadcast.h"

namespace gearbox::ops {

void compileAdd(KernelSpec& spec) {
  compileBinary(spec);
}
KernelCost kernelCostAdd(const KernelKey& key) {
  return binaryCost(key);
}
CompileCostTerms compileCostAdd() {
  return {25, "libxsmm: JIT of a small kernel < 25 us (docs/performance anchors)"};
}
void paramsToJsonAdd(const KernelSpec& spec, Json& p) {
  binaryParamsToJson(spec, p);
}
void paramsFromJsonAdd(const Json& p, KernelSpec& spec) {
  binaryParamsFromJson(p, spec);
}
void checkParamsAdd(const KernelSpec& spec) {
  checkBinaryParams(spec);
}
std::string opInfoInputNameAdd(size_t i, size_t) {
  return i == 0 ? "self" : "other";
}

}  // namespace gearbox::ops
