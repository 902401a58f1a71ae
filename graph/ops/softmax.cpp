// Softmax(x, axis=-1): exp(x - max) / sum(exp(x - max)) along one axis (ONNX Softmax since
// opset 13, torch.softmax(dim=axis)), f32. A reduced axis of size 0 gives an empty output.
#include "graph/ops/axes.h"

namespace gearbox {

TensorType inferSoftmax(const InferContext& ctx) {
  ops::expectArity(ctx, 1);
  const TensorType& in = ctx.inputs[0];
  if (in.dtype != DType::kF32)
    fail(ErrorKind::kShape, "{}: {} is {}; softmax takes f32", ctx.where(), ops::inputLabel(ctx, 0),
         dtypeName(in.dtype));
  ops::wrapAxis(ctx, "axis", ctx.attrs.i(attr::Softmax::axis), in.shape.rank(),
                ops::inputLabel(ctx, 0));
  return in;
}

}  // namespace gearbox
