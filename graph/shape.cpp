#include "graph/shape.h"

#include <fmt/format.h>

#include <mutex>
#include <unordered_map>
#include <vector>

#include "graph/error.h"

namespace gearbox {
namespace {

// Process-wide symbol table. Symbols are few (one per named dim in a model), so a mutex is
// fine; it is only touched when parsing or printing, never on a run path.
struct SymbolTable {
  std::mutex mu;
  std::unordered_map<std::string, int64_t> ids;
  std::vector<std::string> names;
  std::vector<DimExpr> exprs;  // per id; base == kAnyDim for a plain name
};

SymbolTable& symbols() {
  static SymbolTable table;
  return table;
}

}  // namespace

int64_t symbolDim(std::string_view name) {
  auto& t = symbols();
  std::lock_guard lock(t.mu);
  auto [it, inserted] = t.ids.emplace(std::string(name), static_cast<int64_t>(t.names.size()));
  if (inserted) {
    t.names.emplace_back(name);
    t.exprs.emplace_back();
  }
  return -2 - it->second;
}

namespace {

int64_t gcd(int64_t x, int64_t y) {
  x = x < 0 ? -x : x;
  y = y < 0 ? -y : y;
  while (y) {
    const int64_t r = x % y;
    x = y;
    y = r;
  }
  return x;
}

int64_t floorDiv(int64_t x, int64_t y) {
  const int64_t q = x / y;
  return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}

// The canonical text of an expression, which is also its interned name.
std::string exprText(const DimExpr& e, const std::string& base) {
  std::string s = e.a == 1 ? base : fmt::format("{}*{}", e.a, base);
  if (e.b > 0) s += fmt::format(" + {}", e.b);
  if (e.b < 0) s += fmt::format(" - {}", -e.b);
  if (e.c == 1) return s;
  return fmt::format("({}) / {}", s, e.c);
}

int64_t internExpr(DimExpr e) {
  const int64_t g = gcd(gcd(e.a, e.b), e.c);
  if (g > 1) {
    e.a /= g;
    e.b /= g;
    e.c /= g;
  }
  if (e.a == 1 && e.b == 0 && e.c == 1) return e.base;
  const std::string name = exprText(e, symbolName(e.base));
  auto& t = symbols();
  std::lock_guard lock(t.mu);
  auto [it, inserted] = t.ids.emplace(name, static_cast<int64_t>(t.names.size()));
  if (inserted) {
    t.names.push_back(name);
    t.exprs.push_back(e);
  }
  return -2 - it->second;
}

}  // namespace

std::optional<DimExpr> dimExpr(int64_t d) {
  if (!isSymbolDim(d)) return std::nullopt;
  auto& t = symbols();
  std::lock_guard lock(t.mu);
  const int64_t id = -2 - d;
  if (id >= static_cast<int64_t>(t.exprs.size())) return std::nullopt;
  const DimExpr& e = t.exprs[id];
  if (e.base == kAnyDim) return DimExpr{d, 1, 0, 1};
  return e;
}

int64_t dimAffine(int64_t d, int64_t mul, int64_t add) {
  if (d == kAnyDim || mul < 1) return kAnyDim;
  if (d >= 0) {
    int64_t r = 0;
    if (__builtin_mul_overflow(d, mul, &r) || __builtin_add_overflow(r, add, &r)) return kAnyDim;
    return r;
  }
  const auto e = dimExpr(d);
  if (!e) return kAnyDim;
  DimExpr r = *e;
  if (r.c != 1 && mul != 1) return kAnyDim;  // m * floor(y / c) is not of the form
  int64_t addScaled = 0;
  if (__builtin_mul_overflow(r.a, mul, &r.a) || __builtin_mul_overflow(r.b, mul, &r.b) ||
      __builtin_mul_overflow(add, r.c, &addScaled) || __builtin_add_overflow(r.b, addScaled, &r.b))
    return kAnyDim;
  return internExpr(r);
}

int64_t dimFloorDiv(int64_t d, int64_t div) {
  if (d == kAnyDim || div < 1) return kAnyDim;
  if (d >= 0) return floorDiv(d, div);
  const auto e = dimExpr(d);
  if (!e) return kAnyDim;
  DimExpr r = *e;
  if (__builtin_mul_overflow(r.c, div, &r.c)) return kAnyDim;
  return internExpr(r);
}

std::optional<int64_t> evalDimExact(int64_t d, int64_t baseValue) {
  if (d >= 0) return d;
  const auto e = dimExpr(d);
  if (!e || baseValue < 0) return kAnyDim;
  int64_t v = 0;
  if (__builtin_mul_overflow(e->a, baseValue, &v) || __builtin_add_overflow(v, e->b, &v))
    return std::nullopt;
  return floorDiv(v, e->c);
}

int64_t evalDim(int64_t d, int64_t baseValue) {
  return evalDimExact(d, baseValue).value_or(kAnyDim);
}

std::string symbolName(int64_t dim) {
  if (dim == kAnyDim) return "?";
  auto& t = symbols();
  std::lock_guard lock(t.mu);
  const int64_t id = -2 - dim;
  if (id < 0 || id >= static_cast<int64_t>(t.names.size())) return "?";
  return t.names[id];
}

std::string dimToString(int64_t d) {
  if (d >= 0 || d == kAnyDim) return std::to_string(d);
  return symbolName(d);
}

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) push(d);
}

void Shape::push(int64_t d) {
  if (rank_ >= kMaxRank) fail(ErrorKind::kShape, "rank exceeds the maximum of {}", kMaxRank);
  dims_[rank_++] = d;
}

bool Shape::isStatic() const {
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] < 0) return false;
  return true;
}

int64_t Shape::numel() const {
  // Shapes from outside are checked against kMaxTensorBytes (graph/checked.h) when first known;
  // this check is the backstop for any path that missed it, so a wrapped count can never size
  // a buffer.
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i)
    if (__builtin_mul_overflow(n, dims_[i], &n))
      fail(ErrorKind::kShape, "shape {}: the element count overflows int64", toString());
  return n;
}

int Shape::wrapDim(int64_t dim, std::string_view what) const {
  const int64_t r = rank_;
  if (dim < -r || dim >= r || r == 0)
    fail(ErrorKind::kShape, "{}: dim {} is out of range for rank {} (expected [{}, {}])", what, dim,
         r, -r, r - 1);
  return static_cast<int>(dim < 0 ? dim + r : dim);
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != o.dims_[i]) return false;
  return true;
}

size_t Shape::hash() const {
  // FNV-1a over the rank and dims: cheap, and good enough for cache keys.
  uint64_t h = 1469598103934665603ull ^ rank_;
  for (int i = 0; i < rank_; ++i) {
    h ^= static_cast<uint64_t>(dims_[i]);
    h *= 1099511628211ull;
  }
  return static_cast<size_t>(h);
}

std::string Shape::toString() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += dimToString(dims_[i]);
  }
  return s + "]";
}

std::string Shape::toKernelString() const {
  if (rank_ == 0) return "s";
  std::string s;
  for (int i = 0; i < rank_; ++i) {
    if (i) s += '_';
    // Dynamic dims appear in shape-generic kernel names as "-1" like GE's unknown dims.
    s += dims_[i] >= 0 ? std::to_string(dims_[i]) : std::string("-1");
  }
  return s;
}

std::array<int64_t, kMaxRank> contiguousStrides(const Shape& s) {
  std::array<int64_t, kMaxRank> st{};
  int64_t acc = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    st[i] = acc;
    // Wrapping here would only matter for a shape that numel() already refuses; saturate
    // rather than overflow so the arithmetic stays defined.
    if (__builtin_mul_overflow(acc, s[i], &acc)) acc = INT64_MAX;
  }
  return st;
}

}  // namespace gearbox
