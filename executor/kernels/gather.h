#pragma once
// Row gathers shared by IndexSelect, Gather and CatGather (executor/kernels/index_select.cpp,
// gather.cpp, cat_gather.cpp). Internal to the executor library.
#include "compiler/kernel_spec.h"
#include "executor/kernels/common.h"
#include "graph/dtype.h"

namespace gearbox::kernels::detail {

// Output rows r = o * count + j in [begin, end): out[r, :] = src(o, idx[j])[:], where `source`
// returns the first element of the selected input row. E is an unsigned integer of the element
// size: copies move bits, so one instantiation serves f32 and i32.
template <typename E, typename I, typename Source>
void gatherRows(const I* idx, int64_t count, int64_t inner, bool stream, E* out, int64_t begin,
                int64_t end, const Source& source) {
  int64_t r = begin;
  while (r < end) {
    const int64_t o = r / count;
    const int64_t j0 = r - o * count;
    const int64_t j1 = std::min(count, j0 + (end - r));
    E* dst = out + r * inner;
    if (inner == 1) {
      for (int64_t j = j0; j < j1; ++j) dst[j - j0] = *source(o, idx[j]);
    } else {
      const size_t rowBytes = static_cast<size_t>(inner) * sizeof(E);
      for (int64_t j = j0; j < j1; ++j)
        copyRow(dst + (j - j0) * inner, source(o, idx[j]), rowBytes, stream);
    }
    r += j1 - j0;
  }
  if (stream) streamFence();
}

// Instantiates fn<E, I> for the element size of `data` and the index dtype.
template <template <typename, typename> class Fn, typename... Args>
void dispatchGather(DType data, DType index, Args&&... args) {
  const bool wide = dtypeSize(data) == 8;
  if (index == DType::kI32) {
    wide ? Fn<uint64_t, int32_t>::run(args...) : Fn<uint32_t, int32_t>::run(args...);
  } else {
    wide ? Fn<uint64_t, int64_t>::run(args...) : Fn<uint32_t, int64_t>::run(args...);
  }
}

// IndexSelect and Gather: data viewed as [outer, dimSize, inner], the output as
// [outer, count, inner]; every index is checked first ([0, size), or with `wrap` [-size, size)
// with negatives counting from the end), then whole rows are copied.
template <typename E, typename I>
void runIndexGather(const GatherParams& p, int64_t dim, bool wrap, int tasks, const void* const* in,
                    void* out) {
  const E* src = static_cast<const E*>(in[0]);
  const I* idx = static_cast<const I*>(in[1]);
  std::vector<I> wrapped;
  if (wrap)
    idx = wrapIndices(idx, p.count, p.dimSize, dim, wrapped);
  else
    checkIndices(idx, p.count, p.dimSize, dim);
  const int64_t rowStride = p.dimSize * p.inner;
  auto source = [&](int64_t o, int64_t i) { return src + o * rowStride + i * p.inner; };
  runRanges(tasks, p.outer * p.count, 1, [&](int64_t begin, int64_t end) {
    gatherRows<E, I>(idx, p.count, p.inner, p.streamingStores, static_cast<E*>(out), begin, end,
                     source);
  });
}

template <typename E, typename I>
struct IndexGatherFn {
  [[gnu::noinline]] static void run(const GatherParams& p, int64_t dim, bool wrap, int tasks,
                                    const void* const* in, void* out) {
    runIndexGather<E, I>(p, dim, wrap, tasks, in, out);
  }
};

}  // namespace gearbox::kernels::detail
