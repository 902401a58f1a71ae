#pragma once
// Helpers for ops whose Int / Ints attributes name axes (flatten, squeeze, unsqueeze, slice):
// ONNX's negative axes, checked with errors that name the op, the attribute and the range.
#include "graph/ops/common.h"

namespace gearbox::ops {

// Wraps `axis` of attribute `attr` against the rank of `of` (valid: [-rank, rank - 1]); `of`
// names the tensor the axes index ("input 0 (%x)", or unsqueeze's output).
inline int wrapAxis(const InferContext& ctx, std::string_view attr, int64_t axis, int rank,
                    std::string_view of) {
  if (axis < -rank || axis >= rank)
    fail(ErrorKind::kShape,
         "{}: attribute {}: axis {} is out of range for {} of rank {} (expected [{}, {}])",
         ctx.where(), attr, axis, of, rank, -rank, rank - 1);
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Wraps every entry of an axes list and rejects repeats; returns a mask, bit d = axis d listed.
inline uint32_t axesMask(const InferContext& ctx, std::string_view attr,
                         std::span<const int64_t> axes, int rank, std::string_view of) {
  uint32_t mask = 0;
  for (int64_t a : axes) {
    const int d = wrapAxis(ctx, attr, a, rank, of);
    if (mask & (1u << d))
      fail(ErrorKind::kShape, "{}: attribute {} names axis {} twice", ctx.where(), attr, d);
    mask |= 1u << d;
  }
  return mask;
}

}  // namespace gearbox::ops
