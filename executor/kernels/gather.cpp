// Gather: reference and optimized kernels. The optimized kernel is IndexSelect's with the
// indices flattened (count = their element count) and always wrapping ([-size, size), ONNX's
// rule): every index checked first, then whole rows copied (executor/kernels/gather.h).
#include "executor/kernels/gather.h"

#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {

void ref::refGather(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  using namespace ref::detail;
  const TensorView& data = ins[0];
  const TensorView& index = ins[1];
  const int r = data.shape.rank();
  const int64_t a = attrs.i(attr::Gather::axis);
  const int axis = static_cast<int>(a < 0 ? a + r : a);
  const int ri = index.shape.rank();
  checkIndex(index, axis, data.shape[axis], /*wrap=*/true);
  const TensorView src[] = {data};
  copyElements(src, out, [&](const int64_t* idx) {
    // Output index: data's dims before axis, the index's dims, data's dims after axis.
    int64_t at[kMaxRank];
    for (int d = 0; d < axis; ++d) at[d] = idx[d];
    int64_t v = readIndex(index, offsetOf(index.shape, idx + axis));
    if (v < 0) v += data.shape[axis];
    at[axis] = v;
    for (int d = axis + 1; d < r; ++d) at[d] = idx[d - 1 + ri];
    return std::pair<size_t, int64_t>{0, offsetOf(data.shape, at)};
  });
}

bool runGather(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<GatherParams>(&spec.params);
  if (!p) return false;
  const int r = spec.key.inputs[0].shape.rank();
  const int64_t a = spec.key.attrs.i(attr::Gather::axis);
  detail::dispatchGather<detail::IndexGatherFn>(spec.key.dtype, p->indexType, *p, a < 0 ? a + r : a,
                                                /*wrap=*/true, spec.tasks, in, out);
  return true;
}

}  // namespace gearbox::kernels
