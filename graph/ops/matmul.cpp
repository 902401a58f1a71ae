// MatMul: [..., M, K] x [..., K, N] -> [..., M, N]; batch dims broadcast (NumPy matmul rules
// for rank >= 2 operands).
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
    if (ctx.inputs[i].shape.rank() < 2)
      fail(ErrorKind::kShape, "{}: {} has rank {}; matmul needs rank >= 2", ctx.where(),
           ops::inputLabel(ctx, i), ctx.inputs[i].shape.rank());
  const int ra = a.shape.rank(), rb = b.shape.rank();
  ops::unifyEqual(ctx, 0, ra - 1, a.shape[ra - 1], 1, rb - 2, b.shape[rb - 2],
                  "the contraction dim K must match");
  Shape batchA(a.shape.begin(), a.shape.end() - 2);
  Shape batchB(b.shape.begin(), b.shape.end() - 2);
  Shape out = ops::broadcastShapes(ctx, 0, batchA, 1, batchB);
  out.push(a.shape[ra - 2]);
  out.push(b.shape[rb - 1]);
  return TensorType{a.dtype, out};
}

}  // namespace gearbox
