// Mean: the compiler's hooks (compiler/ops/op_hooks.h), the reduction shared with ReduceSum
// (compiler/ops/reduce.cpp).
#include "compiler/ops/reduce.h"
#include "compiler/ops/window_params.h"

namespace gearbox::ops {

void compileMean(KernelSpec& spec) {
  compileReduce(spec, attr::Mean::axes);
}

KernelCost kernelCostMean(const KernelKey& key) {
  return reduceCost(key);
}
CompileCostTerms compileCostMean() {
  return {40, "assumption: a reduction specialised to its axes, like Transpose's address pattern"};
}

void paramsToJsonMean(const KernelSpec& spec, Json& j) {
  reduceParamsToJson(spec, j);
}

void paramsFromJsonMean(const Json& j, KernelSpec& spec) {
  reduceParamsFromJson(j, spec);
}

void checkParamsMean(const KernelSpec& spec) {
  checkByRecompile<ReduceParams>(spec, compileMean);
}

std::string opInfoInputNameMean(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
