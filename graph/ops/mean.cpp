// Mean(x, axes, keepdims): the mean over `axes` (ONNX ReduceMean, torch.mean(dim=...)); global
// average pooling is mean(x, axes=[2, 3], keepdims=1). Axes may be negative and must be
// distinct. A reduced dim of size 0 gives NaN, as in PyTorch.
#include "graph/ops/common.h"

namespace gearbox {

namespace ops {

// The reduced dims of `in` as a mask; errors name the attribute entry.
inline std::array<bool, kMaxRank> meanAxes(const InferContext& ctx, const Shape& in) {
  std::array<bool, kMaxRank> reduce{};
  const auto axes = ctx.attrs.ints(attr::Mean::axes);
  if (axes.empty())
    fail(ErrorKind::kShape, "{}: attribute axes is empty (name the dims to reduce)", ctx.where());
  const int64_t r = in.rank();
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = axes[i];
    if (a < -r || a >= r)
      fail(ErrorKind::kShape, "{}: attribute axes entry {} is {}, out of range for {} of rank {}",
           ctx.where(), i, a, inputLabel(ctx, 0), r);
    const int64_t k = a < 0 ? a + r : a;
    if (reduce[k]) fail(ErrorKind::kShape, "{}: attribute axes names dim {} twice", ctx.where(), k);
    reduce[k] = true;
  }
  return reduce;
}

}  // namespace ops

TensorType inferMean(const InferContext& ctx) {
  const TensorType& in = ctx.inputs[0];
  if (in.dtype != DType::kF32)
    fail(ErrorKind::kShape, "{}: {} must be f32, got {}", ctx.where(), ops::inputLabel(ctx, 0),
         dtypeName(in.dtype));
  const int64_t keep = ctx.attrs.i(attr::Mean::keepdims);
  if (keep != 0 && keep != 1)
    fail(ErrorKind::kShape, "{}: attribute keepdims is {}, expected 0 or 1", ctx.where(), keep);
  const auto reduce = ops::meanAxes(ctx, in.shape);
  Shape out;
  for (int d = 0; d < in.shape.rank(); ++d) {
    if (!reduce[d]) {
      out.push(in.shape[d]);
    } else if (keep) {
      out.push(1);
    }
  }
  return TensorType{in.dtype, out};
}

}  // namespace gearbox
