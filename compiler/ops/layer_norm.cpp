// LayerNorm: the compiler's hooks (compiler/ops/op_hooks.h). x is viewed as [outer, n] rows,
// n the product of the normalised dims; scale and bias (when given) are rows of n.
#include "compiler/ops/norm.h"

namespace gearbox::ops {

void compileLayerNorm(KernelSpec& spec) {
  const Shape& x = spec.key.inputs[0].shape;
  const int axis = keyAxis(spec.key, attr::LayerNorm::axis);
  NormParams p;
  p.outer = product(x, 0, axis);
  p.n = product(x, axis, x.rank());
  p.inner = 1;
  p.scale = spec.key.inputs.size() > 1 ? 1 : 0;
  p.bias = spec.key.inputs.size() > 2 ? 1 : 0;
  spec.work = 2 * elementBytes(spec.key.inputs[0]);
  spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
  spec.params = p;
}

KernelCost kernelCostLayerNorm(const KernelKey& key) {
  // Per element: the sum for the mean (1), (x - mean)^2 accumulated (3), (x - mean) * rstd (2),
  // then * scale (1) and + bias (1) when given; per row about 5 (two divisions, + epsilon, a
  // square root, a reciprocal). Bandwidth-bound: x, scale and bias read once, the output
  // written once (a row stays in cache between the passes).
  const TensorType& x = key.inputs[0];
  const double bytes = elementBytes(x);
  const double numel = bytes / static_cast<double>(dtypeSize(x.dtype));
  const int axis = keyAxis(key, attr::LayerNorm::axis);
  double rows = 1;
  for (int d = 0; d < axis && d < x.shape.rank(); ++d)
    rows *= x.shape[d] >= 0 ? static_cast<double>(x.shape[d]) : 1.0;
  double perElement = 6, read = bytes;
  for (size_t i = 1; i < key.inputs.size(); ++i) {
    perElement += 1;
    read += elementBytes(key.inputs[i]);
  }
  return KernelCost{numel * perElement + rows * 5, read + bytes};
}
CompileCostTerms compileCostLayerNorm() {
  return {40,
          "assumption: a row reduction then an elementwise pass specialised to its rows, like "
          "Mean"};
}

void paramsToJsonLayerNorm(const KernelSpec& spec, Json& j) {
  normParamsToJson(spec, j);
}
void paramsFromJsonLayerNorm(const Json& j, KernelSpec& spec) {
  normParamsFromJson(j, spec);
}
void checkParamsLayerNorm(const KernelSpec& spec) {
  checkByRecompile<NormParams>(spec, compileLayerNorm);
}
std::string opInfoInputNameLayerNorm(size_t i, size_t) {
  return i == 0 ? "input" : i == 1 ? "weight" : "bias";
}

}  // namespace gearbox::ops
