// CatGather(inputs..., index, dim): index_select(cat(inputs, dim), index, dim) without the
// concatenated intermediate. Produced by the Cat + IndexSelect fusion pass.
#include "graph/ops/common.h"

namespace gearbox::ops {
Shape inferCatShape(const InferContext& ctx, size_t count, int* wrapped);
}

namespace gearbox {

TensorType inferCatGather(const InferContext& ctx) {
  if (ctx.inputs.size() < 2)
    fail(ErrorKind::kShape, "{}: needs at least one data input and an index", ctx.where());
  const size_t n = ctx.inputs.size() - 1;
  const TensorType& idx = ctx.inputs[n];
  if (idx.dtype != DType::kI32 && idx.dtype != DType::kI64)
    fail(ErrorKind::kShape, "{}: {} (index) must be i32 or i64, got {}", ctx.where(),
         ops::inputLabel(ctx, n), dtypeName(idx.dtype));
  if (idx.shape.rank() != 1)
    fail(ErrorKind::kShape, "{}: {} (index) must be 1-D, got rank {}", ctx.where(),
         ops::inputLabel(ctx, n), idx.shape.rank());
  int d = 0;
  Shape out = ops::inferCatShape(ctx, n, &d);
  // As in IndexSelect: an index into an empty dim fails before its output is allocated.
  if (out[d] == 0 && idx.shape[0] > 0)
    fail(ErrorKind::kIndex,
         "{}: {} (index) has {} entries but the cat dim {} is 0, so every index is out of range",
         ctx.where(), ops::inputLabel(ctx, n), idx.shape[0], d);
  out[d] = idx.shape[0];
  return TensorType{ctx.inputs[0].dtype, out};
}

}  // namespace gearbox
