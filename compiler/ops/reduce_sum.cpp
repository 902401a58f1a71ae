// ReduceSum: the compiler's hooks (compiler/ops/op_hooks.h), the reduction shared with Mean
// (compiler/ops/reduce.cpp).
#include "compiler/ops/reduce.h"
#include "compiler/ops/window_params.h"

namespace gearbox::ops {

void compileReduceSum(KernelSpec& spec) {
  compileReduce(spec, attr::ReduceSum::axes);
}

KernelCost kernelCostReduceSum(const KernelKey& key) {
  return reduceCost(key);
}
CompileCostTerms compileCostReduceSum() {
  return {40, "assumption: Mean's reduction without the final scaling, so Mean's figure"};
}

void paramsToJsonReduceSum(const KernelSpec& spec, Json& j) {
  reduceParamsToJson(spec, j);
}

void paramsFromJsonReduceSum(const Json& j, KernelSpec& spec) {
  reduceParamsFromJson(j, spec);
}

void checkParamsReduceSum(const KernelSpec& spec) {
  checkByRecompile<ReduceParams>(spec, compileReduceSum);
}

std::string opInfoInputNameReduceSum(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
