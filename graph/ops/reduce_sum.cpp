// ReduceSum(x, axes, keepdims=1): the sum over `axes` (ONNX ReduceSum with the axes as an
// attribute, torch.sum(dim=...)), f32; an empty reduction sums to 0. The axes rules are mean's
// (graph/ops/reduce.h).
#include "graph/ops/reduce.h"

namespace gearbox {

TensorType inferReduceSum(const InferContext& ctx) {
  return ops::inferReduce(ctx, "reduce_sum", attr::ReduceSum::axes, attr::ReduceSum::keepdims);
}

}  // namespace gearbox
