// Gelu: reference and optimized kernels in f32. approximate=0: 0.5 x (1 + erf(x / sqrt(2)));
// approximate=1: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). The reference computes in
// double with libm; the optimized kernel runs Eigen's vectorised erf / tanh (rational
// approximations, unary.h). They agree to a few f32 ulps: tests compare with a tolerance.
#include <cmath>

#include "executor/kernels/op_kernels.h"
#include "executor/kernels/unary.h"

namespace gearbox::kernels {
namespace {

constexpr double kSqrtHalf = 0.70710678118654752440;     // 1 / sqrt(2)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kCubic = 0.044715;
constexpr float kSqrtHalfF = static_cast<float>(kSqrtHalf);
constexpr float kSqrt2OverPiF = static_cast<float>(kSqrt2OverPi);
constexpr float kCubicF = static_cast<float>(kCubic);

}  // namespace

void ref::refGelu(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  const bool tanhForm = attrs.i(attr::Gelu::approximate) == 1;
  const float* x = ins[0].as<const float>();
  float* o = out.as<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    const double v = x[i];
    const double phi = tanhForm ? 0.5 * (1 + std::tanh(kSqrt2OverPi * (v + kCubic * v * v * v)))
                                : 0.5 * (1 + std::erf(v * kSqrtHalf));
    o[i] = static_cast<float>(v * phi);
  }
}

bool runGelu(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<ElementwiseParams>(&spec.params);
  if (!p || spec.key.dtype != DType::kF32) return false;
  if (spec.key.attrs.i(attr::Gelu::approximate) == 1) {
    detail::runUnaryF32(*p, spec.tasks, in[0], out, [](auto x, auto o) {
      o = 0.5f * x * (1.0f + (kSqrt2OverPiF * (x + kCubicF * x * x * x)).tanh());
    });
  } else {
    detail::runUnaryF32(*p, spec.tasks, in[0], out,
                        [](auto x, auto o) { o = 0.5f * x * (1.0f + (x * kSqrtHalfF).erf()); });
  }
  return true;
}

}  // namespace gearbox::kernels
