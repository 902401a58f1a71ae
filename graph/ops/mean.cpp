// Mean(x, axes, keepdims): the mean over `axes` (ONNX ReduceMean, torch.mean(dim=...)); global
// average pooling is mean(x, axes=[2, 3], keepdims=1). Axes may be negative and must be
// distinct. A reduced dim of size 0 gives NaN, as in PyTorch. The axes rules are reduce_sum's
// too (graph/ops/reduce.h).
#include "graph/ops/reduce.h"

namespace gearbox {

TensorType inferMean(const InferContext& ctx) {
  return ops::inferReduce(ctx, "mean", attr::Mean::axes, attr::Mean::keepdims);
}

}  // namespace gearbox
