// Where: the compiler's hooks (compiler/ops/op_hooks.h). Each operand's strides against the
// output (0 where it broadcasts), with dims merged where all three step through them as one;
// operands that all have the output's element count take one flat loop.
#include "compiler/ops/window_params.h"

namespace gearbox::ops {

void compileWhere(KernelSpec& spec) {
  const Shape& out = spec.output.shape;
  const Shape* in[3] = {&spec.key.inputs[0].shape, &spec.key.inputs[1].shape,
                        &spec.key.inputs[2].shape};
  WhereParams p;
  p.numel = out.numel();
  const bool flat =
      in[0]->numel() == p.numel && in[1]->numel() == p.numel && in[2]->numel() == p.numel;
  if (!flat && p.numel > 0) {
    std::array<int64_t, kMaxRank> str[3];
    for (int k = 0; k < 3; ++k) str[k] = contiguousStrides(*in[k]);
    int64_t* strides[3] = {p.condStrides, p.xStrides, p.yStrides};
    int r = 0;
    for (int i = 0; i < out.rank(); ++i) {
      if (out[i] == 1) continue;  // size-1 dims never move an index
      int64_t s[3];
      for (int k = 0; k < 3; ++k) {
        const int j = i - (out.rank() - in[k]->rank());
        s[k] = (j >= 0 && (*in[k])[j] != 1) ? str[k][j] : 0;
      }
      bool merge = r > 0;
      for (int k = 0; k < 3 && merge; ++k) merge = strides[k][r - 1] == s[k] * out[i];
      if (merge) {
        p.outDims[r - 1] *= out[i];
        for (int k = 0; k < 3; ++k) strides[k][r - 1] = s[k];
      } else {
        p.outDims[r] = out[i];
        for (int k = 0; k < 3; ++k) strides[k][r] = s[k];
        ++r;
      }
    }
    p.rank = r;
  }
  const double outBytes = elementBytes(spec.output);
  spec.work = elementBytes(spec.key.inputs[0]) + elementBytes(spec.key.inputs[1]) +
              elementBytes(spec.key.inputs[2]) + outBytes;
  spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
  spec.params = p;
}

KernelCost kernelCostWhere(const KernelKey& key) {
  // A select per output element (1 flop: a compare and a blend); every operand read once and
  // the output written once.
  const TensorType out = inferNode(keyContext(key));
  const double outBytes = elementBytes(out);
  return KernelCost{outBytes / static_cast<double>(dtypeSize(out.dtype)),
                    elementBytes(key.inputs[0]) + elementBytes(key.inputs[1]) +
                        elementBytes(key.inputs[2]) + outBytes};
}
CompileCostTerms compileCostWhere() {
  return {25, "assumption: a three-input elementwise kernel, like Add (libxsmm's < 25 us JIT)"};
}

void paramsToJsonWhere(const KernelSpec& spec, Json& j) {
  const WhereParams& p = paramsAs<WhereParams>(spec);
  j["rank"] = p.rank;
  j["numel"] = p.numel;
  j["out_dims"] = intArray(p.outDims);
  j["cond_strides"] = intArray(p.condStrides);
  j["x_strides"] = intArray(p.xStrides);
  j["y_strides"] = intArray(p.yStrides);
}

void paramsFromJsonWhere(const Json& j, KernelSpec& spec) {
  const std::string where = "kernel.params";
  const ErrorKind io = ErrorKind::kIo;
  WhereParams p;
  const int64_t rank = getInt(j, "rank", where, io);
  if (rank < 0 || rank > kMaxRank) fail(io, "field 'kernel.params.rank' out of range: {}", rank);
  p.rank = static_cast<int>(rank);
  p.numel = getInt(j, "numel", where, io);
  fixedIntArray(j, "out_dims", p.outDims);
  fixedIntArray(j, "cond_strides", p.condStrides);
  fixedIntArray(j, "x_strides", p.xStrides);
  fixedIntArray(j, "y_strides", p.yStrides);
  spec.params = p;
}

void checkParamsWhere(const KernelSpec& spec) {
  checkByRecompile<WhereParams>(spec, compileWhere);
}

std::string opInfoInputNameWhere(size_t i, size_t) {
  return i == 0 ? "condition" : i == 1 ? "self" : "other";
}

}  // namespace gearbox::ops
