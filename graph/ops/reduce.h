#pragma once
// Shape inference shared by the reductions over listed axes (mean, reduce_sum): ONNX
// ReduceMean / ReduceSum with the axes as an attribute. Axes may be negative and must be
// distinct and non-empty; keepdims=1 keeps each reduced dim as a 1.
#include "graph/ops/common.h"

namespace gearbox::ops {

// The reduced dims of `in` as a mask; errors name the attribute entry.
inline std::array<bool, kMaxRank> reduceAxes(const InferContext& ctx, const Shape& in,
                                             std::span<const int64_t> axes) {
  std::array<bool, kMaxRank> reduce{};
  if (axes.empty())
    fail(ErrorKind::kShape, "{}: attribute axes is empty (name the dims to reduce)", ctx.where());
  const int64_t r = in.rank();
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = axes[i];
    if (a < -r || a >= r)
      fail(ErrorKind::kShape, "{}: attribute axes entry {} is {}, out of range for {} of rank {}",
           ctx.where(), i, a, inputLabel(ctx, 0), r);
    const int64_t k = a < 0 ? a + r : a;
    if (reduce[k]) fail(ErrorKind::kShape, "{}: attribute axes names dim {} twice", ctx.where(), k);
    reduce[k] = true;
  }
  return reduce;
}

// f32 input; the output drops (keepdims=0) or keeps as 1 (keepdims=1) every reduced dim.
inline TensorType inferReduce(const InferContext& ctx, std::string_view op, int axesSlot,
                              int keepdimsSlot) {
  const TensorType& in = ctx.inputs[0];
  if (in.dtype != DType::kF32)
    fail(ErrorKind::kShape, "{}: {} must be f32, got {} ({} takes f32)", ctx.where(),
         inputLabel(ctx, 0), dtypeName(in.dtype), op);
  const int64_t keep = ctx.attrs.i(keepdimsSlot);
  if (keep != 0 && keep != 1)
    fail(ErrorKind::kShape, "{}: attribute keepdims is {}, expected 0 or 1", ctx.where(), keep);
  const auto reduce = reduceAxes(ctx, in.shape, ctx.attrs.ints(axesSlot));
  Shape out;
  for (int d = 0; d < in.shape.rank(); ++d) {
    if (!reduce[d]) {
      out.push(in.shape[d]);
    } else if (keep) {
      out.push(1);
    }
  }
  return TensorType{in.dtype, out};
}

}  // namespace gearbox::ops
