// Trilu(x, upper=1, k=0): ONNX Trilu, torch.triu / torch.tril: over the last two dims
// [..., N, M], element (i, j) is kept when j - i >= k (upper=1) or j - i <= k (upper=0), and is
// 0 otherwise; a causal attention mask is trilu of a matrix of ones (or triu(full(-inf), k=1)).
// Any dtype; rank >= 2. ONNX takes k as an optional input; gearbox as an attribute.
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferTrilu(const InferContext& ctx) {
  ops::expectArity(ctx, 1);
  const TensorType& in = ctx.inputs[0];
  if (in.shape.rank() < 2)
    fail(ErrorKind::kShape,
         "{}: {} has rank {}; trilu needs rank >= 2 (a matrix or a batch of "
         "them)",
         ctx.where(), ops::inputLabel(ctx, 0), in.shape.rank());
  if (const int64_t u = ctx.attrs.i(attr::Trilu::upper); u != 0 && u != 1)
    fail(ErrorKind::kShape, "{}: attribute upper is {}, expected 0 (lower) or 1 (upper)",
         ctx.where(), u);
  return in;
}

}  // namespace gearbox
