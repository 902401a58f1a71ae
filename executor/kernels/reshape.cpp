// Reshape: reference and optimized kernels. Tensors are contiguous and row-major, so a reshape
// keeps every element where it is: when the static plan made the output a view of the input
// (same buffer, compiler/compiler.cpp) the kernel has nothing to do; otherwise it copies.
#include "executor/kernels/common.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {

void ref::refReshape(const Attrs&, std::span<const TensorView> ins, const TensorView& out) {
  if (out.data != ins[0].data) std::memcpy(out.data, ins[0].data, out.bytes());
}

bool runReshape(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<ElementwiseParams>(&spec.params);
  if (!p) return false;
  if (out == in[0]) return true;  // a view
  const int64_t esize = static_cast<int64_t>(dtypeSize(spec.key.dtype));
  const auto* src = static_cast<const std::byte*>(in[0]);
  auto* dst = static_cast<std::byte*>(out);
  detail::runRanges(spec.tasks, p->numel, 64 / esize, [&](int64_t begin, int64_t end) {
    detail::copyRow(dst + begin * esize, src + begin * esize,
                    static_cast<size_t>((end - begin) * esize), p->streamingStores);
    if (p->streamingStores) detail::streamFence();
  });
  return true;
}

}  // namespace gearbox::kernels
