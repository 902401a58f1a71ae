// Div: elementwise a / b with NumPy broadcasting, f32 only (IEEE division: x / 0 is +-inf or
// NaN). Integer division (ONNX's truncating Div on ints) appears in exported models only as
// shape arithmetic, which the importer folds; an integer kernel would have to define division
// by zero, so gearbox has none.
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferDiv(const InferContext& ctx) {
  return ops::binaryType(ctx, "div", /*floatOnly=*/true);
}

}  // namespace gearbox
