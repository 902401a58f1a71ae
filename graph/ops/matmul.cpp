// MatMul, following torch.matmul: [..., M, K] x [..., K, N] -> [..., M, N] with broadcast batch
// dims, and 1-D operands: [K] x [..., K, N] -> [..., N] (a [K] left operand is a [1, K] row whose
// added dim is dropped), [..., M, K] x [K] -> [..., M] (a [K, 1] column, likewise), and
// [K] x [K] -> [] (a dot product). The epilogue the fuse-matmul-epilogue pass folds in: a third
// input is a bias [N] added to every row, a fourth a residual of the output's shape added after
// it, and act_min / act_max clamp the result as Clip does; f32 only, and N must exist (b not
// 1-D).
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferMatMul(const InferContext& ctx) {
  if (ctx.inputs.size() < 2 || ctx.inputs.size() > 4)
    fail(ErrorKind::kShape, "{}: expects 2 to 4 inputs, got {}", ctx.where(), ctx.inputs.size());
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
  namespace at = attr::MatMul;
  // The bounds have no default: set means clamped.
  const bool clamp = ctx.attrs.has(at::act_min) || ctx.attrs.has(at::act_max);
  if (ctx.inputs.size() == 2 && !clamp) return TensorType{a.dtype, out};
  for (size_t i = 0; i < ctx.inputs.size(); ++i) ops::expectF32(ctx, i);
  if (bVec)
    fail(ErrorKind::kShape, "{}: {} is 1-D, so the product has no dim N for an epilogue",
         ctx.where(), ops::inputLabel(ctx, 1));
  if (ctx.inputs.size() >= 3) {
    const Shape& bias = ctx.inputs[2].shape;
    if (bias.rank() != 1)
      fail(ErrorKind::kShape, "{}: {} (bias) must be 1-D [{}], got {}", ctx.where(),
           ops::inputLabel(ctx, 2), bm[rb - 1], bias.toString());
    out[out.rank() - 1] =
        ops::unifyEqual(ctx, 2, 0, bias[0], 1, rb - 1, bm[rb - 1], "one bias per column N");
  }
  if (ctx.inputs.size() == 4) {
    const Shape& r = ctx.inputs[3].shape;
    if (r.rank() != out.rank())
      fail(ErrorKind::kShape, "{}: {} (residual) must have the output's shape {}, got {}",
           ctx.where(), ops::inputLabel(ctx, 3), out.toString(), r.toString());
    for (int d = 0; d < out.rank(); ++d) {
      if (r[d] == out[d]) continue;
      if (isStaticDim(r[d]) && isStaticDim(out[d]))
        fail(ErrorKind::kShape, "{}: {} (residual) dim {} is {} but the output's is {}",
             ctx.where(), ops::inputLabel(ctx, 3), d, r[d], out[d]);
      if (isStaticDim(r[d])) out[d] = r[d];
    }
  }
  return TensorType{a.dtype, out};
}

}  // namespace gearbox
