// Attention(q, k, v[, mask], scale): fused scaled-dot-product attention,
//   out = softmax(q k^T * scale + mask, over the keys) v,
// in ONNX Attention's layout (opset 23) and torch's scaled_dot_product_attention's:
// q [..., S_q, D], k [..., S_k, D], v [..., S_k, D_v] with equal batch dims `...`, an optional
// additive f32 mask broadcastable to the scores [..., S_q, S_k] (a causal mask [S_q, S_k], a
// padding mask [B, 1, 1, S_k]), out [..., S_q, D_v]. f32 only, like softmax. The compiler's
// fuse-attention pass writes it (compiler/passes.h); it is accepted in text too.
#include <cmath>
#include <limits>

#include "graph/ops/common.h"

namespace gearbox {

TensorType inferAttention(const InferContext& ctx) {
  if (ctx.inputs.size() != 3 && ctx.inputs.size() != 4)
    fail(ErrorKind::kShape, "{}: expects 3 or 4 inputs (q, k, v[, mask]), got {}", ctx.where(),
         ctx.inputs.size());
  for (size_t i = 0; i < ctx.inputs.size(); ++i)
    if (ctx.inputs[i].dtype != DType::kF32)
      fail(ErrorKind::kShape, "{}: {} is {}; attention takes f32", ctx.where(),
           ops::inputLabel(ctx, i), dtypeName(ctx.inputs[i].dtype));
  // The kernels multiply by scale as an f32: a double that rounds to inf there (1e300) would
  // make every score inf. Magnitudes below FLT_MAX + half its ulp round to a finite f32.
  const double scale = ctx.attrs.f(attr::Attention::scale);
  if (!(std::fabs(scale) < std::ldexp(1.0, 128) - std::ldexp(1.0, 103)))
    fail(ErrorKind::kShape,
         "{}: attribute scale is {}; it must be finite as an f32 (magnitude at most {})",
         ctx.where(), formatAttrFloat(scale), std::numeric_limits<float>::max());
  const Shape& q = ctx.inputs[0].shape;
  const Shape& k = ctx.inputs[1].shape;
  const Shape& v = ctx.inputs[2].shape;
  const int r = q.rank();
  if (r < 2)
    fail(ErrorKind::kShape, "{}: {} has rank {}; attention needs [..., S_q, D] (rank >= 2)",
         ctx.where(), ops::inputLabel(ctx, 0), r);
  for (size_t i = 1; i < 3; ++i)
    if (ctx.inputs[i].shape.rank() != r)
      fail(ErrorKind::kShape, "{}: {} has rank {} but {} has rank {}; q, k and v need one rank",
           ctx.where(), ops::inputLabel(ctx, i), ctx.inputs[i].shape.rank(),
           ops::inputLabel(ctx, 0), r);
  // The batch dims are shared, not broadcast: the fusion pass only writes equal ones, and a
  // kernel that walks three operands in step needs no offset tables.
  Shape out;
  for (int d = 0; d < r - 2; ++d) {
    int64_t b = ops::unifyEqual(ctx, 0, d, q[d], 1, d, k[d], "batch dims must match");
    b = ops::unifyEqual(ctx, 0, d, b, 2, d, v[d], "batch dims must match");
    out.push(b);
  }
  ops::unifyEqual(ctx, 0, r - 1, q[r - 1], 1, r - 1, k[r - 1], "q and k need the same head size D");
  const int64_t keys =
      ops::unifyEqual(ctx, 1, r - 2, k[r - 2], 2, r - 2, v[r - 2], "k and v need one key count");
  if (ctx.inputs.size() == 4) {
    // The mask broadcasts to the scores [..., S_q, S_k]; it may not broadcast them up.
    Shape scores = out;
    scores.push(q[r - 2]);
    scores.push(keys);
    const Shape& m = ctx.inputs[3].shape;
    if (m.rank() > r)
      fail(ErrorKind::kShape, "{}: {} has rank {}; the scores [..., S_q, S_k] have rank {}",
           ctx.where(), ops::inputLabel(ctx, 3), m.rank(), r);
    for (int j = 0; j < m.rank(); ++j) {
      const int d = j + (r - m.rank());
      if (m[j] == 1 || m[j] == scores[d] || m[j] < 0 || scores[d] < 0) continue;
      fail(ErrorKind::kShape,
           "{}: {} dim {} is {} but the scores' dim {} is {}; the mask must broadcast to "
           "[..., S_q, S_k] = {}",
           ctx.where(), ops::inputLabel(ctx, 3), j, m[j], d, scores[d], scores.toString());
    }
  }
  out.push(q[r - 2]);
  out.push(v[r - 1]);
  return TensorType{DType::kF32, out};
}

}  // namespace gearbox
