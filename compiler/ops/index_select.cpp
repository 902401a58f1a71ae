// IndexSelect: the compiler's hooks (compiler/ops/op_hooks.h). The input is viewed as
// [outer, dimSize, inner] and the output as [outer, count, inner]: whole rows are copied.
#include "compiler/ops/op_hooks.h"

namespace gearbox::ops {

void compileIndexSelect(KernelSpec& spec) {
  const KernelKey& key = spec.key;
  const int d = static_cast<int>(key.attrs.dim.value_or(0));
  const double esize = static_cast<double>(dtypeSize(key.dtype));
  const double outBytes = static_cast<double>(spec.output.shape.numel()) * esize;
  const Shape& in = key.inputs[0].shape;
  GatherParams p;
  p.outer = product(in, 0, d);
  p.dimSize = in[d];
  p.count = key.inputs[1].shape[0];
  p.inner = product(in, d + 1, in.rank());
  p.indexType = key.inputs[1].dtype;
  p.streamingStores = useStreamingStores(outBytes, p.inner * esize);
  spec.params = p;
  spec.work = 2 * outBytes + static_cast<double>(p.count * dtypeSize(p.indexType));
  spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
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
  const GatherParams& v = paramsAs<GatherParams>(spec);
  p["outer"] = v.outer;
  p["dim_size"] = v.dimSize;
  p["count"] = v.count;
  p["inner"] = v.inner;
  p["index_dtype"] = dtypeKernelName(v.indexType);
}

void paramsFromJsonIndexSelect(const Json& p, KernelSpec& spec) {
  const std::string where = "kernel.params";
  const ErrorKind io = ErrorKind::kIo;
  GatherParams g;
  g.outer = getInt(p, "outer", where, io);
  g.dimSize = getInt(p, "dim_size", where, io);
  g.count = getInt(p, "count", where, io);
  g.inner = getInt(p, "inner", where, io);
  g.indexType = dtypeField(p, "index_dtype", where, io);
  spec.params = g;
}

void checkParamsIndexSelect(const KernelSpec& s) {
  const GatherParams& g = paramsAs<GatherParams>(s);
  const Shape& in = s.key.inputs[0].shape;
  const int d = static_cast<int>(s.key.attrs.dim.value_or(-1));
  if (d < 0 || d >= in.rank() || s.key.inputs[1].shape.rank() != 1 ||
      g.outer != dimsProduct(in, 0, d) || g.dimSize != in[d] ||
      g.inner != dimsProduct(in, d + 1, in.rank()) || g.count != s.key.inputs[1].shape[0] ||
      g.indexType != s.key.inputs[1].dtype ||
      checkedProduct({g.outer, g.count, g.inner}) != s.output.shape.numel())
    paramsMismatch(s);
}

std::string opInfoInputNameIndexSelect(size_t i, size_t) {
  return i == 0 ? "self" : "index";
}

}  // namespace gearbox::ops
