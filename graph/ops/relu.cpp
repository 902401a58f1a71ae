// Relu: max(x, 0) elementwise; the output has the input's type.
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferRelu(const InferContext& ctx) {
  ops::expectArity(ctx, 1);
  return ctx.inputs[0];
}

}  // namespace gearbox
