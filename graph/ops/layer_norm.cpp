// LayerNorm(x[, scale[, bias]], axis=-1, epsilon=1e-5): ONNX LayerNormalization (opset 17),
// torch.nn.functional.layer_norm. Each group of the dims [axis, rank) of x is normalised to
// mean 0 and variance 1 (the biased variance, over the group), then multiplied by scale and
// shifted by bias, both of the group's shape (x.shape[axis:]). f32. The optional Mean and
// InvStdDev outputs of ONNX are not produced (training only).
#include <cmath>
#include <limits>

#include "graph/ops/axes.h"

namespace gearbox {

TensorType inferLayerNorm(const InferContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  for (size_t i = 0; i < ctx.inputs.size(); ++i)
    if (ctx.inputs[i].dtype != DType::kF32)
      fail(ErrorKind::kShape, "{}: {} is {}; layer_norm takes f32", ctx.where(),
           ops::inputLabel(ctx, i), dtypeName(ctx.inputs[i].dtype));
  const int r = x.shape.rank();
  const int axis =
      ops::wrapAxis(ctx, "axis", ctx.attrs.i(attr::LayerNorm::axis), r, ops::inputLabel(ctx, 0));
  // The kernels add epsilon as an f32 (as every framework does): a double that rounds to inf
  // there (1e300) would make every output 0. Doubles below FLT_MAX + half its ulp round to a
  // finite f32 (FLT_MAX's shortest spelling, 3.4028235e38, is above FLT_MAX as a double).
  const double eps = ctx.attrs.f(attr::LayerNorm::epsilon);
  const double f32Overflow = std::ldexp(1.0, 128) - std::ldexp(1.0, 103);
  if (!(eps >= 0) || !(eps < f32Overflow))
    fail(ErrorKind::kShape,
         "{}: attribute epsilon is {}, expected a number >= 0 that is finite as an f32 (at most "
         "{}; the kernels add it as one)",
         ctx.where(), formatAttrFloat(eps), std::numeric_limits<float>::max());
  // scale and bias: exactly the normalised group's shape.
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    const Shape& s = ctx.inputs[i].shape;
    if (s.rank() != r - axis)
      fail(ErrorKind::kShape,
           "{}: {} has rank {} but the normalised dims [{}, {}) of {} are {}; {} must have their "
           "shape",
           ctx.where(), ops::inputLabel(ctx, i), s.rank(), axis, r, ops::inputLabel(ctx, 0),
           Shape(x.shape.begin() + axis, x.shape.end()).toString(), i == 1 ? "scale" : "bias");
    for (int d = 0; d < s.rank(); ++d)
      ops::unifyEqual(
          ctx, 0, axis + d, x.shape[axis + d], i, d, s[d],
          i == 1 ? "scale has the normalised dims' shape" : "bias has the normalised dims' shape");
  }
  return x;
}

}  // namespace gearbox
