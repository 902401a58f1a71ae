// Clip(x, min, max): min(max(x, min), max) elementwise (ONNX Clip, numpy.clip); the bounds
// default to -inf and inf, and NaN stays NaN. Integer tensors clip to the bounds rounded inward.
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferClip(const InferContext& ctx) {
  ops::expectArity(ctx, 1);
  return ctx.inputs[0];
}

}  // namespace gearbox
