#pragma once
// Helpers shared by the reference kernels (executor/kernels/<op>.cpp, namespace ref): one
// odometer walk over the output's multi-index, and every element's source offset computed from
// first principles. Internal to the executor library.
#include <fmt/format.h>

#include <span>
#include <utility>

#include "graph/error.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace gearbox::kernels::ref::detail {

// Calls fn(idx) for every multi-index of a static shape in row-major order.
template <typename Fn>
inline void forEachIndex(const Shape& s, Fn&& fn) {
  if (s.numel() == 0) return;
  int64_t idx[kMaxRank] = {};
  const int r = s.rank();
  for (;;) {
    fn(static_cast<const int64_t*>(idx));
    int d = r - 1;
    while (d >= 0 && ++idx[d] == s[d]) {
      idx[d] = 0;
      --d;
    }
    if (d < 0) return;
  }
}

// Row-major offset of the first `rank` components of idx in shape s.
inline int64_t offsetOf(const Shape& s, const int64_t* idx) {
  int64_t off = 0;
  for (int i = 0; i < s.rank(); ++i) off = off * s[i] + idx[i];
  return off;
}

// Offset in an operand of the element broadcast to output index outIdx: the operand's dims
// are right-aligned with the first `outRank` output dims, and a size-1 dim always reads 0.
inline int64_t broadcastOffset(const Shape& operand, int operandRank, int outRank,
                               const int64_t* outIdx) {
  int64_t off = 0;
  for (int k = 0; k < operandRank; ++k) {
    const int64_t i = outIdx[k + (outRank - operandRank)];
    off = off * operand[k] + (operand[k] == 1 ? 0 : i);
  }
  return off;
}

inline int64_t readIndex(const TensorView& index, int64_t pos) {
  return index.dtype == DType::kI32 ? index.as<const int32_t>()[pos]
                                    : index.as<const int64_t>()[pos];
}

// Every index value must lie in [0, size); negative values are out of range, as in PyTorch's
// index_select; with `wrap` (ONNX's Gather) in [-size, size). All values are checked, even when
// the output is empty.
inline void checkIndex(const TensorView& index, int64_t dim, int64_t size, bool wrap = false) {
  for (int64_t pos = 0; pos < index.numel(); ++pos) {
    const int64_t v = readIndex(index, pos);
    if (v < (wrap ? -size : 0) || v >= size)
      fail(ErrorKind::kIndex, "index value {} at position {} is out of range for dim {} of size {}",
           v, pos, dim, size);
  }
}

// Copies out[idx] = source(idx) element by element; `locate` maps an output index to (input
// number, offset in that input).
template <typename Locate>
void copyElements(std::span<const TensorView> ins, const TensorView& out, Locate&& locate) {
  dispatchDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* po = out.as<T>();
    forEachIndex(out.shape, [&](const int64_t* idx) {
      const auto [input, offset] = locate(idx);
      po[offsetOf(out.shape, idx)] = ins[input].template as<const T>()[offset];
    });
  });
}

// Which input of a cat holds position `pos` along the cat dim, and the position inside it.
inline std::pair<size_t, int64_t> catSource(std::span<const TensorView> ins, int d, int64_t pos) {
  size_t i = 0;
  while (pos >= ins[i].shape[d]) pos -= ins[i++].shape[d];
  return {i, pos};
}

inline int wrappedDim(const Attrs& attrs, const TensorView& in) {
  return in.shape.wrapDim(attrs.dim.value_or(0), "reference kernel: attribute dim");
}

}  // namespace gearbox::kernels::ref::detail

namespace gearbox::kernels::ref::detail {

// out = op(a, b) elementwise with NumPy broadcasting (Add, Mul).
template <typename Op>
void binary(const TensorView& a, const TensorView& b, const TensorView& out, Op op) {
  dispatchDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.as<const T>();
    const T* pb = b.as<const T>();
    T* po = out.as<T>();
    const int r = out.shape.rank();
    forEachIndex(out.shape, [&](const int64_t* idx) {
      po[offsetOf(out.shape, idx)] =
          static_cast<T>(op(pa[broadcastOffset(a.shape, a.shape.rank(), r, idx)],
                            pb[broadcastOffset(b.shape, b.shape.rank(), r, idx)]));
    });
  });
}

}  // namespace gearbox::kernels::ref::detail
