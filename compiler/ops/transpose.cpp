// Transpose: the compiler's hooks (compiler/ops/op_hooks.h). The compile step merges output dims
// that stay adjacent and in order in the input, so the kernel walks as few dims as possible and
// its innermost loop is as long as possible; a permutation that moves nothing is a flat copy.
#include "compiler/ops/op_hooks.h"

namespace gearbox::ops {

void compileTranspose(KernelSpec& spec) {
  const KernelKey& key = spec.key;
  const Shape& in = key.inputs[0].shape;
  const Shape& perm = *key.attrs.perm;
  const auto inStr = contiguousStrides(in);
  TransposeParams p;
  p.numel = spec.output.shape.numel();
  int r = 0;
  for (int i = 0; i < perm.rank(); ++i) {
    const int src = static_cast<int>(perm[i]);
    if (in[src] == 1) continue;  // size-1 dims never move an index
    const int64_t dim = in[src], stride = inStr[src];
    if (r > 0 && p.inStrides[r - 1] == stride * dim) {
      p.outDims[r - 1] *= dim;  // contiguous with the previous output dim: one longer dim
      p.inStrides[r - 1] = stride;
    } else {
      p.outDims[r] = dim;
      p.inStrides[r] = stride;
      ++r;
    }
  }
  // One dim left with stride 1 (or nothing left): the layout is unchanged, a plain copy.
  p.rank = (r == 0 || (r == 1 && p.inStrides[0] == 1)) ? 0 : r;
  const double esize = static_cast<double>(dtypeSize(key.dtype));
  spec.work = 2 * static_cast<double>(p.numel) * esize;
  spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
  spec.params = p;
}

KernelCost kernelCostTranspose(const KernelKey& key) {
  // A copy: read once, written once (modeled at full efficiency; strided reads are the
  // device model's concern).
  return KernelCost{0, 2 * elementBytes(key.inputs[0])};
}
CompileCostTerms compileCostTranspose() {
  return {40, "assumption: a copy whose address pattern follows the permutation, like IndexSelect"};
}

void paramsToJsonTranspose(const KernelSpec& spec, Json& p) {
  const TransposeParams& v = paramsAs<TransposeParams>(spec);
  p["rank"] = v.rank;
  p["numel"] = v.numel;
  p["out_dims"] = intArray(v.outDims);
  p["in_strides"] = intArray(v.inStrides);
}

void paramsFromJsonTranspose(const Json& p, KernelSpec& spec) {
  const std::string where = "kernel.params";
  const ErrorKind io = ErrorKind::kIo;
  TransposeParams t;
  const int64_t rank = getInt(p, "rank", where, io);
  if (rank < 0 || rank > kMaxRank) fail(io, "field 'kernel.params.rank' out of range: {}", rank);
  t.rank = static_cast<int>(rank);
  t.numel = getInt(p, "numel", where, io);
  fixedIntArray(p, "out_dims", t.outDims);
  fixedIntArray(p, "in_strides", t.inStrides);
  spec.params = t;
}

void checkParamsTranspose(const KernelSpec& s) {
  const TransposeParams& t = paramsAs<TransposeParams>(s);
  const int64_t numel = s.output.shape.numel();
  if (t.numel != numel || s.key.inputs[0].shape.numel() != numel)
    paramsMismatch(s, "numel differs from the tensors' element count");
  if (t.rank == 0) return;
  int64_t p = 1, maxOffset = 0;
  for (int i = 0; i < t.rank; ++i) {
    if (t.outDims[i] < 1 || t.inStrides[i] < 0) paramsMismatch(s, "dims");
    p = checkedProduct({p, t.outDims[i]});
    const int64_t step = checkedProduct({t.outDims[i] - 1, t.inStrides[i]});
    if (step < 0 || __builtin_add_overflow(maxOffset, step, &maxOffset))
      paramsMismatch(s, "strides overflow");
  }
  if (p != numel) paramsMismatch(s, "dims do not multiply to the output size");
  if (numel > 0 && maxOffset >= numel) paramsMismatch(s, "strides read past the input");
}

std::string opInfoInputNameTranspose(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
