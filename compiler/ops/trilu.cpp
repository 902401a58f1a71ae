// Trilu: the compiler's hooks (compiler/ops/op_hooks.h). x is viewed as [batch, rows, cols];
// each row keeps one contiguous run of its columns (the triangle) and zeroes the rest.
#include "compiler/ops/window_params.h"

namespace gearbox::ops {
namespace {

constexpr FieldList<TriluParams, 5> kTriluFields{{
    {"batch", &TriluParams::batch},
    {"rows", &TriluParams::rows},
    {"cols", &TriluParams::cols},
    {"k", &TriluParams::k},
    {"upper", &TriluParams::upper},
}};

}  // namespace

void compileTrilu(KernelSpec& spec) {
  const Shape& x = spec.key.inputs[0].shape;
  const int r = x.rank();
  TriluParams p;
  p.batch = product(x, 0, r - 2);
  p.rows = x[r - 2];
  p.cols = x[r - 1];
  p.k = spec.key.attrs.i(attr::Trilu::k);
  p.upper = spec.key.attrs.i(attr::Trilu::upper);
  spec.work = 2 * elementBytes(spec.key.inputs[0]);
  spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
  spec.params = p;
}

KernelCost kernelCostTrilu(const KernelKey& key) {
  // A masked copy: no arithmetic; read once, written once.
  return KernelCost{0, 2 * elementBytes(key.inputs[0])};
}
CompileCostTerms compileCostTrilu() {
  return {25, "assumption: a one-input elementwise kernel (a masked copy), like Relu"};
}

void paramsToJsonTrilu(const KernelSpec& spec, Json& j) {
  flatToJson(paramsAs<TriluParams>(spec), kTriluFields, j);
}
void paramsFromJsonTrilu(const Json& j, KernelSpec& spec) {
  spec.params = flatFromJson(j, kTriluFields);
}
void checkParamsTrilu(const KernelSpec& spec) {
  checkByRecompile<TriluParams>(spec, compileTrilu);
}
std::string opInfoInputNameTrilu(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
