// MatMul, following torch.matmul: [..., M, K] x [..., K, N] -> [..., M, N] with broadcast batch
// dims, and 1-D operands: [K] x [..., K, N] -> [..., N] (a [K] left operand is a [1, K] row whose
// added dim is dropped), [..., M, K] x [K] -> [..., M] (a [K, 1] column, likewise), and
// [K] x [K] -> [] (a dot product).
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferMatMul(const InferContext& ctx) {
  ops::expectArity(ctx, 2);
  const TensorType& a = ctx.inputs[0];
  const TensorType& b = ctx.inputs[1];
  if (a.dtype != b.dtype)
    fail(ErrorKind::kShape, "{}: {} is {} but {} is {}; matmul needs one dtype", ctx.where(),
         ops::inputLabel(ctx, 0), dtypeName(a.dtype), ops::inputLabel(ctx, 1), dtypeName(b.dtype));
  for (size_t i = 0; i < 2; ++i)
    if (ctx.inputs[i].shape.rank() < 1)
      fail(ErrorKind::kShape, "{}: {} has rank 0; matmul needs rank >= 1", ctx.where(),
           ops::inputLabel(ctx, i));
  const bool aVec = a.shape.rank() == 1, bVec = b.shape.rank() == 1;
  const Shape am = aVec ? Shape{1, a.shape[0]} : a.shape;
  const Shape bm = bVec ? Shape{b.shape[0], 1} : b.shape;
  const int ra = am.rank(), rb = bm.rank();
  // Error messages name the operands' own dims, not the promoted ones.
  ops::unifyEqual(ctx, 0, a.shape.rank() - 1, am[ra - 1], 1, bVec ? 0 : rb - 2, bm[rb - 2],
                  "the contraction dim K must match");
  Shape batchA(am.begin(), am.end() - 2);
  Shape batchB(bm.begin(), bm.end() - 2);
  Shape out = ops::broadcastShapes(ctx, 0, batchA, 1, batchB);
  if (!aVec) out.push(am[ra - 2]);
  if (!bVec) out.push(bm[rb - 1]);
  return TensorType{a.dtype, out};
}

}  // namespace gearbox
