#pragma once
// Slice's per-dim geometry (ONNX Slice), shared by shape inference, the compile step and the
// reference kernel so the three cannot disagree about clamping.
#include <array>

#include "graph/graph.h"

namespace gearbox {

// What a slice reads along one input dim: `size` elements starting at index `start`, `step`
// apart (step < 0 walks backwards). A dim the slice does not name reads everything.
struct SliceRange {
  int64_t start = 0, step = 1, size = 0;
};

// The ranges of every dim of a static input shape, for attributes that shape inference has
// accepted (equal lengths, axes in range and unique, steps non-zero).
std::array<SliceRange, kMaxRank> resolveSlice(const Attrs& attrs, const Shape& in);

}  // namespace gearbox
