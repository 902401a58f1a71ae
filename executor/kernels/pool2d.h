#pragma once
// The window walk shared by max_pool2d and avg_pool2d (reference and optimized kernels).

#include <algorithm>
#include <cstdint>

#include "compiler/kernel_spec.h"

namespace gearbox::kernels {

// Calls fn(outIndex, y0, y1, x0, x1, window) for every output of one plane, with the window's
// rows [y0, y1) and columns [x0, x1) clipped to the input (dilation 1), and `window` the
// avg divisor when padding counts: the window clipped to the padded input (PyTorch's rule).
template <typename Fn>
void forEachWindow(const PoolParams& p, const Fn& fn) {
  for (int64_t oy = 0; oy < p.oh; ++oy) {
    const int64_t ys = oy * p.sh - p.pt;
    const int64_t ye = std::min(ys + (p.kh - 1) * p.dh + 1, p.h + p.pb);
    for (int64_t ox = 0; ox < p.ow; ++ox) {
      const int64_t xs = ox * p.sw - p.pl;
      const int64_t xe = std::min(xs + (p.kw - 1) * p.dw + 1, p.w + p.pr);
      const int64_t window = (ye - ys) * (xe - xs);
      fn(oy * p.ow + ox, ys, std::min(ye, p.h), xs, std::min(xe, p.w), window);
    }
  }
}

// The params of a reference call, from the op's attributes and the views' shapes.
inline PoolParams refPoolParams(const Shape& in, const Shape& out, std::span<const int64_t> k,
                                std::span<const int64_t> s, std::span<const int64_t> pads,
                                std::span<const int64_t> dil, int64_t countIncludePad) {
  PoolParams p;
  p.planes = in[0] * in[1];
  p.h = in[2];
  p.w = in[3];
  p.oh = out[2];
  p.ow = out[3];
  p.kh = k[0];
  p.kw = k[1];
  p.sh = s[0];
  p.sw = s[1];
  if (!dil.empty()) {
    p.dh = dil[0];
    p.dw = dil[1];
  }
  p.pt = pads[0];
  p.pl = pads[1];
  p.pb = pads[2];
  p.pr = pads[3];
  p.countIncludePad = countIncludePad;
  return p;
}

}  // namespace gearbox::kernels
