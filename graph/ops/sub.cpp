// Sub: elementwise a - b with NumPy broadcasting; both inputs share one dtype (integers wrap
// as two's complement, like torch's).
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferSub(const InferContext& ctx) {
  return ops::binaryType(ctx, "sub", /*floatOnly=*/false);
}

}  // namespace gearbox
