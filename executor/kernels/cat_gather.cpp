// CatGather: reference and optimized kernels. The optimized kernel gathers rows of the virtual
// cat straight from its inputs (executor/kernels/gather.h, shared with IndexSelect).
#include "executor/kernels/gather.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

// Copies one row of `bytes` >= 64 with 64-byte blocks the compiler turns into single vector
// loads and stores. A channel-shuffle row is a few hundred bytes, so a libc memcpy call per row
// costs a noticeable share of its time; the inline blocks do not. Rows of 784 bytes (14 x 14
// floats) start at every 16-byte offset, so after one unaligned head block the stores are
// aligned to the destination's cache lines (a store split across two lines costs about two),
// and the tail is one overlapping block instead of a variable-length copy.
inline void copyRowBlocks(std::byte* dst, const std::byte* src, size_t bytes) {
  std::memcpy(dst, src, 64);
  size_t i = 64 - (reinterpret_cast<uintptr_t>(dst) & 63);
  for (; i + 64 <= bytes; i += 64) std::memcpy(dst + i, src + i, 64);
  if (i < bytes) std::memcpy(dst + bytes - 64, src + bytes - 64, 64);
}

template <typename E, typename I>
void runCatGather(const CatGatherParams& p, int64_t dim, int tasks, const void* const* in,
                  void* out) {
  const size_t n = p.dimSizes.size();
  const I* idx = static_cast<const I*>(in[n]);
  int64_t total = 0;
  for (int64_t s : p.dimSizes) total += s;
  detail::checkIndices(idx, p.count, total, dim);
  // A position along the virtual cat dim maps to (input, row) by walking the sizes; inputs are
  // few, so the walk is cheaper than a table that would have to be allocated.
  auto source = [&](int64_t o, int64_t g) {
    size_t i = 0;
    while (g >= p.dimSizes[i]) g -= p.dimSizes[i++];
    return static_cast<const E*>(in[i]) + (o * p.dimSizes[i] + g) * p.inner;
  };
  const size_t rowBytes = static_cast<size_t>(p.inner) * sizeof(E);
  // Short rows, and outputs large enough for non-temporal stores (decided per shape at
  // compile time), take the generic row gather; other rows use the inline block copy.
  if (rowBytes < 64 || p.streamingStores) {
    detail::runRanges(tasks, p.outer * p.count, 1, [&](int64_t begin, int64_t end) {
      detail::gatherRows<E, I>(idx, p.count, p.inner, p.streamingStores, static_cast<E*>(out),
                               begin, end, source);
    });
    return;
  }
  // Output rows r = o * count + j in order: the writes stream through the output once.
  detail::runRanges(tasks, p.outer * p.count, 1, [&](int64_t begin, int64_t end) {
    int64_t o = begin / p.count;
    int64_t j = begin - o * p.count;
    std::byte* dst = static_cast<std::byte*>(out) + static_cast<size_t>(begin) * rowBytes;
    for (int64_t r = begin; r < end; ++r, dst += rowBytes) {
      copyRowBlocks(dst, reinterpret_cast<const std::byte*>(source(o, idx[j])), rowBytes);
      if (++j == p.count) {
        j = 0;
        ++o;
      }
    }
  });
}

template <typename E, typename I>
struct CatGatherFn {
  [[gnu::noinline]] static void run(const CatGatherParams& p, int64_t dim, int tasks,
                                    const void* const* in, void* out) {
    runCatGather<E, I>(p, dim, tasks, in, out);
  }
};

void refImpl(std::span<const TensorView> ins, const TensorView& index, int d,
             const TensorView& out) {
  using namespace ref::detail;
  int64_t total = 0;
  for (const TensorView& v : ins) total += v.shape[d];
  checkIndex(index, d, total);
  copyElements(ins, out, [&](const int64_t* idx) {
    int64_t src[kMaxRank];
    for (int i = 0; i < out.shape.rank(); ++i) src[i] = idx[i];
    const auto [input, pos] = catSource(ins, d, readIndex(index, idx[d]));
    src[d] = pos;
    return std::pair<size_t, int64_t>{input, offsetOf(ins[input].shape, src)};
  });
}

}  // namespace

void ref::refCatGather(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  refImpl(ins.first(ins.size() - 1), ins.back(), ref::detail::wrappedDim(attrs, ins[0]), out);
}

bool runCatGather(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<CatGatherParams>(&spec.params);
  if (!p) return false;
  detail::dispatchGather<CatGatherFn>(spec.key.dtype, p->indexType, *p,
                                      spec.key.attrs.dim.value_or(0), spec.tasks, in, out);
  return true;
}

}  // namespace gearbox::kernels
