// Relu: reference and optimized kernels, out = max(x, 0). NaN stays NaN, as in PyTorch.
#include "executor/kernels/common.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

template <typename T>
[[gnu::noinline]] void runReluT(const ElementwiseParams& p, int tasks, const void* in, void* out) {
  const T* x = static_cast<const T*>(in);
  T* o = static_cast<T*>(out);
  detail::runRanges(tasks, p.numel, 64 / static_cast<int64_t>(sizeof(T)),
                    [&](int64_t begin, int64_t end) {
                      detail::emitBlocks(o + begin, end - begin, p.streamingStores,
                                         [&](T* d, int64_t off, int64_t len) {
                                           const T* xi = x + begin + off;
                                           // `x < 0 ? 0 : x` keeps NaN (the comparison is false).
                                           for (int64_t i = 0; i < len; ++i)
                                             d[i] = xi[i] < T(0) ? T(0) : xi[i];
                                         });
                      if (p.streamingStores) detail::streamFence();
                    });
}

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
  dispatchDType(spec.key.dtype,
                [&](auto tag) { runReluT<decltype(tag)>(*p, spec.tasks, in[0], out); });
  return true;
}

}  // namespace gearbox::kernels
