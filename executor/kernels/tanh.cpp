// Tanh: reference and optimized kernels, out = tanh(x) in f32. The reference computes in
// double with libm (std::tanh); the optimized kernel runs Eigen's generic_fast_tanh_float, a
// 13/6-degree rational approximation. They agree to a few f32 ulps, not bit for bit: tests compare
// them with a tolerance.
#include <cmath>

#include "executor/kernels/op_kernels.h"
#include "executor/kernels/unary.h"

namespace gearbox::kernels {

void ref::refTanh(const Attrs&, std::span<const TensorView> ins, const TensorView& out) {
  // Inference accepts f32 only.
  const float* x = ins[0].as<const float>();
  float* o = out.as<float>();
  for (int64_t i = 0; i < out.numel(); ++i)
    o[i] = static_cast<float>(std::tanh(static_cast<double>(x[i])));
}

bool runTanh(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<ElementwiseParams>(&spec.params);
  if (!p || spec.key.dtype != DType::kF32) return false;
  detail::runUnaryF32(*p, spec.tasks, in[0], out, [](auto x, auto o) { o = x.tanh(); });
  return true;
}

}  // namespace gearbox::kernels
