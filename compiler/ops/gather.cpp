// Gather: the compiler's hooks (compiler/ops/op_hooks.h). data is viewed as
// [outer, dimSize, inner] and the output as [outer, count, inner], count the number of indices
// (any rank): index_select's params and row copy (compiler/ops/gather.h,
// executor/kernels/gather.h), whose shared hooks live here too.
#include "compiler/ops/gather.h"

namespace gearbox::ops {
namespace {

int gatherAxis(const KernelKey& key) {
  const int r = key.inputs[0].shape.rank();
  const int64_t a = key.attrs.i(attr::Gather::axis);
  return static_cast<int>(a < 0 ? a + r : a);
}

}  // namespace

void compileRowGather(KernelSpec& spec, int d, int64_t count) {
  const KernelKey& key = spec.key;
  const double esize = static_cast<double>(dtypeSize(key.dtype));
  const double outBytes = static_cast<double>(spec.output.shape.numel()) * esize;
  const Shape& in = key.inputs[0].shape;
  GatherParams p;
  p.outer = product(in, 0, d);
  p.dimSize = in[d];
  p.count = count;
  p.inner = product(in, d + 1, in.rank());
  p.indexType = key.inputs[1].dtype;
  p.streamingStores = useStreamingStores(outBytes, static_cast<double>(p.inner) * esize);
  spec.params = p;
  spec.work = 2 * outBytes + static_cast<double>(p.count * dtypeSize(p.indexType));
  spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
}

void rowGatherParamsToJson(const KernelSpec& spec, Json& p) {
  const GatherParams& v = paramsAs<GatherParams>(spec);
  p["outer"] = v.outer;
  p["dim_size"] = v.dimSize;
  p["count"] = v.count;
  p["inner"] = v.inner;
  p["index_dtype"] = dtypeKernelName(v.indexType);
}

void rowGatherParamsFromJson(const Json& p, KernelSpec& spec) {
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

void checkRowGatherParams(const KernelSpec& s, int d, int64_t count) {
  const GatherParams& g = paramsAs<GatherParams>(s);
  const Shape& in = s.key.inputs[0].shape;
  if (d < 0 || d >= in.rank() || g.outer != dimsProduct(in, 0, d) || g.dimSize != in[d] ||
      g.inner != dimsProduct(in, d + 1, in.rank()) || g.count != count ||
      g.indexType != s.key.inputs[1].dtype ||
      checkedProduct({g.outer, g.count, g.inner}) != s.output.shape.numel())
    paramsMismatch(s);
}

void compileGather(KernelSpec& spec) {
  compileRowGather(spec, gatherAxis(spec.key), spec.key.inputs[1].shape.numel());
}

KernelCost kernelCostGather(const KernelKey& key) {
  // A copy: the selected rows read once and written once, and the indices read.
  const Shape& in = key.inputs[0].shape;
  const int d = gatherAxis(key);
  double rows = 1;
  for (int64_t v : key.inputs[1].shape) rows *= v >= 0 ? static_cast<double>(v) : 1.0;
  double out = elementBytes(key.inputs[0]);
  if (d >= 0 && d < in.rank()) out = out / std::max<double>(1, in[d]) * rows;
  return KernelCost{0, 2 * out + elementBytes(key.inputs[1])};
}
CompileCostTerms compileCostGather() {
  return {40, "assumption: IndexSelect's copy kernel with an index gather, so its figure"};
}

void paramsToJsonGather(const KernelSpec& spec, Json& p) {
  rowGatherParamsToJson(spec, p);
}
void paramsFromJsonGather(const Json& p, KernelSpec& spec) {
  rowGatherParamsFromJson(p, spec);
}
void checkParamsGather(const KernelSpec& s) {
  checkRowGatherParams(s, gatherAxis(s.key), s.key.inputs[1].shape.numel());
}

std::string opInfoInputNameGather(size_t i, size_t) {
  return i == 0 ? "self" : "indices";
}

}  // namespace gearbox::ops
