// Expand: the compiler's hooks (compiler/ops/op_hooks.h). The input's strides against the
// output (0 on broadcast dims), with dims merged where the input steps through them as one; an
// expand that broadcasts nothing is a plain copy.
#include "compiler/ops/window_params.h"

namespace gearbox::ops {

void compileExpand(KernelSpec& spec) {
  const Shape& out = spec.output.shape;
  const Shape& in = spec.key.inputs[0].shape;
  ExpandParams p;
  p.numel = out.numel();
  if (in.numel() != p.numel && p.numel > 0) {
    const auto str = contiguousStrides(in);
    int r = 0;
    for (int i = 0; i < out.rank(); ++i) {
      if (out[i] == 1) continue;
      const int j = i - (out.rank() - in.rank());
      const int64_t s = (j >= 0 && in[j] != 1) ? str[j] : 0;
      if (r > 0 && p.inStrides[r - 1] == s * out[i]) {
        p.outDims[r - 1] *= out[i];
        p.inStrides[r - 1] = s;
      } else {
        p.outDims[r] = out[i];
        p.inStrides[r] = s;
        ++r;
      }
    }
    p.rank = r;
  }
  const double esize = static_cast<double>(dtypeSize(spec.key.dtype));
  spec.work = (static_cast<double>(in.numel()) + static_cast<double>(p.numel)) * esize;
  spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
  spec.params = p;
}

KernelCost kernelCostExpand(const KernelKey& key) {
  // A copy: the input read once, the (larger) output written once.
  const TensorType out = inferNode(keyContext(key));
  return KernelCost{0, elementBytes(key.inputs[0]) + elementBytes(out)};
}
CompileCostTerms compileCostExpand() {
  return {40, "assumption: a strided copy specialised to its shapes, like Transpose and Slice"};
}

void paramsToJsonExpand(const KernelSpec& spec, Json& j) {
  const ExpandParams& p = paramsAs<ExpandParams>(spec);
  j["rank"] = p.rank;
  j["numel"] = p.numel;
  j["out_dims"] = intArray(p.outDims);
  j["in_strides"] = intArray(p.inStrides);
}

void paramsFromJsonExpand(const Json& j, KernelSpec& spec) {
  const std::string where = "kernel.params";
  const ErrorKind io = ErrorKind::kIo;
  ExpandParams p;
  const int64_t rank = getInt(j, "rank", where, io);
  if (rank < 0 || rank > kMaxRank) fail(io, "field 'kernel.params.rank' out of range: {}", rank);
  p.rank = static_cast<int>(rank);
  p.numel = getInt(j, "numel", where, io);
  fixedIntArray(j, "out_dims", p.outDims);
  fixedIntArray(j, "in_strides", p.inStrides);
  spec.params = p;
}

void checkParamsExpand(const KernelSpec& spec) {
  checkByRecompile<ExpandParams>(spec, compileExpand);
}

std::string opInfoInputNameExpand(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
