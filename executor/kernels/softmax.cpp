// Softmax: reference and optimized kernels (f32). The reference computes each line in double
// with libm; the optimized kernel runs executor/kernels/softmax.h (Eigen's vectorised exp and
// sums in f32), split over the outer dim. They agree to f32 rounding of the sum, not bit for
// bit: tests compare them with a tolerance.
#include "executor/kernels/softmax.h"

#include <cmath>
#include <limits>

#include "executor/kernels/op_kernels.h"

namespace gearbox::kernels {
namespace {

[[gnu::noinline]] void runSoftmaxF32(const NormParams& p, int tasks, const float* x, float* y) {
  const int64_t block = p.n * p.inner;
  detail::runRanges(tasks, p.outer, 1, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      if (p.inner == 1) {
        detail::softmaxLine(x + o * block, y + o * block, p.n);
      } else {
        detail::softmaxStrided(x + o * block, y + o * block, p.n, p.inner);
      }
    }
  });
}

}  // namespace

void ref::refSoftmax(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  const Shape& s = ins[0].shape;
  const int r = s.rank();
  const int64_t a = attrs.i(attr::Softmax::axis);
  const int axis = static_cast<int>(a < 0 ? a + r : a);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < r; ++d) inner *= s[d];
  const int64_t n = s[axis];
  const float* x = ins[0].as<const float>();
  float* y = out.as<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t i) { return (o * n + i) * inner + j; };
      double m = -std::numeric_limits<double>::infinity();
      bool nan = false;
      for (int64_t i = 0; i < n; ++i) {
        nan = nan || std::isnan(x[at(i)]);
        m = std::max(m, static_cast<double>(x[at(i)]));
      }
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += std::exp(x[at(i)] - m);
      for (int64_t i = 0; i < n; ++i)
        y[at(i)] = nan ? std::numeric_limits<float>::quiet_NaN()
                       : static_cast<float>(std::exp(x[at(i)] - m) / sum);
    }
}

bool runSoftmax(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<NormParams>(&spec.params);
  if (!p || spec.key.dtype != DType::kF32) return false;
  runSoftmaxF32(*p, spec.tasks, static_cast<const float*>(in[0]), static_cast<float*>(out));
  return true;
}

}  // namespace gearbox::kernels
