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
  if (inserted) t.names.emplace_back(name);
  return -2 - it->second;
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
