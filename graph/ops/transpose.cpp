// Transpose(x, perm): output dim i is input dim perm[i] (torch.permute, numpy.transpose). perm
// must hold each of 0 .. rank-1 exactly once.
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferTranspose(const InferContext& ctx) {
  ops::expectArity(ctx, 1);
  const TensorType& in = ctx.inputs[0];
  if (!ctx.attrs.perm) fail(ErrorKind::kShape, "{}: missing attribute perm", ctx.where());
  const Shape& perm = *ctx.attrs.perm;
  if (perm.rank() != in.shape.rank())
    fail(ErrorKind::kShape, "{}: attribute perm {} has {} entries but {} has rank {}", ctx.where(),
         perm.toString(), perm.rank(), ops::inputLabel(ctx, 0), in.shape.rank());
  bool seen[kMaxRank] = {};
  Shape out;
  for (int i = 0; i < perm.rank(); ++i) {
    const int64_t p = perm[i];
    if (p < 0 || p >= in.shape.rank())
      fail(ErrorKind::kShape,
           "{}: attribute perm {}: entry {} is {}, out of range for {} of rank {} (expected "
           "[0, {}])",
           ctx.where(), perm.toString(), i, dimToString(p), ops::inputLabel(ctx, 0),
           in.shape.rank(), in.shape.rank() - 1);
    if (seen[p])
      fail(ErrorKind::kShape, "{}: attribute perm {} is not a permutation: {} appears twice",
           ctx.where(), perm.toString(), p);
    seen[p] = true;
    out.push(in.shape[static_cast<int>(p)]);
  }
  return TensorType{in.dtype, out};
}

}  // namespace gearbox
