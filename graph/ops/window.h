#pragma once
// The sliding-window geometry shared by conv2d, max_pool2d and avg_pool2d: kernel, strides,
// dilations and the four pads of an NCHW input, read from the op's typed attributes and
// checked once, and the output-size formula of each spatial dim.

#include "graph/ops/common.h"

namespace gearbox::ops {

struct Window2d {
  int64_t kh = 1, kw = 1;                  // kernel (conv: from the weight)
  int64_t sh = 1, sw = 1;                  // strides
  int64_t dh = 1, dw = 1;                  // dilations
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;  // pads: top, left, bottom, right
  bool ceil = false;                       // pools: ceil_mode
};

// Reads `name` (two entries, each >= lo) from slot `slot`.
inline void readPair(const InferContext& ctx, int slot, std::string_view name, int64_t lo,
                     int64_t& a, int64_t& b) {
  const auto v = ctx.attrs.ints(slot);
  if (v.size() != 2)
    fail(ErrorKind::kShape, "{}: attribute {} must have 2 entries (height, width), got {}",
         ctx.where(), name, v.size());
  for (size_t i = 0; i < 2; ++i)
    if (v[i] < lo || v[i] > (int64_t{1} << 31))
      fail(ErrorKind::kShape, "{}: attribute {} entry {} is {}, expected [{}, 2^31]", ctx.where(),
           name, i, v[i], lo);
  a = v[0];
  b = v[1];
}

inline void readPads(const InferContext& ctx, int slot, Window2d& w) {
  const auto v = ctx.attrs.ints(slot);
  if (v.size() != 4)
    fail(ErrorKind::kShape,
         "{}: attribute pads must have 4 entries (top, left, bottom, right), got {}", ctx.where(),
         v.size());
  for (size_t i = 0; i < 4; ++i)
    if (v[i] < 0 || v[i] > (int64_t{1} << 31))
      fail(ErrorKind::kShape, "{}: attribute pads entry {} is {}, expected [0, 2^31]", ctx.where(),
           i, v[i]);
  w.pt = v[0];
  w.pl = v[1];
  w.pb = v[2];
  w.pr = v[3];
}

// Output size of one spatial dim (PyTorch's and ONNX's formula); -1 while `in` is unknown.
// ceil_mode rounds up, but a window must start inside the input or its left padding
// (PyTorch drops a last window that would start in the right padding).
inline int64_t windowOut(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1,
                         bool ceil) {
  if (in == kAnyDim || k < 0) return kAnyDim;  // unknown input size or kernel (a generic key)
  const int64_t span = d * (k - 1) + 1;
  if (in < 0) {
    // A symbolic size: the same formula as a dim expression, exact through any chain of
    // layers. ceil_mode's rule for a last window starting in the padding is not of that form.
    if (ceil) return kAnyDim;
    return dimAffine(dimFloorDiv(dimAffine(in, 1, p0 + p1 - span), s), 1, 1);
  }
  const int64_t room = in + p0 + p1 - span;
  if (room < 0) return 0;
  int64_t out = (ceil ? (room + s - 1) / s : room / s) + 1;
  if (ceil && (out - 1) * s >= in + p0) --out;
  return out;
}

// The output shape [N, C, OH, OW] of an NCHW input; errors name the input dim whose padded
// size is smaller than the (dilated) window.
inline Shape windowOutShape(const InferContext& ctx, const Shape& in, int64_t channels,
                            const Window2d& w) {
  Shape out{in[0], channels, 0, 0};
  const int64_t k[2] = {w.kh, w.kw}, s[2] = {w.sh, w.sw}, d[2] = {w.dh, w.dw};
  const int64_t p0[2] = {w.pt, w.pl}, p1[2] = {w.pb, w.pr};
  for (int i = 0; i < 2; ++i) {
    const int64_t o = windowOut(in[2 + i], k[i], s[i], d[i], p0[i], p1[i], w.ceil);
    if (o == 0)
      fail(ErrorKind::kShape,
           "{}: {} dim {} is {}, which padded ({} + {}) is smaller than the window ({} with "
           "dilation {})",
           ctx.where(), inputLabel(ctx, 0), 2 + i, in[2 + i], p0[i], p1[i], k[i], d[i]);
    out[2 + i] = o;
  }
  return out;
}

inline void expectRank4(const InferContext& ctx, size_t i, const Shape& s, const char* layout) {
  if (s.rank() != 4)
    fail(ErrorKind::kShape, "{}: {} must have rank 4 ({}), got rank {} ({})", ctx.where(),
         inputLabel(ctx, i), layout, s.rank(), s.toString());
}

}  // namespace gearbox::ops
