// MaxPool2d(x): the maximum of each window of an NCHW input (torch max_pool2d, ONNX MaxPool with
// explicit pads); padded positions never win. NaN propagates, as in PyTorch.
#include "graph/ops/pool2d.h"

namespace gearbox {

TensorType inferMaxPool2d(const InferContext& ctx) {
  namespace a = attr::MaxPool2d;
  return ops::inferPool2d(ctx, {a::kernel, a::strides, a::pads, a::dilations, a::ceil_mode});
}

}  // namespace gearbox
