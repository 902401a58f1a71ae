#pragma once
// Shape inference shared by max_pool2d and avg_pool2d: [N, C, H, W] -> [N, C, OH, OW].

#include "graph/ops/window.h"

namespace gearbox::ops {

// Slots of kernel, strides, pads and ceil_mode (dilations: -1 when the op has none).
struct PoolSlots {
  int kernel, strides, pads, dilations, ceil;
};

inline Window2d readPoolWindow(const InferContext& ctx, const PoolSlots& s) {
  Window2d w;
  readPair(ctx, s.kernel, "kernel", 1, w.kh, w.kw);
  readPair(ctx, s.strides, "strides", 1, w.sh, w.sw);
  if (s.dilations >= 0) readPair(ctx, s.dilations, "dilations", 1, w.dh, w.dw);
  readPads(ctx, s.pads, w);
  const int64_t c = ctx.attrs.i(s.ceil);
  if (c != 0 && c != 1)
    fail(ErrorKind::kShape, "{}: attribute ceil_mode is {}, expected 0 or 1", ctx.where(), c);
  w.ceil = c == 1;
  // PyTorch and ONNX both require a pad of at most half the window, so every window holds at
  // least one real element (a max over padding only would be -inf).
  if (w.pt > w.kh / 2 || w.pb > w.kh / 2 || w.pl > w.kw / 2 || w.pr > w.kw / 2)
    fail(ErrorKind::kShape, "{}: attribute pads [{}, {}, {}, {}] exceed half the kernel [{}, {}]",
         ctx.where(), w.pt, w.pl, w.pb, w.pr, w.kh, w.kw);
  return w;
}

inline TensorType inferPool2d(const InferContext& ctx, const PoolSlots& slots) {
  expectF32(ctx, 0);
  const Shape& x = ctx.inputs[0].shape;
  expectRank4(ctx, 0, x, "N, C, H, W");
  return TensorType{DType::kF32, windowOutShape(ctx, x, x[1], readPoolWindow(ctx, slots))};
}

}  // namespace gearbox::ops
