// AvgPool2d: reference and optimized kernels. The divisor is the number of real elements in the
// window, or with count_include_pad the window clipped to the padded input (PyTorch's rule).
#include "executor/kernels/common.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/pool2d.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

void avgPlane(const PoolParams& p, const float* in, float* out) {
  forEachWindow(p, [&](int64_t o, int64_t ys, int64_t ye, int64_t xs, int64_t xe, int64_t window) {
    const int64_t y0 = std::max<int64_t>(ys, 0), x0 = std::max<int64_t>(xs, 0);
    float sum = 0;
    for (int64_t y = y0; y < ye; ++y) {
      const float* row = in + y * p.w;
      for (int64_t x = x0; x < xe; ++x) sum += row[x];
    }
    const int64_t real = std::max<int64_t>(ye - y0, 0) * std::max<int64_t>(xe - x0, 0);
    out[o] = sum / static_cast<float>(p.countIncludePad ? window : real);
  });
}

}  // namespace

void ref::refAvgPool2d(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  namespace a = attr::AvgPool2d;
  const PoolParams p =
      refPoolParams(ins[0].shape, out.shape, attrs.ints(a::kernel), attrs.ints(a::strides),
                    attrs.ints(a::pads), {}, attrs.i(a::count_include_pad));
  const float* x = ins[0].as<const float>();
  float* o = out.as<float>();
  for (int64_t pl = 0; pl < p.planes; ++pl)
    for (int64_t oy = 0; oy < p.oh; ++oy)
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        double sum = 0;
        int64_t real = 0;
        for (int64_t ki = 0; ki < p.kh; ++ki)
          for (int64_t kj = 0; kj < p.kw; ++kj) {
            const int64_t iy = oy * p.sh - p.pt + ki, ix = ox * p.sw - p.pl + kj;
            if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
            sum += x[(pl * p.h + iy) * p.w + ix];
            ++real;
          }
        // With count_include_pad the divisor counts padding but not window positions past the
        // padded input (ceil_mode's last window).
        const int64_t ys = oy * p.sh - p.pt, xs = ox * p.sw - p.pl;
        const int64_t window =
            (std::min(ys + p.kh, p.h + p.pb) - ys) * (std::min(xs + p.kw, p.w + p.pr) - xs);
        o[(pl * p.oh + oy) * p.ow + ox] =
            static_cast<float>(sum / static_cast<double>(p.countIncludePad ? window : real));
      }
}

bool runAvgPool2d(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<PoolParams>(&spec.params);
  if (!p) return false;
  const float* x = static_cast<const float*>(in[0]);
  float* o = static_cast<float*>(out);
  detail::runRanges(spec.tasks, p->planes, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) avgPlane(*p, x + i * p->h * p->w, o + i * p->oh * p->ow);
  });
  return true;
}

}  // namespace gearbox::kernels
