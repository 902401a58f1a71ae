// IndexSelect: the compiler's hooks (compiler/ops/op_hooks.h). The input is viewed as
// [outer, dimSize, inner] and the output as [outer, count, inner]: whole rows are copied, with
// gather's params, compile step and checks (compiler/ops/gather.h) for a 1-D index.
#include "compiler/ops/gather.h"

namespace gearbox::ops {

void compileIndexSelect(KernelSpec& spec) {
  compileRowGather(spec, static_cast<int>(spec.key.attrs.dim.value_or(0)),
                   spec.key.inputs[1].shape[0]);
}

KernelCost kernelCostIndexSelect(const KernelKey& key) {
  // A copy: the selected rows are read once and written once, and the index is read.
  const Shape& in = key.inputs[0].shape;
  const int d = static_cast<int>(key.attrs.dim.value_or(0));
  double out = elementBytes(key.inputs[0]);
  if (d >= 0 && d < in.rank() && in[d] > 0 && key.inputs[1].shape.rank() == 1)
    out = out / static_cast<double>(in[d]) * std::max<double>(0, key.inputs[1].shape[0]);
  return KernelCost{0, 2 * out + elementBytes(key.inputs[1])};
}
CompileCostTerms compileCostIndexSelect() {
  return {40, "assumption: a copy kernel with an index gather"};
}

void paramsToJsonIndexSelect(const KernelSpec& spec, Json& p) {
  rowGatherParamsToJson(spec, p);
}
void paramsFromJsonIndexSelect(const Json& p, KernelSpec& spec) {
  rowGatherParamsFromJson(p, spec);
}
void checkParamsIndexSelect(const KernelSpec& s) {
  if (s.key.inputs[1].shape.rank() != 1) paramsMismatch(s);
  checkRowGatherParams(s, static_cast<int>(s.key.attrs.dim.value_or(-1)), s.key.inputs[1].shape[0]);
}

std::string opInfoInputNameIndexSelect(size_t i, size_t) {
  return i == 0 ? "self" : "index";
}

}  // namespace gearbox::ops
