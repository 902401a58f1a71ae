// Tanh: the hyperbolic tangent elementwise, f32 (ONNX Tanh, torch.tanh).
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferTanh(const InferContext& ctx) {
  return ops::floatUnaryType(ctx, "tanh");
}

}  // namespace gearbox
