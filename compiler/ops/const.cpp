// Const: data, not a kernel. It still defines every hook (ops.def requires them); the compile
// path never calls them because compileKernelSpec refuses a Const key first.
#include <fmt/format.h>

#include "compiler/ops/op_hooks.h"

namespace gearbox::ops {

void compileConst(KernelSpec& spec) {
  fail(ErrorKind::kShape, "kernel {}: const is data, not a kernel", spec.name);
}
KernelCost kernelCostConst(const KernelKey&) {
  return {};  // no kernel runs: the data is bound at plan time
}
CompileCostTerms compileCostConst() {
  return {0, "no kernel: a constant is data in the plan, loaded with it"};
}
void paramsToJsonConst(const KernelSpec&, Json&) {}
void paramsFromJsonConst(const Json&, KernelSpec&) {
  fail(ErrorKind::kIo, "a const is not a kernel");
}
void checkParamsConst(const KernelSpec&) {
  fail(ErrorKind::kIo, "a const is not a kernel");
}
std::string opInfoInputNameConst(size_t i, size_t) {
  return fmt::format("input{}", i);
}

}  // namespace gearbox::ops
