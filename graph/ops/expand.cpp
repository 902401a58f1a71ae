// Expand(x, shape): x broadcast to `shape` (ONNX Expand, torch.Tensor.expand): NumPy's
// broadcasting of x's shape and the target, right-aligned, so a target dim of 1 keeps x's dim
// and a dim of x of size 1 takes the target's. The target's dims are sizes or named dims; a
// name is resolved as reshape resolves it (graph/ops/reshape.h) but never positionally: it
// must be a symbol or dim expression x or a graph input declares (`expand(%c, shape=[S, S])`
// makes an [S, S] tensor whose S is the graph input's sequence length). The result is a new
// tensor (a copy), as ONNX defines it.
#include "graph/ops/reshape.h"

namespace gearbox {

TensorType inferExpand(const InferContext& ctx) {
  ops::expectArity(ctx, 1);
  const TensorType& in = ctx.inputs[0];
  if (!ctx.attrs.shape) fail(ErrorKind::kShape, "{}: missing attribute shape", ctx.where());
  const Shape& target = *ctx.attrs.shape;
  const int r = std::max(in.shape.rank(), target.rank());
  Shape out;
  for (int i = 0; i < r; ++i) {
    const int ki = i - (r - in.shape.rank()), kt = i - (r - target.rank());
    const int64_t x = ki >= 0 ? in.shape[ki] : 1;
    int64_t t = kt >= 0 ? target[kt] : 1;
    if (isSymbolDim(t)) {
      t = ops::resolveNamedDim(ctx, in.shape, kt, t, /*positional=*/false);
      if (t == ops::kNamedDimMissing)
        fail(ErrorKind::kShape,
             "{}: attribute shape {}: dim {} is named ({}), but neither {} nor a graph input "
             "declares that name",
             ctx.where(), target.toString(), kt, dimToString(target[kt]), ops::inputLabel(ctx, 0));
    } else if (t < 0 && ctx.graph) {
      // A key of a shape-generic kernel (no graph) may hold unknown entries; a graph may not.
      fail(ErrorKind::kShape,
           "{}: attribute shape {}: dim {} is {}; a target dim is a size or a "
           "name",
           ctx.where(), target.toString(), kt, t);
    }
    int64_t d;
    if (x == t || t == 1) {
      d = x;
    } else if (x == 1) {
      d = t;
    } else if (x >= 0 && t >= 0) {
      fail(ErrorKind::kShape,
           "{}: {} dim {} (size {}) cannot be broadcast to attribute shape {} dim {} (size {})",
           ctx.where(), ops::inputLabel(ctx, 0), ki, x, target.toString(), kt, t);
    } else {
      d = t >= 0 ? t : x >= 0 ? x : t;  // an unknown is 1 or equal; checked again once concrete
    }
    out.push(d);
  }
  return TensorType{in.dtype, out};
}

}  // namespace gearbox
