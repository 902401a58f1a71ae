// Pad(x, pads, value=0): ONNX Pad in constant mode. pads = [begin_0 .. begin_{r-1}, end_0 ..
// end_{r-1}]; dim d of the output is begin_d + d + end_d, the new positions hold `value` (cast to
// the dtype). A negative pad crops that many elements instead, as ONNX allows; a dim may not end
// up negative. On a symbolic dim any non-zero pad makes the size unknown (-1) until the graph is
// specialised.
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferPad(const InferContext& ctx) {
  ops::expectArity(ctx, 1);
  const TensorType& in = ctx.inputs[0];
  const int r = in.shape.rank();
  const auto pads = ctx.attrs.ints(attr::Pad::pads);
  if (pads.size() != static_cast<size_t>(2 * r))
    fail(ErrorKind::kShape,
         "{}: attribute pads has {} entries but {} has rank {} (expected {}: begins, then ends)",
         ctx.where(), pads.size(), ops::inputLabel(ctx, 0), r, 2 * r);
  Shape out;
  for (int d = 0; d < r; ++d) {
    const int64_t begin = pads[d], end = pads[r + d], size = in.shape[d];
    if (!isStaticDim(size)) {
      out.push(begin == 0 && end == 0 ? size : kAnyDim);
      continue;
    }
    int64_t o = 0;
    if (__builtin_add_overflow(size, begin, &o) || __builtin_add_overflow(o, end, &o) || o < 0)
      fail(ErrorKind::kShape,
           "{}: attribute pads: {} dim {} of size {} with pads {} (begin) and {} (end) would have "
           "size {}",
           ctx.where(), ops::inputLabel(ctx, 0), d, size, begin, end,
           o < 0 ? std::to_string(o) : std::string("beyond int64"));
    out.push(o);
  }
  return TensorType{in.dtype, out};
}

}  // namespace gearbox
