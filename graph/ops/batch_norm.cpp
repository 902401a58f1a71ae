// BatchNorm(x, scale, bias, mean, var, epsilon=1e-5): ONNX BatchNormalization in inference
// mode, y = (x - mean) / sqrt(var + epsilon) * scale + bias, per channel along dim 1 of
// x = [N, C, ...]; the four statistics are [C]. f32 only.
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferBatchNorm(const InferContext& ctx) {
  ops::expectArity(ctx, 5);
  const TensorType& x = ctx.inputs[0];
  static constexpr const char* kNames[] = {"x", "scale", "bias", "mean", "var"};
  for (size_t i = 0; i < 5; ++i)
    if (ctx.inputs[i].dtype != DType::kF32)
      fail(ErrorKind::kShape, "{}: {} ({}) is {}; batch_norm takes f32", ctx.where(),
           ops::inputLabel(ctx, i), kNames[i], dtypeName(ctx.inputs[i].dtype));
  if (x.shape.rank() < 2)
    fail(ErrorKind::kShape, "{}: {} has rank {}; batch_norm needs [N, C, ...] (rank >= 2)",
         ctx.where(), ops::inputLabel(ctx, 0), x.shape.rank());
  for (size_t i = 1; i < 5; ++i) {
    const Shape& s = ctx.inputs[i].shape;
    if (s.rank() != 1)
      fail(ErrorKind::kShape, "{}: {} ({}) has rank {}; it must be [C], one value per channel",
           ctx.where(), ops::inputLabel(ctx, i), kNames[i], s.rank());
    ops::unifyEqual(ctx, 0, 1, x.shape[1], i, 0, s[0], "one value per channel");
  }
  return x;
}

}  // namespace gearbox
