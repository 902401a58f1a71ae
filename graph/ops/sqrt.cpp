// Sqrt: the square root elementwise, f32 (a negative input gives NaN, as in IEEE and torch).
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferSqrt(const InferContext& ctx) {
  return ops::floatUnaryType(ctx, "sqrt");
}

}  // namespace gearbox
