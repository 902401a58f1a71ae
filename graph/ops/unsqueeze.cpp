// Unsqueeze(x, axes): ONNX Unsqueeze, a dim of size 1 inserted at each listed position of the
// output (rank + len(axes) dims; negative axes count from the output's end). Like reshape it moves
// no element.
#include "graph/ops/axes.h"

namespace gearbox {

TensorType inferUnsqueeze(const InferContext& ctx) {
  ops::expectArity(ctx, 1);
  const TensorType& in = ctx.inputs[0];
  const auto axes = ctx.attrs.ints(attr::Unsqueeze::axes);
  const int outRank = in.shape.rank() + static_cast<int>(axes.size());
  if (outRank > kMaxRank)
    fail(ErrorKind::kShape, "{}: attribute axes adds {} dims to {} of rank {}: rank {} exceeds {}",
         ctx.where(), axes.size(), ops::inputLabel(ctx, 0), in.shape.rank(), outRank, kMaxRank);
  const uint32_t mask = ops::axesMask(ctx, "axes", axes, outRank, "the output");
  Shape out;
  int next = 0;
  for (int d = 0; d < outRank; ++d) out.push(mask & (1u << d) ? 1 : in.shape[next++]);
  return TensorType{in.dtype, out};
}

}  // namespace gearbox
