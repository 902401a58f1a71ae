#include "graph/checked.h"

namespace gearbox {

int64_t addOrFail(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  if (!checkedAdd(a, b, &r)) fail(ErrorKind::kShape, "{}: {} + {} overflows int64", what, a, b);
  return r;
}

int64_t mulOrFail(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  if (!checkedMul(a, b, &r)) fail(ErrorKind::kShape, "{}: {} * {} overflows int64", what, a, b);
  return r;
}

bool checkedNumel(const Shape& s, int64_t* out) {
  int64_t n = 1;
  for (int i = 0; i < s.rank(); ++i)
    if (!checkedMul(n, s[i], &n)) return false;
  *out = n;
  return true;
}

void checkTensorSize(const Shape& s, DType dtype, std::string_view where, std::string_view what) {
  // Zero dims count as 1: an empty tensor holds no bytes, but its strides are still products of
  // the other dims, and those must not wrap either.
  int64_t bytes = static_cast<int64_t>(dtypeSize(dtype));
  for (int i = 0; i < s.rank(); ++i) {
    const int64_t d = s[i];
    if (d < 0) continue;
    int64_t next;
    if (!checkedMul(bytes, d == 0 ? 1 : d, &next) || next > kMaxTensorBytes)
      fail(ErrorKind::kShape,
           "{}{}{} dim {} = {}: shape {} of {} would be more than 2^40 bytes (the limit on one "
           "tensor)",
           where, where.empty() ? "" : ": ", what, i, d, s.toString(), dtypeName(dtype));
    bytes = next;
  }
}

int64_t checkedBytes(const Shape& s, DType dtype, std::string_view what) {
  checkTensorSize(s, dtype, {}, what);
  int64_t n;
  if (!checkedNumel(s, &n)) fail(ErrorKind::kShape, "{}: shape {} overflows", what, s.toString());
  return n * static_cast<int64_t>(dtypeSize(dtype));
}

}  // namespace gearbox
