// Gather(data, indices, axis=0): ONNX Gather, an embedding lookup: the output is data's shape
// with dim `axis` replaced by the whole shape of `indices` (any rank: [B, S] ids into a [V, D]
// table give [B, S, D]; a 0-D index drops the dim). indices are i32 or i64, checked by the
// kernels to lie in [-size, size) of that dim, a negative one counting from the end.
//
// Why a new op and not index_select with N-D indices: index_select keeps its input's rank (one
// dim changes size), which the cat_gather fusion, the channel-shuffle rewrite and the padding
// analysis rely on, and it takes PyTorch's [0, size) indices; gather changes the rank and takes
// ONNX's. Both run the same row-copy kernel (executor/kernels/gather.h).
#include "graph/ops/axes.h"

namespace gearbox {

TensorType inferGather(const InferContext& ctx) {
  ops::expectArity(ctx, 2);
  const TensorType& data = ctx.inputs[0];
  const TensorType& idx = ctx.inputs[1];
  if (idx.dtype != DType::kI32 && idx.dtype != DType::kI64)
    fail(ErrorKind::kShape, "{}: {} must be i32 or i64, got {}", ctx.where(),
         ops::inputLabel(ctx, 1), dtypeName(idx.dtype));
  const int r = data.shape.rank();
  const int axis =
      ops::wrapAxis(ctx, "axis", ctx.attrs.i(attr::Gather::axis), r, ops::inputLabel(ctx, 0));
  if (r - 1 + idx.shape.rank() > kMaxRank)
    fail(ErrorKind::kShape,
         "{}: {} of rank {} gathered by {} of rank {} would have rank {}, above the maximum {}",
         ctx.where(), ops::inputLabel(ctx, 0), r, ops::inputLabel(ctx, 1), idx.shape.rank(),
         r - 1 + idx.shape.rank(), kMaxRank);
  // Every index into an empty dim is out of range: say so before an output sized by the
  // indices is allocated (index_select's rule).
  if (data.shape[axis] == 0 && idx.shape.isStatic() && idx.shape.numel() > 0)
    fail(ErrorKind::kIndex,
         "{}: {} has {} entries but {} dim {} is 0, so every index is out of range", ctx.where(),
         ops::inputLabel(ctx, 1), idx.shape.numel(), ops::inputLabel(ctx, 0), axis);
  Shape out;
  for (int d = 0; d < axis; ++d) out.push(data.shape[d]);
  for (int64_t d : idx.shape) out.push(d);
  for (int d = axis + 1; d < r; ++d) out.push(data.shape[d]);
  return TensorType{data.dtype, out};
}

}  // namespace gearbox
