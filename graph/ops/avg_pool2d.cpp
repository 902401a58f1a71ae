// AvgPool2d(x): the mean of each window of an NCHW input (torch avg_pool2d, ONNX AveragePool).
// count_include_pad = 0 divides by the real elements of the window, 1 by the window clipped to
// the padded input (PyTorch's divisor, which also holds with ceil_mode).
#include "graph/ops/pool2d.h"

namespace gearbox {

TensorType inferAvgPool2d(const InferContext& ctx) {
  namespace a = attr::AvgPool2d;
  const int64_t cip = ctx.attrs.i(a::count_include_pad);
  if (cip != 0 && cip != 1)
    fail(ErrorKind::kShape, "{}: attribute count_include_pad is {}, expected 0 or 1", ctx.where(),
         cip);
  return ops::inferPool2d(ctx, {a::kernel, a::strides, a::pads, -1, a::ceil_mode});
}

}  // namespace gearbox
