// Pow: elementwise a ** b with NumPy broadcasting, f32 only (std::pow's rules: pow(x, 0) = 1
// even for NaN, a negative base with a non-integer exponent is NaN).
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferPow(const InferContext& ctx) {
  return ops::binaryType(ctx, "pow", /*floatOnly=*/true);
}

}  // namespace gearbox
