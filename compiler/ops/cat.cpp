// Cat: the compiler's hooks (compiler/ops/op_hooks.h). Input i is viewed as
// [outer, dim_i * inner]; each output row is the inputs' rows side by side.
#include <algorithm>

#include "compiler/ops/op_hooks.h"

namespace gearbox::ops {

void compileCat(KernelSpec& spec) {
  const KernelKey& key = spec.key;
  const Shape& out = spec.output.shape;
  const int d = static_cast<int>(key.attrs.dim.value_or(0));
  const double esize = static_cast<double>(dtypeSize(key.dtype));
  const double outBytes = static_cast<double>(out.numel()) * esize;
  CatParams p;
  const int64_t inner = product(out, d + 1, out.rank());
  p.outer = product(out, 0, d);
  for (const TensorType& t : key.inputs) p.rowElems.push_back(t.shape[d] * inner);
  p.outRowElems = out[d] * inner;
  // Every segment must be long enough to stream; one short input would mix store kinds.
  const int64_t shortest = *std::min_element(p.rowElems.begin(), p.rowElems.end());
  p.streamingStores = useStreamingStores(outBytes, static_cast<double>(shortest) * esize);
  spec.params = std::move(p);
  spec.work = 2 * outBytes;
  spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
}

KernelCost kernelCostCat(const KernelKey& key) {
  // A copy: every input read once, the output (their sum) written once.
  double in = 0;
  for (const TensorType& t : key.inputs) in += elementBytes(t);
  return KernelCost{0, 2 * in};
}
CompileCostTerms compileCostCat() {
  return {40, "assumption: a copy kernel specialised like Add, slightly more parameters"};
}

void paramsToJsonCat(const KernelSpec& spec, Json& p) {
  const CatParams& v = paramsAs<CatParams>(spec);
  p["outer"] = v.outer;
  p["row_elems"] = v.rowElems;
  p["out_row_elems"] = v.outRowElems;
}

void paramsFromJsonCat(const Json& p, KernelSpec& spec) {
  const std::string where = "kernel.params";
  const ErrorKind io = ErrorKind::kIo;
  CatParams c;
  c.outer = getInt(p, "outer", where, io);
  c.rowElems = getIntArray(p, "row_elems", where, io);
  c.outRowElems = getInt(p, "out_row_elems", where, io);
  spec.params = std::move(c);
}

void checkParamsCat(const KernelSpec& s) {
  const CatParams& c = paramsAs<CatParams>(s);
  bool ok = c.rowElems.size() == s.key.inputs.size() && c.outer >= 0;
  int64_t sum = 0;
  for (size_t i = 0; ok && i < c.rowElems.size(); ++i) {
    ok = checkedProduct({c.outer, c.rowElems[i]}) == s.key.inputs[i].shape.numel() &&
         !__builtin_add_overflow(sum, c.rowElems[i], &sum);
  }
  if (!ok || sum != c.outRowElems ||
      checkedProduct({c.outer, c.outRowElems}) != s.output.shape.numel())
    paramsMismatch(s);
}

std::string opInfoInputNameCat(size_t, size_t) {
  return "tensors";
}

}  // namespace gearbox::ops
