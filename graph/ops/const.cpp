// Const: a tensor baked into the graph (inline literal or a .npy file).
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferConst(const InferContext& ctx) {
  ops::expectArity(ctx, 0);
  if (!ctx.node || !ctx.node->constant)
    fail(ErrorKind::kShape, "{}: constant has no data", ctx.where());
  return TensorType{ctx.node->constant->dtype(), ctx.node->constant->shape()};
}

}  // namespace gearbox
