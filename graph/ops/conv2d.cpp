// Conv2d(x, w[, b[, r]]): 2-D convolution of an NCHW input, as torch.nn.functional.conv2d and
// ONNX Conv (2-D kernels, explicit pads): x [N, C, H, W], w [M, C / group, KH, KW], b [M];
// out [N, M, OH, OW] with OH = floor((H + pad_top + pad_bottom - dilation * (KH - 1) - 1) /
// stride) + 1. group = C makes a depthwise convolution. r (the fuse-conv-residual pass's
// residual, of the output's shape) is added to the output before its clamp.
#include "graph/ops/window.h"

namespace gearbox {

TensorType inferConv2d(const InferContext& ctx) {
  using namespace ops;
  namespace a = attr::Conv2d;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) expectF32(ctx, i);
  const Shape& x = ctx.inputs[0].shape;
  const Shape& w = ctx.inputs[1].shape;
  expectRank4(ctx, 0, x, "N, C, H, W");
  expectRank4(ctx, 1, w, "M, C / group, KH, KW");
  Window2d win;
  readPair(ctx, a::strides, "strides", 1, win.sh, win.sw);
  readPair(ctx, a::dilations, "dilations", 1, win.dh, win.dw);
  readPads(ctx, a::pads, win);
  const int64_t group = ctx.attrs.i(a::group);
  if (group < 1 || group > (int64_t{1} << 31))
    fail(ErrorKind::kShape, "{}: attribute group is {}, expected >= 1", ctx.where(), group);
  // The weight is a constant in every real model; unknown weight dims (a shape-generic key)
  // leave the output channels or spatial sizes unknown until run time.
  const int64_t m = w[0];
  win.kh = w[2];
  win.kw = w[3];
  if (win.kh == 0 || win.kw == 0)
    fail(ErrorKind::kShape, "{}: {} has an empty kernel {}", ctx.where(), inputLabel(ctx, 1),
         w.toString());
  if (isStaticDim(m) && m % group != 0)
    fail(ErrorKind::kShape, "{}: {} dim 0 is {} output channels, not a multiple of group {}",
         ctx.where(), inputLabel(ctx, 1), m, group);
  if (isStaticDim(x[1])) {
    if (x[1] % group != 0)
      fail(ErrorKind::kShape, "{}: {} dim 1 is {} channels, not a multiple of group {}",
           ctx.where(), inputLabel(ctx, 0), x[1], group);
    unifyEqual(ctx, 0, 1, x[1] / group, 1, 1, w[1], "input channels per group");
  }
  if (ctx.inputs.size() >= 3) {
    const Shape& b = ctx.inputs[2].shape;
    if (b.rank() != 1)
      fail(ErrorKind::kShape, "{}: {} (bias) must be 1-D [{}], got {}", ctx.where(),
           inputLabel(ctx, 2), m, b.toString());
    unifyEqual(ctx, 2, 0, b[0], 1, 0, m, "one bias per output channel");
  }
  Shape out = windowOutShape(ctx, x, m, win);
  if (ctx.inputs.size() == 4) {
    const Shape& r = ctx.inputs[3].shape;
    if (r.rank() != 4)
      fail(ErrorKind::kShape, "{}: {} (residual) must have the output's shape {}, got {}",
           ctx.where(), inputLabel(ctx, 3), out.toString(), r.toString());
    for (int d = 0; d < 4; ++d) {
      if (r[d] == out[d]) continue;
      if (isStaticDim(r[d]) && isStaticDim(out[d]))
        fail(ErrorKind::kShape, "{}: {} (residual) dim {} is {} but the output's is {}",
             ctx.where(), inputLabel(ctx, 3), d, r[d], out[d]);
      if (isStaticDim(r[d])) out[d] = r[d];
    }
  }
  return TensorType{DType::kF32, out};
}

}  // namespace gearbox
