// IndexSelect(input, index, dim, wrap=0): out = input with dim replaced by index.size(0); index
// is a 1-D i32/i64 tensor. Negative dims wrap. Index values are checked by the kernels: in
// [0, size) as PyTorch's index_select takes them, or with wrap=1 in [-size, size), a negative
// value counting from the end, as ONNX's Gather takes them.
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferIndexSelect(const InferContext& ctx) {
  ops::expectArity(ctx, 2);
  const TensorType& in = ctx.inputs[0];
  const TensorType& idx = ctx.inputs[1];
  if (!ctx.attrs.dim) fail(ErrorKind::kShape, "{}: missing attribute dim", ctx.where());
  if (idx.dtype != DType::kI32 && idx.dtype != DType::kI64)
    fail(ErrorKind::kShape, "{}: {} must be i32 or i64, got {}", ctx.where(),
         ops::inputLabel(ctx, 1), dtypeName(idx.dtype));
  if (idx.shape.rank() != 1)
    fail(ErrorKind::kShape, "{}: {} must be 1-D, got rank {}", ctx.where(), ops::inputLabel(ctx, 1),
         idx.shape.rank());
  if (const int64_t wrap = ctx.attrs.i(attr::IndexSelect::wrap); wrap != 0 && wrap != 1)
    fail(ErrorKind::kShape, "{}: attribute wrap must be 0 or 1, got {}", ctx.where(), wrap);
  const int d = ops::wrapAttrDim(ctx, in.shape, /*ofInput0=*/true);
  // Every index into an empty dim is out of range, so say so now, before an output sized by the
  // index count is allocated (a [0, 1e9] input with 3 indices would otherwise allocate 12 GB
  // only for the kernel's index check to fail).
  if (in.shape[d] == 0 && idx.shape[0] > 0)
    fail(ErrorKind::kIndex,
         "{}: {} has {} entries but {} dim {} is 0, so every index is out of range", ctx.where(),
         ops::inputLabel(ctx, 1), idx.shape[0], ops::inputLabel(ctx, 0), d);
  Shape out = in.shape;
  out[d] = idx.shape[0];
  return TensorType{in.dtype, out};
}

}  // namespace gearbox
