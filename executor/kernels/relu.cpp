// Relu: reference and optimized kernels, out = max(x, 0). NaN stays NaN, as in PyTorch. The
// optimized loop is compiled per ISA (executor/kernels/elementwise.h).
#include "executor/kernels/elementwise.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

// `x < 0 ? 0 : x` keeps NaN (the comparison is false).
template <typename T>
struct ReluOp {
  T operator()(T x) const { return x < T(0) ? T(0) : x; }
};

}  // namespace

void ref::refRelu(const Attrs&, std::span<const TensorView> ins, const TensorView& out) {
  dispatchDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = ins[0].as<const T>();
    T* o = out.as<T>();
    for (int64_t i = 0; i < out.numel(); ++i) o[i] = x[i] < T(0) ? T(0) : x[i];
  });
}

bool runRelu(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<ElementwiseParams>(&spec.params);
  if (!p) return false;
  dispatchDType(spec.key.dtype, [&](auto tag) {
    using T = decltype(tag);
    detail::runUnary<T>(*p, spec.tasks, in[0], out, ReluOp<T>{});
  });
  return true;
}

}  // namespace gearbox::kernels
