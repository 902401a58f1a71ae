// Flatten(x, axis=1): ONNX Flatten, the same elements as the 2-D [prod(d[:axis]),
// prod(d[axis:])]; axis in [-rank, rank] (axis = rank gives [numel, 1], axis = 0 gives
// [1, numel]). Like reshape it moves no element.
#include "graph/ops/common.h"

namespace gearbox {
namespace {

// The product of dims [begin, end): static when every dim is; a lone symbol times static 1s
// stays that symbol (a [B, 1] prefix is still B rows); a static 0 makes it 0 whatever the
// symbols are; anything else is unknown (-1) until the graph is specialised.
int64_t groupDim(const Shape& s, int begin, int end) {
  int64_t product = 1, symbol = 0;
  int unknown = 0;
  for (int i = begin; i < end; ++i) {
    if (s[i] == 0) return 0;
    if (isStaticDim(s[i])) {
      product *= s[i];  // no overflow: checkTensorSize bounds every static input's numel
    } else {
      ++unknown;
      symbol = s[i];
    }
  }
  if (unknown == 0) return product;
  if (unknown == 1 && product == 1 && isSymbolDim(symbol)) return symbol;
  return kAnyDim;
}

}  // namespace

TensorType inferFlatten(const InferContext& ctx) {
  ops::expectArity(ctx, 1);
  const TensorType& in = ctx.inputs[0];
  const int r = in.shape.rank();
  const int64_t axis = ctx.attrs.i(attr::Flatten::axis);
  if (axis < -r || axis > r)
    fail(ErrorKind::kShape,
         "{}: attribute axis: axis {} is out of range for {} of rank {} (expected [{}, {}])",
         ctx.where(), axis, ops::inputLabel(ctx, 0), r, -r, r);
  const int a = static_cast<int>(axis < 0 ? axis + r : axis);
  return TensorType{in.dtype, Shape{groupDim(in.shape, 0, a), groupDim(in.shape, a, r)}};
}

}  // namespace gearbox
