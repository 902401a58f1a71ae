// Mul: elementwise a * b with NumPy broadcasting; both inputs share one dtype.
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferMul(const InferContext& ctx) {
  ops::expectArity(ctx, 2);
  const TensorType& a = ctx.inputs[0];
  const TensorType& b = ctx.inputs[1];
  if (a.dtype != b.dtype)
    fail(ErrorKind::kShape, "{}: {} is {} but {} is {}; mul needs one dtype", ctx.where(),
         ops::inputLabel(ctx, 0), dtypeName(a.dtype), ops::inputLabel(ctx, 1), dtypeName(b.dtype));
  return TensorType{a.dtype, ops::broadcastShapes(ctx, 0, a.shape, 1, b.shape)};
}

}  // namespace gearbox
