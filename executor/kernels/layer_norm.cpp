// LayerNorm: reference and optimized kernels (f32). Per row of n elements: mean, the biased
// variance of x - mean (two passes, which loses nothing to cancellation, unlike E[x^2] -
// E[x]^2), then y = (x - mean) / sqrt(var + epsilon) * scale + bias. The reference computes in
// double; the optimized kernel in f32 with Eigen's vectorised sums, split over the rows. They
// agree to f32 rounding: tests compare them with a tolerance.
#include <cmath>

#include "executor/kernels/op_kernels.h"
#include "executor/kernels/unary.h"

namespace gearbox::kernels {
namespace {

[[gnu::noinline]] void runLayerNormF32(const NormParams& p, int tasks, float eps, const float* x,
                                       const float* scale, const float* bias, float* y) {
  if (p.n == 0) return;
  const float invN = 1.0f / static_cast<float>(p.n);
  detail::runRanges(tasks, p.outer, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      detail::ConstArrayMapF xr(x + r * p.n, p.n);
      detail::ArrayMapF yr(y + r * p.n, p.n);
      const float mean = xr.sum() * invN;
      yr = xr - mean;
      const float var = yr.square().sum() * invN;
      yr *= 1.0f / std::sqrt(var + eps);
      if (scale) yr *= detail::ConstArrayMapF(scale, p.n);
      if (bias) yr += detail::ConstArrayMapF(bias, p.n);
    }
  });
}

}  // namespace

void ref::refLayerNorm(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  const Shape& s = ins[0].shape;
  const int r = s.rank();
  const int64_t a = attrs.i(attr::LayerNorm::axis);
  const int axis = static_cast<int>(a < 0 ? a + r : a);
  int64_t rows = 1, n = 1;
  for (int d = 0; d < axis; ++d) rows *= s[d];
  for (int d = axis; d < r; ++d) n *= s[d];
  // epsilon is an f32 in every framework (ONNX's attribute, torch's float eps): add it as one.
  const double eps = static_cast<float>(attrs.f(attr::LayerNorm::epsilon));
  const float* x = ins[0].as<const float>();
  const float* scale = ins.size() > 1 ? ins[1].as<const float>() : nullptr;
  const float* bias = ins.size() > 2 ? ins[2].as<const float>() : nullptr;
  float* y = out.as<float>();
  for (int64_t row = 0; row < rows; ++row) {
    const float* xr = x + row * n;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += xr[i];
    mean /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= static_cast<double>(n);
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < n; ++i) {
      double v = (xr[i] - mean) * rstd;
      if (scale) v *= scale[i];
      if (bias) v += bias[i];
      y[row * n + i] = static_cast<float>(v);
    }
  }
}

bool runLayerNorm(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<NormParams>(&spec.params);
  if (!p || spec.key.dtype != DType::kF32) return false;
  runLayerNormF32(*p, spec.tasks, static_cast<float>(spec.key.attrs.f(attr::LayerNorm::epsilon)),
                  static_cast<const float*>(in[0]),
                  p->scale ? static_cast<const float*>(in[1]) : nullptr,
                  p->bias ? static_cast<const float*>(in[2]) : nullptr, static_cast<float*>(out));
  return true;
}

}  // namespace gearbox::kernels
