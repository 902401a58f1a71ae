// Cast(x, to): x converted elementwise to the element type `to`, spelled as ONNX's
// TensorProto codes (1 = f32, 6 = i32, 7 = i64; the dtypes gearbox has). Float to integer
// truncates toward zero like C++ and ONNX Runtime; NaN, infinities and values outside the
// integer's range give that integer's minimum (x86's "integer indefinite" value, what ONNX
// Runtime returns on x86 too), so the result never depends on undefined behaviour. Integer to
// integer wraps (two's complement); integer to f32 rounds to nearest.
#include "graph/ops/common.h"

namespace gearbox {

namespace {

std::optional<DType> castTarget(int64_t to) {
  switch (to) {
    case 1: return DType::kF32;
    case 6: return DType::kI32;
    case 7: return DType::kI64;
    default: return std::nullopt;
  }
}

}  // namespace

TensorType inferCast(const InferContext& ctx) {
  ops::expectArity(ctx, 1);
  const int64_t to = ctx.attrs.i(attr::Cast::to);
  const std::optional<DType> t = castTarget(to);
  if (!t)
    fail(ErrorKind::kShape,
         "{}: attribute to is {}; expected an ONNX element type gearbox has: 1 (f32), 6 (i32) or "
         "7 (i64)",
         ctx.where(), to);
  return TensorType{*t, ctx.inputs[0].shape};
}

}  // namespace gearbox
