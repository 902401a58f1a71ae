#pragma once
// Checked size arithmetic: the one place where sizes that come from outside (trace lines, .npy
// headers, gears, op-info records, kernel descriptors, IR text) are combined.
//
// Every size a user can name is bounded by kMaxTensorBytes: a tensor of more than 2^40 bytes
// (1 TiB) is refused when its shape is first known, with an Error naming the input, dim and
// value. Below that bound every product of a shape's dims, times an element size of at most 8
// bytes, fits an int64 with room to spare, so code downstream of the check may use plain
// arithmetic. The helpers below are for the places where unchecked values still meet (numel
// of a not-yet-checked shape, cat sums, gear totals, padding, plan offsets): each returns false
// or throws instead of wrapping.

#include <cstdint>
#include <string_view>

#include "graph/dtype.h"
#include "graph/error.h"
#include "graph/shape.h"

namespace gearbox {

// No tensor may hold more than this many bytes (2^40). It is far above what this project's
// models need and far below where int64 byte counts of a rank-6 shape can wrap.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 40;

// a * b / a + b without wrapping; false on overflow (the out value is then unspecified).
inline bool checkedMul(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}
inline bool checkedAdd(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

// a + b or a * b, throwing Error(kShape) "<what>: <a> <op> <b> overflows int64" on overflow.
int64_t addOrFail(int64_t a, int64_t b, std::string_view what);
int64_t mulOrFail(int64_t a, int64_t b, std::string_view what);

// Product of the dims of a static shape; false when it does not fit an int64.
bool checkedNumel(const Shape& s, int64_t* out);

// Checks that a static shape of `dtype` stays within kMaxTensorBytes. On failure throws
// Error(kShape) "<where>: <what> dim <d> = <value>: shape [..] of <dtype> would be more than
// 2^40 bytes (limit kMaxTensorBytes)", naming the first dim at which the running byte count
// passes the limit. Non-static dims are skipped (they are checked once concrete).
void checkTensorSize(const Shape& s, DType dtype, std::string_view where, std::string_view what);

// Bytes of a static shape of `dtype`, checked against kMaxTensorBytes (throws like
// checkTensorSize with `what` naming the tensor).
int64_t checkedBytes(const Shape& s, DType dtype, std::string_view what);

}  // namespace gearbox
