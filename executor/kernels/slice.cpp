// Slice: reference and optimized kernels. The optimized kernel walks the output in order, one row
// of its innermost (merged) dim at a time, reading the input from the compiled start offset at
// signed strides (compiler/ops/slice.cpp): a row of stride 1 is one block copy, others a strided
// gather (a negative stride reads backwards).
#include "graph/ops/slice.h"

#include "executor/kernels/common.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

// E is an unsigned integer of the element size: a slice moves bits, so f32 and i32 share one
// instantiation.
template <typename E>
[[gnu::noinline]] void runSliceT(const SliceParams& p, int tasks, const void* in, void* out) {
  if (p.numel == 0) return;
  const E* src = static_cast<const E*>(in) + p.offset;
  E* dst = static_cast<E*>(out);
  const int last = p.rank - 1;
  const int64_t len = p.outDims[last], stride = p.inStrides[last];
  detail::runRanges(tasks, p.numel / len, 1, [&](int64_t begin, int64_t end) {
    // The input offset of output row `begin`, then advanced like an odometer.
    int64_t idx[kMaxRank] = {};
    int64_t off = 0, rem = begin;
    for (int d = last - 1; d >= 0; --d) {
      idx[d] = rem % p.outDims[d];
      rem /= p.outDims[d];
      off += idx[d] * p.inStrides[d];
    }
    for (int64_t r = begin; r < end; ++r) {
      E* orow = dst + r * len;
      const E* irow = src + off;
      if (stride == 1) {
        std::memcpy(orow, irow, static_cast<size_t>(len) * sizeof(E));
      } else {
        for (int64_t c = 0; c < len; ++c) orow[c] = irow[c * stride];
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

void ref::refSlice(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  using namespace ref::detail;
  const TensorView& in = ins[0];
  const auto ranges = resolveSlice(attrs, in.shape);
  copyElements(ins, out, [&](const int64_t* idx) {
    // Output index i of dim d reads input index start + i * step.
    int64_t src[kMaxRank];
    for (int d = 0; d < in.shape.rank(); ++d) src[d] = ranges[d].start + idx[d] * ranges[d].step;
    return std::pair<size_t, int64_t>{0, offsetOf(in.shape, src)};
  });
}

bool runSlice(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<SliceParams>(&spec.params);
  if (!p) return false;
  if (dtypeSize(spec.key.dtype) == 8) {
    runSliceT<uint64_t>(*p, spec.tasks, in[0], out);
  } else {
    runSliceT<uint32_t>(*p, spec.tasks, in[0], out);
  }
  return true;
}

}  // namespace gearbox::kernels
