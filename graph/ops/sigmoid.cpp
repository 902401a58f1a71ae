// Sigmoid: 1 / (1 + exp(-x)) elementwise, f32 only (an integer sigmoid would be 0 or 1).
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferSigmoid(const InferContext& ctx) {
  ops::expectArity(ctx, 1);
  if (ctx.inputs[0].dtype != DType::kF32)
    fail(ErrorKind::kShape, "{}: {} is {}; sigmoid takes f32", ctx.where(), ops::inputLabel(ctx, 0),
         dtypeName(ctx.inputs[0].dtype));
  return ctx.inputs[0];
}

}  // namespace gearbox
