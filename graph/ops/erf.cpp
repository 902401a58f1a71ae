// Erf: the error function elementwise, f32 (ONNX Erf, torch.erf).
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferErf(const InferContext& ctx) {
  return ops::floatUnaryType(ctx, "erf");
}

}  // namespace gearbox
