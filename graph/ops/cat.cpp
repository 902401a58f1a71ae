// Cat(inputs..., dim): >= 1 input, same rank and dtype, sizes equal except along dim.
#include "graph/checked.h"
#include "graph/ops/common.h"

namespace gearbox::ops {

// Shared with CatGather, whose leading inputs are a Cat's inputs.
Shape inferCatShape(const InferContext& ctx, size_t count, int* wrapped) {
  if (count == 0) fail(ErrorKind::kShape, "{}: needs at least one input", ctx.where());
  if (!ctx.attrs.dim) fail(ErrorKind::kShape, "{}: missing attribute dim", ctx.where());
  const TensorType& first = ctx.inputs[0];
  const int d = wrapAttrDim(ctx, first.shape, /*ofInput0=*/false);
  Shape out = first.shape;
  for (size_t i = 1; i < count; ++i) {
    const TensorType& t = ctx.inputs[i];
    if (t.dtype != first.dtype)
      fail(ErrorKind::kShape, "{}: {} is {} but input 0 is {}", ctx.where(), inputLabel(ctx, i),
           dtypeName(t.dtype), dtypeName(first.dtype));
    if (t.shape.rank() != first.shape.rank())
      fail(ErrorKind::kShape, "{}: {} has rank {} but input 0 has rank {}", ctx.where(),
           inputLabel(ctx, i), t.shape.rank(), first.shape.rank());
    for (int k = 0; k < out.rank(); ++k) {
      if (k == d) {
        if (out[k] < 0 || t.shape[k] < 0) {
          out[k] = kAnyDim;
        } else if (!checkedAdd(out[k], t.shape[k], &out[k])) {
          fail(ErrorKind::kShape,
               "{}: {} dim {} = {}: the cat dim summed over inputs 0..{} overflows int64",
               ctx.where(), inputLabel(ctx, i), k, t.shape[k], i);
        }
      } else {
        out[k] = unifyEqual(ctx, 0, k, out[k], i, k, t.shape[k],
                            "cat inputs must match except along the cat dim");
      }
    }
  }
  if (wrapped) *wrapped = d;
  return out;
}

}  // namespace gearbox::ops

namespace gearbox {

TensorType inferCat(const InferContext& ctx) {
  return TensorType{ctx.inputs.empty() ? DType::kF32 : ctx.inputs[0].dtype,
                    ops::inferCatShape(ctx, ctx.inputs.size(), nullptr)};
}

}  // namespace gearbox
