// Expand: reference and optimized kernels. The optimized kernel walks the output's (merged)
// dims with the input's strides, 0 on broadcast dims: a row whose input stride is 0 is one
// value filled, 1 a contiguous copy. Elements are moved as bits, so both kernels are exact.
#include "executor/kernels/common.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

template <typename E>
[[gnu::noinline]] void runExpandT(const ExpandParams& p, int tasks, const E* x, E* o) {
  if (p.rank == 0) {  // nothing broadcast: a copy
    detail::runRanges(tasks, p.numel, 16, [&](int64_t begin, int64_t end) {
      std::memcpy(o + begin, x + begin, static_cast<size_t>(end - begin) * sizeof(E));
    });
    return;
  }
  const int last = p.rank - 1;
  const int64_t len = p.outDims[last], s = p.inStrides[last];
  detail::runRanges(tasks, p.numel / len, 1, [&](int64_t begin, int64_t end) {
    int64_t idx[kMaxRank] = {};
    int64_t off = 0, rem = begin;
    for (int d = last - 1; d >= 0; --d) {
      idx[d] = rem % p.outDims[d];
      rem /= p.outDims[d];
      off += idx[d] * p.inStrides[d];
    }
    for (int64_t r = begin; r < end; ++r) {
      E* orow = o + r * len;
      const E* in = x + off;
      if (s == 0) {
        std::fill(orow, orow + len, in[0]);
      } else if (s == 1) {
        std::memcpy(orow, in, static_cast<size_t>(len) * sizeof(E));
      } else {
        for (int64_t k = 0; k < len; ++k) orow[k] = in[k * s];
      }
      for (int d = last - 1; d >= 0; --d) {
        off += p.inStrides[d];
        if (++idx[d] < p.outDims[d]) break;
        off -= p.inStrides[d] * p.outDims[d];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace

void ref::refExpand(const Attrs&, std::span<const TensorView> ins, const TensorView& out) {
  const int r = out.shape.rank();
  detail::copyElements(ins, out, [&](const int64_t* idx) {
    return std::pair<size_t, int64_t>{
        0, detail::broadcastOffset(ins[0].shape, ins[0].shape.rank(), r, idx)};
  });
}

bool runExpand(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<ExpandParams>(&spec.params);
  if (!p) return false;
  if (dtypeSize(spec.key.dtype) == 8) {
    runExpandT(*p, spec.tasks, static_cast<const uint64_t*>(in[0]), static_cast<uint64_t*>(out));
  } else {
    runExpandT(*p, spec.tasks, static_cast<const uint32_t*>(in[0]), static_cast<uint32_t*>(out));
  }
  return true;
}

}  // namespace gearbox::kernels
