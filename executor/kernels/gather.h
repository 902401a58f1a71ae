#pragma once
// Row gathers shared by IndexSelect and CatGather (executor/kernels/index_select.cpp,
// cat_gather.cpp). Internal to the executor library.
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

}  // namespace gearbox::kernels::detail
