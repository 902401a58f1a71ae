// Squeeze(x, axes): ONNX Squeeze, the listed dims (size 1; negative axes count from the end)
// removed. Like reshape it moves no element. A symbolic dim may be listed: it must be 1 when
// the graph is specialised, where this check runs again on the concrete size.
#include "graph/ops/axes.h"

namespace gearbox {

TensorType inferSqueeze(const InferContext& ctx) {
  ops::expectArity(ctx, 1);
  const TensorType& in = ctx.inputs[0];
  const int r = in.shape.rank();
  const std::string of = ops::inputLabel(ctx, 0);
  const uint32_t mask = ops::axesMask(ctx, "axes", ctx.attrs.ints(attr::Squeeze::axes), r, of);
  Shape out;
  for (int d = 0; d < r; ++d) {
    if (!(mask & (1u << d))) {
      out.push(in.shape[d]);
      continue;
    }
    if (isStaticDim(in.shape[d]) && in.shape[d] != 1)
      fail(ErrorKind::kShape,
           "{}: attribute axes: {} dim {} has size {}, and only a dim of size 1 "
           "can be squeezed",
           ctx.where(), of, d, in.shape[d]);
  }
  return TensorType{in.dtype, out};
}

}  // namespace gearbox
