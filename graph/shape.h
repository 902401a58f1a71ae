#pragma once
// Shape: the one place that says what a dimension is.
//
// A dim is an int64:
//   >= 0      a static size;
//   == -1     an independent unknown (every -1 is its own symbol);
//   <= -2     a named symbol (e.g. "B"): every dim with the same name is the same unknown.
//             The name is interned process-wide; the dim stores -2 - symbolId.
// Rank is at most 6 and dims are stored inline, so a Shape is a small hashable value type.

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace gearbox {

constexpr int kMaxRank = 6;
constexpr int64_t kAnyDim = -1;

// Interns a symbol name and returns its dim encoding (<= -2). Thread-safe.
int64_t symbolDim(std::string_view name);
// The name of a symbolic dim; "?" for -1.
std::string symbolName(int64_t dim);
inline bool isStaticDim(int64_t d) {
  return d >= 0;
}
inline bool isSymbolDim(int64_t d) {
  return d <= -2;
}
// Prints one dim as it appears in the IR: "4", "-1", "B" or "(H + 1) / 2".
std::string dimToString(int64_t d);

// A dim expression over one named symbol: floor((a * base + b) / c) with a, c >= 1. Conv and
// pool output sizes over a symbolic H are such expressions, and so is any chain of them
// (floor((floor(y / c1) + b) / c2) = floor((y + b * c1) / (c1 * c2))), so a model's symbolic
// spatial dims stay exact through every layer. Expressions are interned like names (the
// canonical text is the name), so equal expressions are equal dims.
struct DimExpr {
  int64_t base = kAnyDim;  // a named symbol
  int64_t a = 1, b = 0, c = 1;
};
// The expression of a symbolic dim: a named symbol is {d, 1, 0, 1}; nullopt for -1 and sizes.
std::optional<DimExpr> dimExpr(int64_t d);
// mul * d + add, for a size or a symbolic d; kAnyDim when the result is not expressible (a
// multiple of a floor division, an overflow) or d is -1.
int64_t dimAffine(int64_t d, int64_t mul, int64_t add);
// floor(d / div), div >= 1.
int64_t dimFloorDiv(int64_t d, int64_t div);
// The value of expression dim `d` once its base symbol is `baseValue`; a size for a size.
// kAnyDim when it is not known (-1, a negative base) or overflows int64.
int64_t evalDim(int64_t d, int64_t baseValue);
// evalDim for a caller that must tell why there is no value: floor((a * baseValue + b) / c)
// exactly, which may be negative ((H - 1) / 2 at H = 0); nullopt when a * baseValue + b
// overflows int64; kAnyDim, as evalDim, for -1 or a negative base.
std::optional<int64_t> evalDimExact(int64_t d, int64_t baseValue);

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  template <typename It>
  Shape(It begin, It end) {
    for (; begin != end; ++begin) push(*begin);
  }
  static Shape scalar() { return Shape(); }

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }
  // Appends a dim; throws Error(kShape) past kMaxRank.
  void push(int64_t d);

  bool isStatic() const;
  // Product of the dims; requires isStatic(). A rank-0 shape has 1 element. Throws Error(kShape)
  // when the product overflows int64.
  int64_t numel() const;
  // Wraps a possibly negative dim index into [0, rank); throws Error(kShape) naming `what`
  // when out of range.
  int wrapDim(int64_t dim, std::string_view what) const;

  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  size_t hash() const;
  // "[2, 4]" with symbols by name; used by the IR printer and error messages.
  std::string toString() const;
  // "2_4" (kernel names); "s" for rank 0.
  std::string toKernelString() const;

 private:
  std::array<int64_t, kMaxRank> dims_{};
  uint8_t rank_ = 0;
};

// Row-major strides (in elements) of a static shape.
std::array<int64_t, kMaxRank> contiguousStrides(const Shape& s);

}  // namespace gearbox

template <>
struct std::hash<gearbox::Shape> {
  size_t operator()(const gearbox::Shape& s) const { return s.hash(); }
};
