// IndexSelect: reference and optimized kernels. The optimized kernel checks every index first,
// then copies whole rows (executor/kernels/gather.h, shared with CatGather).
#include "executor/kernels/gather.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

void refImpl(const TensorView& in, const TensorView& index, int d, bool wrap,
             const TensorView& out) {
  using namespace ref::detail;
  checkIndex(index, d, in.shape[d], wrap);
  const TensorView ins[] = {in};
  copyElements(ins, out, [&](const int64_t* idx) {
    int64_t src[kMaxRank];
    for (int i = 0; i < out.shape.rank(); ++i) src[i] = idx[i];
    src[d] = readIndex(index, idx[d]);
    if (src[d] < 0) src[d] += in.shape[d];  // wrap=1 only: checkIndex refused it otherwise
    return std::pair<size_t, int64_t>{0, offsetOf(in.shape, src)};
  });
}

}  // namespace

void ref::refIndexSelect(const Attrs& attrs, std::span<const TensorView> ins,
                         const TensorView& out) {
  refImpl(ins[0], ins[1], ref::detail::wrappedDim(attrs, ins[0]),
          attrs.i(attr::IndexSelect::wrap) != 0, out);
}

bool runIndexSelect(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<GatherParams>(&spec.params);
  if (!p) return false;
  detail::dispatchGather<detail::IndexGatherFn>(
      spec.key.dtype, p->indexType, *p, spec.key.attrs.dim.value_or(0),
      spec.key.attrs.i(attr::IndexSelect::wrap) != 0, spec.tasks, in, out);
  return true;
}

}  // namespace gearbox::kernels
