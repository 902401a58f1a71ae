// CatGather (cat followed by index_select on the cat dim, fused by the passes): the compiler's
// hooks (compiler/ops/op_hooks.h). Inputs are viewed as [outer, dim_i, inner]; the index picks
// rows of the virtual cat.
#include "compiler/ops/op_hooks.h"

namespace gearbox::ops {

void compileCatGather(KernelSpec& spec) {
  const KernelKey& key = spec.key;
  const Shape& out = spec.output.shape;
  const int d = static_cast<int>(key.attrs.dim.value_or(0));
  const double esize = static_cast<double>(dtypeSize(key.dtype));
  const double outBytes = static_cast<double>(out.numel()) * esize;
  CatGatherParams p;
  const size_t n = key.inputs.size() - 1;
  p.outer = product(out, 0, d);
  p.inner = product(out, d + 1, out.rank());
  p.count = key.inputs[n].shape[0];
  p.indexType = key.inputs[n].dtype;
  for (size_t i = 0; i < n; ++i) p.dimSizes.push_back(key.inputs[i].shape[d]);
  p.streamingStores = useStreamingStores(outBytes, static_cast<double>(p.inner) * esize);
  spec.params = std::move(p);
  spec.work = 2 * outBytes + static_cast<double>(p.count * dtypeSize(p.indexType));
  spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
}

KernelCost kernelCostCatGather(const KernelKey& key) {
  // A copy of the selected rows (read once, written once) plus the index; the cat itself is
  // never materialised.
  const size_t n = key.inputs.size() - 1;
  const int d = static_cast<int>(key.attrs.dim.value_or(0));
  double in = 0, rows = 0;
  for (size_t i = 0; i < n; ++i) {
    in += elementBytes(key.inputs[i]);
    const Shape& s = key.inputs[i].shape;
    if (d < s.rank()) rows += std::max<double>(1, static_cast<double>(s[d]));
  }
  const Shape& index = key.inputs[n].shape;
  const double count = index.rank() == 1 ? std::max<double>(0, static_cast<double>(index[0])) : 0;
  const double out = rows > 0 ? in / rows * count : 0;
  return KernelCost{0, 2 * out + elementBytes(key.inputs[n])};
}
CompileCostTerms compileCostCatGather() {
  return {60, "assumption: Cat plus an index gather"};
}

void paramsToJsonCatGather(const KernelSpec& spec, Json& p) {
  const CatGatherParams& v = paramsAs<CatGatherParams>(spec);
  p["outer"] = v.outer;
  p["inner"] = v.inner;
  p["count"] = v.count;
  p["dim_sizes"] = v.dimSizes;
  p["index_dtype"] = dtypeKernelName(v.indexType);
}

void paramsFromJsonCatGather(const Json& p, KernelSpec& spec) {
  const std::string where = "kernel.params";
  const ErrorKind io = ErrorKind::kIo;
  CatGatherParams c;
  c.outer = getInt(p, "outer", where, io);
  c.inner = getInt(p, "inner", where, io);
  c.count = getInt(p, "count", where, io);
  c.dimSizes = getIntArray(p, "dim_sizes", where, io);
  c.indexType = dtypeField(p, "index_dtype", where, io);
  spec.params = std::move(c);
}

void checkParamsCatGather(const KernelSpec& s) {
  const CatGatherParams& c = paramsAs<CatGatherParams>(s);
  const size_t n = s.key.inputs.size() - 1;
  const Shape& index = s.key.inputs[n].shape;
  bool ok = c.dimSizes.size() == n && index.rank() == 1 && c.count == index[0] &&
            c.indexType == s.key.inputs[n].dtype &&
            checkedProduct({c.outer, c.count, c.inner}) == s.output.shape.numel();
  for (size_t i = 0; ok && i < n; ++i)
    ok = checkedProduct({c.outer, c.dimSizes[i], c.inner}) == s.key.inputs[i].shape.numel();
  if (!ok) paramsMismatch(s);
}

std::string opInfoInputNameCatGather(size_t i, size_t n) {
  return i + 1 == n ? "index" : "tensors";
}

}  // namespace gearbox::ops
