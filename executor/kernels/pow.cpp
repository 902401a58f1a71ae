// Pow: reference and optimized kernels, f32 only. Both call std::pow on floats (glibc's powf,
// correctly rounded in practice), so they agree bit for bit; the optimized kernel differs only
// in its loops (the broadcast paths of executor/kernels/binary.h). A vectorised pow would need
// -ffast-math or a hand-written log/exp pair; exported models use pow with a constant exponent
// of 2 (the decomposed LayerNorm), which the importer folds into layer_norm instead.
#include <cmath>

#include "executor/kernels/binary.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

struct PowF {
  float operator()(float a, float b) const { return std::pow(a, b); }
};

}  // namespace

void ref::refPow(const Attrs&, std::span<const TensorView> ins, const TensorView& out) {
  // Inference accepts f32 only.
  ref::detail::binary(ins[0], ins[1], out, PowF{});
}

bool runPow(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<BinaryParams>(&spec.params);
  if (!p || spec.key.dtype != DType::kF32) return false;
  detail::runBinary<float, PowF>(*p, spec.tasks, in, out);
  return true;
}

}  // namespace gearbox::kernels
