// BatchNorm: reference and optimized kernels (inference mode, f32). The reference computes
// (x - mean) / sqrt(var + eps) * scale + bias per element, in double; the optimized kernel folds
// each channel into y = x * a + b with a = scale / sqrt(var + eps), b = bias - mean * a (also
// computed in double), one multiply-add per element. The two agree to f32 rounding, not bit for
// bit: tests compare them with a tolerance.
#include <cmath>

#include "executor/kernels/common.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

struct Stats {
  const float *scale, *bias, *mean, *var;
};

[[gnu::noinline]] void runBatchNormF32(const BatchNormParams& p, int tasks, double eps,
                                       const float* x, const Stats& s, float* y) {
  // Work units are (outer, channel) planes; the per-channel factors are recomputed per plane,
  // which costs a sqrt per plane and keeps the kernel free of allocations.
  detail::runRanges(tasks, p.outer * p.channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t c = plane % p.channels;
      const double a =
          static_cast<double>(s.scale[c]) / std::sqrt(static_cast<double>(s.var[c]) + eps);
      const float af = static_cast<float>(a);
      const float bf =
          static_cast<float>(static_cast<double>(s.bias[c]) - static_cast<double>(s.mean[c]) * a);
      const float* xi = x + plane * p.inner;
      float* yi = y + plane * p.inner;
      for (int64_t i = 0; i < p.inner; ++i) yi[i] = xi[i] * af + bf;
    }
  });
}

}  // namespace

void ref::refBatchNorm(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  const Shape& xs = ins[0].shape;
  const int64_t channels = xs[1];
  int64_t inner = 1;
  for (int d = 2; d < xs.rank(); ++d) inner *= xs[d];
  const double eps = attrs.f(attr::BatchNorm::epsilon);
  const float* x = ins[0].as<const float>();
  const float* scale = ins[1].as<const float>();
  const float* bias = ins[2].as<const float>();
  const float* mean = ins[3].as<const float>();
  const float* var = ins[4].as<const float>();
  float* y = out.as<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    const int64_t c = i / inner % channels;
    y[i] = static_cast<float>(
        (static_cast<double>(x[i]) - mean[c]) / std::sqrt(var[c] + eps) * scale[c] + bias[c]);
  }
}

bool runBatchNorm(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<BatchNormParams>(&spec.params);
  if (!p || spec.key.dtype != DType::kF32) return false;
  const Stats s{static_cast<const float*>(in[1]), static_cast<const float*>(in[2]),
                static_cast<const float*>(in[3]), static_cast<const float*>(in[4])};
  runBatchNormF32(*p, spec.tasks, spec.key.attrs.f(attr::BatchNorm::epsilon),
                  static_cast<const float*>(in[0]), s, static_cast<float*>(out));
  return true;
}

}  // namespace gearbox::kernels
