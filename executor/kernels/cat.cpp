// Cat: reference and optimized kernels. The optimized kernel copies contiguous segments, split
// over element ranges so even a cat along dim 0 (one huge row) can use several tasks.
#include "executor/kernels/common.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

// Copies output elements [begin, end) of a cat: each output row is the inputs' rows side by
// side, so a range is a sequence of contiguous segments, each one memcpy. Working on element
// ranges (not rows) lets a cat with a single huge row (cat along dim 0) split across tasks too.
void catRange(const CatParams& p, const void* const* in, std::byte* out, size_t esize,
              int64_t begin, int64_t end) {
  const int64_t rowElems = p.outRowElems;
  int64_t o = begin / rowElems;
  int64_t off = begin - o * rowElems;
  int64_t s = begin;
  while (s < end) {
    int64_t segStart = 0;
    for (size_t i = 0; i < p.rowElems.size() && s < end; ++i) {
      const int64_t len = p.rowElems[i];
      if (off < segStart + len) {
        const int64_t from = off - segStart;
        const int64_t n = std::min(len - from, end - s);
        detail::copyRow(out + s * esize,
                        static_cast<const std::byte*>(in[i]) + (o * len + from) * esize,
                        static_cast<size_t>(n) * esize, p.streamingStores);
        s += n;
        off += n;
      }
      segStart += len;
    }
    ++o;
    off = 0;
  }
  if (p.streamingStores) detail::streamFence();
}

[[gnu::noinline]] void runCatParams(const CatParams& p, DType dtype, int tasks,
                                    const void* const* in, void* out) {
  const size_t esize = dtypeSize(dtype);
  const int64_t total = p.outer * p.outRowElems;
  if (total == 0) return;
  // 64-byte aligned slice bounds keep each task's stores on its own cache lines.
  detail::runRanges(tasks, total, 64 / static_cast<int64_t>(esize),
                    [&](int64_t begin, int64_t end) {
                      catRange(p, in, static_cast<std::byte*>(out), esize, begin, end);
                    });
}

void refImpl(std::span<const TensorView> ins, int d, const TensorView& out) {
  using namespace ref::detail;
  copyElements(ins, out, [&](const int64_t* idx) {
    int64_t src[kMaxRank];
    for (int i = 0; i < out.shape.rank(); ++i) src[i] = idx[i];
    const auto [input, pos] = catSource(ins, d, idx[d]);
    src[d] = pos;
    return std::pair<size_t, int64_t>{input, offsetOf(ins[input].shape, src)};
  });
}

}  // namespace

void ref::refCat(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  refImpl(ins, ref::detail::wrappedDim(attrs, ins[0]), out);
}

bool runCat(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<CatParams>(&spec.params);
  if (!p) return false;
  runCatParams(*p, spec.key.dtype, spec.tasks, in, out);
  return true;
}

}  // namespace gearbox::kernels
