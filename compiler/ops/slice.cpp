// Slice: the compiler's hooks (compiler/ops/op_hooks.h). The compile step turns the per-dim
// ranges (graph/ops/slice.h) into a start offset and one signed stride per output dim, dropping
// size-1 dims and merging a dim into the one before it when the two stay contiguous, so the
// kernel's innermost loop is as long as possible (and a block copy when its stride is 1).
#include "graph/ops/slice.h"

#include "compiler/ops/op_hooks.h"

namespace gearbox::ops {
namespace {

// Everything is derived from the key alone, so checkParamsSlice can re-derive and compare.
SliceParams sliceParams(const KernelKey& key) {
  const Shape& in = key.inputs[0].shape;
  const auto ranges = resolveSlice(key.attrs, in);
  const auto strides = contiguousStrides(in);
  SliceParams p;
  p.numel = 1;
  for (int d = 0; d < in.rank(); ++d) p.numel *= ranges[d].size;
  if (p.numel == 0) return p;  // rank 0: nothing to read, and no start offset to trust
  int r = 0;
  for (int d = 0; d < in.rank(); ++d) {
    const SliceRange& s = ranges[d];
    p.offset += s.start * strides[d];
    if (s.size == 1) continue;  // a size-1 dim never moves the read position
    const int64_t stride = s.step * strides[d];
    if (r > 0 && p.inStrides[r - 1] == stride * s.size) {
      p.outDims[r - 1] *= s.size;  // contiguous with the previous dim: one longer dim
      p.inStrides[r - 1] = stride;
    } else {
      p.outDims[r] = s.size;
      p.inStrides[r] = stride;
      ++r;
    }
  }
  if (r == 0) {  // one element
    p.outDims[0] = 1;
    p.inStrides[0] = 1;
    r = 1;
  }
  p.rank = r;
  return p;
}

}  // namespace

void compileSlice(KernelSpec& spec) {
  const SliceParams p = sliceParams(spec.key);
  spec.work = 2 * static_cast<double>(p.numel) * static_cast<double>(dtypeSize(spec.key.dtype));
  spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
  spec.params = p;
}

KernelCost kernelCostSlice(const KernelKey& key) {
  // A copy of the selected elements: each read once and written once. (A key with dynamic dims
  // is modeled as copying the whole input, the most a slice can read.)
  if (!key.isStatic()) return KernelCost{0, 2 * elementBytes(key.inputs[0])};
  const double n = static_cast<double>(sliceParams(key).numel);
  return KernelCost{0, 2 * n * static_cast<double>(dtypeSize(key.dtype))};
}
CompileCostTerms compileCostSlice() {
  return {40, "assumption: a strided copy specialised to its offsets and strides, like Transpose"};
}

void paramsToJsonSlice(const KernelSpec& spec, Json& p) {
  const SliceParams& v = paramsAs<SliceParams>(spec);
  p["rank"] = v.rank;
  p["numel"] = v.numel;
  p["offset"] = v.offset;
  p["out_dims"] = intArray(v.outDims);
  p["in_strides"] = intArray(v.inStrides);
}

void paramsFromJsonSlice(const Json& p, KernelSpec& spec) {
  const std::string where = "kernel.params";
  const ErrorKind io = ErrorKind::kIo;
  SliceParams s;
  const int64_t rank = getInt(p, "rank", where, io);
  if (rank < 0 || rank > kMaxRank) fail(io, "field 'kernel.params.rank' out of range: {}", rank);
  s.rank = static_cast<int>(rank);
  s.numel = getInt(p, "numel", where, io);
  s.offset = getInt(p, "offset", where, io);
  fixedIntArray(p, "out_dims", s.outDims);
  fixedIntArray(p, "in_strides", s.inStrides);
  spec.params = s;
}

void checkParamsSlice(const KernelSpec& s) {
  // The params are a pure function of the key: anything else could read outside the input.
  if (!(paramsAs<SliceParams>(s) == sliceParams(s.key)))
    paramsMismatch(s, "offset, dims or strides differ from the ones the key gives");
  if (paramsAs<SliceParams>(s).numel != s.output.shape.numel())
    paramsMismatch(s, "numel differs from the output's element count");
}

std::string opInfoInputNameSlice(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
