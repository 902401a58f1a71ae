// Where(condition, x, y): x where the condition is true, else y, elementwise with NumPy
// broadcasting of all three (ONNX Where, torch.where). gearbox has no bool dtype: the
// condition is any dtype, true where it is non-zero (an f32 NaN is true). x and y share one
// dtype, the result's.
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferWhere(const InferContext& ctx) {
  ops::expectArity(ctx, 3);
  const TensorType& x = ctx.inputs[1];
  const TensorType& y = ctx.inputs[2];
  if (x.dtype != y.dtype)
    fail(ErrorKind::kShape, "{}: {} is {} but {} is {}; where needs one dtype for x and y",
         ctx.where(), ops::inputLabel(ctx, 1), dtypeName(x.dtype), ops::inputLabel(ctx, 2),
         dtypeName(y.dtype));
  return TensorType{x.dtype, ops::broadcastAll(ctx)};
}

}  // namespace gearbox
