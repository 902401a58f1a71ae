// Sigmoid: reference and optimized kernels, out = 1 / (1 + exp(-x)) in f32. For x below about
// -88 exp(-x) overflows to inf and the result is 0, its correct limit; NaN stays NaN.
#include <cmath>

#include "executor/kernels/common.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

[[gnu::noinline]] void runSigmoidF32(const ElementwiseParams& p, int tasks, const void* in,
                                     void* out) {
  const float* x = static_cast<const float*>(in);
  float* o = static_cast<float*>(out);
  detail::runRanges(tasks, p.numel, 16, [&](int64_t begin, int64_t end) {
    detail::emitBlocks(o + begin, end - begin, p.streamingStores,
                       [&](float* d, int64_t off, int64_t len) {
                         const float* xi = x + begin + off;
                         for (int64_t i = 0; i < len; ++i) d[i] = 1.0f / (1.0f + std::exp(-xi[i]));
                       });
    if (p.streamingStores) detail::streamFence();
  });
}

}  // namespace

void ref::refSigmoid(const Attrs&, std::span<const TensorView> ins, const TensorView& out) {
  // Inference accepts f32 only.
  const float* x = ins[0].as<const float>();
  float* o = out.as<float>();
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = 1.0f / (1.0f + std::exp(-x[i]));
}

bool runSigmoid(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<ElementwiseParams>(&spec.params);
  if (!p || spec.key.dtype != DType::kF32) return false;
  runSigmoidF32(*p, spec.tasks, in[0], out);
  return true;
}

}  // namespace gearbox::kernels
