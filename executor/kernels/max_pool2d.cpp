// MaxPool2d: reference and optimized kernels. Padded positions never win; NaN propagates (a NaN
// in the window gives NaN, as in PyTorch). On AVX2 and AVX-512 a plane without NaN runs the
// vector walk of executor/simd/conv_body.inc (maxPoolPlaneF32), else the loop below.
#include <cmath>
#include <limits>

#include "executor/kernels/common.h"
#include "executor/kernels/gemm.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/pool2d.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

// One plane. The window starts at (ys, xs) in input coordinates and steps by the dilation;
// taps outside the input are skipped.
void maxPlane(const PoolParams& p, const float* in, float* out) {
  for (int64_t oy = 0; oy < p.oh; ++oy) {
    const int64_t ys = oy * p.sh - p.pt;
    for (int64_t ox = 0; ox < p.ow; ++ox) {
      const int64_t xs = ox * p.sw - p.pl;
      float best = -std::numeric_limits<float>::infinity();
      bool nan = false;
      for (int64_t ki = 0; ki < p.kh; ++ki) {
        const int64_t iy = ys + ki * p.dh;
        if (iy < 0 || iy >= p.h) continue;
        const float* row = in + iy * p.w;
        for (int64_t kj = 0; kj < p.kw; ++kj) {
          const int64_t ix = xs + kj * p.dw;
          if (ix < 0 || ix >= p.w) continue;
          const float v = row[ix];
          nan |= v != v;
          best = v > best ? v : best;
        }
      }
      out[oy * p.ow + ox] = nan ? std::numeric_limits<float>::quiet_NaN() : best;
    }
  }
}

}  // namespace

void ref::refMaxPool2d(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  namespace a = attr::MaxPool2d;
  const PoolParams p =
      refPoolParams(ins[0].shape, out.shape, attrs.ints(a::kernel), attrs.ints(a::strides),
                    attrs.ints(a::pads), attrs.ints(a::dilations), 0);
  const float* x = ins[0].as<const float>();
  float* o = out.as<float>();
  for (int64_t pl = 0; pl < p.planes; ++pl)
    for (int64_t oy = 0; oy < p.oh; ++oy)
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        float best = -std::numeric_limits<float>::infinity();
        for (int64_t ki = 0; ki < p.kh; ++ki)
          for (int64_t kj = 0; kj < p.kw; ++kj) {
            const int64_t iy = oy * p.sh - p.pt + ki * p.dh, ix = ox * p.sw - p.pl + kj * p.dw;
            if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
            const float v = x[(pl * p.h + iy) * p.w + ix];
            if (std::isnan(v) || std::isnan(best)) {
              best = std::numeric_limits<float>::quiet_NaN();
            } else if (v > best) {
              best = v;
            }
          }
        o[(pl * p.oh + oy) * p.ow + ox] = best;
      }
}

bool runMaxPool2d(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<PoolParams>(&spec.params);
  if (!p) return false;
  const float* x = static_cast<const float*>(in[0]);
  float* o = static_cast<float*>(out);
  detail::runRanges(spec.tasks, p->planes, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* in = x + i * p->h * p->w;
      float* planeOut = o + i * p->oh * p->ow;
      if (!maxPoolPlaneF32(*p, in, planeOut)) maxPlane(*p, in, planeOut);
    }
  });
  return true;
}

}  // namespace gearbox::kernels
