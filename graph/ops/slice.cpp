// Slice(x, starts, ends, axes, steps): ONNX Slice. For each listed axis (default: 0, 1, ...) the
// elements start, start + step, ... before end (step default 1). Negative starts and ends count
// from the end of the dim; both are then clamped to the dim (so INT64_MAX means "to the end"
// and INT64_MIN "to the front" for a negative step); a negative step walks backwards.
// On a symbolic dim the size is known only for the whole dim (start 0, end INT64_MAX, step 1,
// or the full reversal); otherwise it is unknown (-1) until the graph is specialised.
#include "graph/ops/slice.h"

#include <limits>

#include "graph/ops/axes.h"

namespace gearbox {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

SliceRange rangeOf(int64_t start, int64_t end, int64_t step, int64_t d) {
  if (start < 0) start += d;  // cannot overflow: d >= 0
  if (end < 0) end += d;
  SliceRange r{0, step, 0};
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, d);
    end = std::clamp<int64_t>(end, 0, d);
    // (end - start - 1) / step + 1 rounds up without overflowing for a huge step.
    r.size = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    if (d == 0) return r;
    start = std::clamp<int64_t>(start, 0, d - 1);
    end = std::clamp<int64_t>(end, -1, d - 1);
    r.size = start > end ? (start - end - 1) / -step + 1 : 0;  // step > kMin: inference checks
  }
  r.start = r.size > 0 ? start : 0;
  return r;
}

}  // namespace

std::array<SliceRange, kMaxRank> resolveSlice(const Attrs& attrs, const Shape& in) {
  std::array<SliceRange, kMaxRank> ranges{};
  const int r = in.rank();
  for (int d = 0; d < r; ++d) ranges[d] = SliceRange{0, 1, in[d]};
  const auto starts = attrs.ints(attr::Slice::starts);
  const auto ends = attrs.ints(attr::Slice::ends);
  const auto axes = attrs.ints(attr::Slice::axes);
  const auto steps = attrs.ints(attr::Slice::steps);
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t a = attrs.has(attr::Slice::axes) ? axes[i] : static_cast<int64_t>(i);
    const int d = static_cast<int>(a < 0 ? a + r : a);
    const int64_t step = attrs.has(attr::Slice::steps) ? steps[i] : 1;
    ranges[d] = rangeOf(starts[i], ends[i], step, in[d]);
  }
  return ranges;
}

TensorType inferSlice(const InferContext& ctx) {
  ops::expectArity(ctx, 1);
  const TensorType& in = ctx.inputs[0];
  const int r = in.shape.rank();
  const Attrs& a = ctx.attrs;
  const auto starts = a.ints(attr::Slice::starts);
  const size_t n = starts.size();
  auto sameLength = [&](int slot, std::string_view name) {
    if (a.has(slot) && a.ints(slot).size() != n)
      fail(ErrorKind::kShape, "{}: attribute {} has {} entries but starts has {}", ctx.where(),
           name, a.ints(slot).size(), n);
  };
  sameLength(attr::Slice::ends, "ends");
  sameLength(attr::Slice::axes, "axes");
  sameLength(attr::Slice::steps, "steps");
  if (!a.has(attr::Slice::axes) && n > static_cast<size_t>(r))
    fail(ErrorKind::kShape, "{}: attribute starts has {} entries but {} has rank {} (and no axes)",
         ctx.where(), n, ops::inputLabel(ctx, 0), r);
  const std::string of = ops::inputLabel(ctx, 0);
  if (a.has(attr::Slice::axes)) ops::axesMask(ctx, "axes", a.ints(attr::Slice::axes), r, of);
  for (int64_t s : a.ints(attr::Slice::steps))
    if (s == 0 || s == kMin)
      fail(ErrorKind::kShape, "{}: attribute steps: step {} is not allowed (non-zero, > INT64_MIN)",
           ctx.where(), s);
  // Static dims through the one resolver; symbolic ones only when the whole dim is taken.
  Shape staticIn;
  for (int d = 0; d < r; ++d) staticIn.push(isStaticDim(in.shape[d]) ? in.shape[d] : 0);
  const auto ranges = resolveSlice(a, staticIn);
  Shape out = in.shape;
  for (size_t i = 0; i < n; ++i) {
    const int64_t ax =
        a.has(attr::Slice::axes) ? a.ints(attr::Slice::axes)[i] : static_cast<int64_t>(i);
    const int d = static_cast<int>(ax < 0 ? ax + r : ax);
    if (isStaticDim(in.shape[d])) {
      out[d] = ranges[d].size;
      continue;
    }
    const int64_t start = starts[i], end = a.ints(attr::Slice::ends)[i];
    const int64_t step = a.has(attr::Slice::steps) ? a.ints(attr::Slice::steps)[i] : 1;
    const bool whole =
        (step == 1 && start == 0 && end == kMax) || (step == -1 && start == -1 && end == kMin);
    if (!whole) out[d] = kAnyDim;
  }
  return TensorType{in.dtype, out};
}

}  // namespace gearbox
