// The op table: names, input counts and declared attributes of every op in graph/ops.def, and
// the code that reads, checks and prints attributes from those declarations.
#include "graph/op.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "graph/error.h"

namespace gearbox {
namespace {

constexpr AttrDecl makeDecl(std::string_view name, AttrType type, AttrPresence presence,
                            std::initializer_list<double> defaults = {}) {
  AttrDecl d{name, type, presence, {}, 0};
  for (double v : defaults) d.defaults[d.defaultCount++] = v;
  return d;
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// One array of declarations per op; a trailing sentinel keeps ops without attributes legal C++.
#define GEARBOX_REQ(name, type) makeDecl(#name, AttrType::k##type, AttrPresence::kRequired)
#define GEARBOX_DEF(name, type, ...) \
  makeDecl(#name, AttrType::k##type, AttrPresence::kDefault, {__VA_ARGS__})
#define GEARBOX_OPT(name, type) makeDecl(#name, AttrType::k##type, AttrPresence::kOptional)
#define GEARBOX_DECLS(...) \
  { __VA_ARGS__ __VA_OPT__(, ) makeDecl("", AttrType::kInt, AttrPresence::kOptional) }
#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index) \
  constexpr AttrDecl kDecls##e[] = GEARBOX_DECLS attrList;
#include "graph/ops.def"
#undef GEARBOX_OP
#undef GEARBOX_DECLS
#undef GEARBOX_REQ
#undef GEARBOX_DEF
#undef GEARBOX_OPT

struct OpInfo {
  std::string_view text, kernel;
  int minInputs, maxInputs;
  std::span<const AttrDecl> attrs;
  IndexInput index;
};
constexpr OpInfo kOps[] = {
#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index) \
  {text,                                                           \
   kernel,                                                         \
   minIn,                                                          \
   maxIn,                                                          \
   std::span(kDecls##e, std::size(kDecls##e) - 1),                 \
   IndexInput::k##index},
#include "graph/ops.def"
#undef GEARBOX_OP
};
static_assert(std::size(kOps) == kOpCount);

// Every declaration fits Attrs, and names are unique per op.
constexpr bool declsFit() {
  for (const OpInfo& op : kOps) {
    if (op.attrs.size() > static_cast<size_t>(kMaxAttrs)) return false;
    for (size_t i = 0; i < op.attrs.size(); ++i)
      for (size_t j = i + 1; j < op.attrs.size(); ++j)
        if (op.attrs[i].name == op.attrs[j].name) return false;
  }
  return true;
}
static_assert(declsFit(), "an op declares more than kMaxAttrs attributes or one name twice");

bool isSlotType(AttrType t) {
  return t == AttrType::kInt || t == AttrType::kInts || t == AttrType::kFloat;
}

}  // namespace

std::string_view opTextName(OpKind k) {
  return kOps[static_cast<int>(k)].text;
}
std::string_view opKernelName(OpKind k) {
  return kOps[static_cast<int>(k)].kernel;
}
std::optional<OpKind> parseOpKind(std::string_view text) {
  for (int i = 0; i < kOpCount; ++i)
    if (kOps[i].text == text) return static_cast<OpKind>(i);
  return std::nullopt;
}
std::optional<OpKind> parseOpKernelName(std::string_view kernelName) {
  for (int i = 0; i < kOpCount; ++i)
    if (kOps[i].kernel == kernelName) return static_cast<OpKind>(i);
  return std::nullopt;
}
int opMinInputs(OpKind k) {
  return kOps[static_cast<int>(k)].minInputs;
}
int opMaxInputs(OpKind k) {
  return kOps[static_cast<int>(k)].maxInputs;
}
IndexInput opIndexInput(OpKind k) {
  return kOps[static_cast<int>(k)].index;
}
std::span<const AttrDecl> opAttrDecls(OpKind k) {
  return kOps[static_cast<int>(k)].attrs;
}
int findAttr(OpKind k, std::string_view name) {
  const auto decls = opAttrDecls(k);
  for (size_t i = 0; i < decls.size(); ++i)
    if (decls[i].name == name) return static_cast<int>(i);
  return -1;
}

std::string_view attrTypeName(AttrType t) {
  switch (t) {
    case AttrType::kInt: return "int";
    case AttrType::kInts: return "ints";
    case AttrType::kFloat: return "float";
    case AttrType::kDim: return "dim";
    case AttrType::kShape: return "dims";
    case AttrType::kPerm: return "perm";
  }
  return "?";
}

void Attrs::setInts(int slot, std::span<const int64_t> v) {
  if (v.size() > static_cast<size_t>(kMaxAttrInts))
    fail(ErrorKind::kParse, "an int-list attribute holds at most {} entries, got {}", kMaxAttrInts,
         v.size());
  slots[slot] = AttrValue{};
  slots[slot].count = static_cast<int8_t>(v.size());
  std::copy(v.begin(), v.end(), slots[slot].ints.begin());
}

size_t Attrs::hash() const {
  uint64_t h = 0x452821E638D01377ull;
  auto mix = [&h](uint64_t v) { h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2); };
  mix(dim.has_value());
  mix(static_cast<uint64_t>(dim.value_or(0)));
  mix(shape ? shape->hash() : 0);
  mix(perm ? perm->hash() : 0);
  for (const AttrValue& v : slots) {
    if (v.count < 0) continue;
    mix(static_cast<uint64_t>(v.count));
    for (int i = 0; i < v.count; ++i) mix(static_cast<uint64_t>(v.ints[i]));
    mix(std::hash<double>{}(v.f));
  }
  return static_cast<size_t>(h);
}

namespace {

bool given(const AttrDecl& d, const Attrs& a, int slot) {
  switch (d.type) {
    case AttrType::kDim: return a.dim.has_value();
    case AttrType::kShape: return a.shape.has_value();
    case AttrType::kPerm: return a.perm.has_value();
    default: return a.has(slot);
  }
}

void setDefault(const AttrDecl& d, Attrs& a, int slot) {
  switch (d.type) {
    case AttrType::kInt: a.setInt(slot, static_cast<int64_t>(d.defaults[0])); break;
    case AttrType::kFloat: a.setFloat(slot, d.defaults[0]); break;
    case AttrType::kInts: {
      int64_t v[kMaxAttrInts];
      for (int i = 0; i < d.defaultCount; ++i) v[i] = static_cast<int64_t>(d.defaults[i]);
      a.setInts(slot, std::span<const int64_t>(v, static_cast<size_t>(d.defaultCount)));
      break;
    }
    default: break;  // Dim/Shape/Perm are declared required
  }
}

}  // namespace

void normalizeAttrs(OpKind k, Attrs& a, std::string_view where) {
  const auto decls = opAttrDecls(k);
  auto undeclared = [&](std::string_view what) {
    fail(ErrorKind::kShape, "{}: {} takes no attribute {}", where, opTextName(k), what);
  };
  if (a.dim && findAttr(k, "dim") < 0) undeclared("dim");
  if (a.shape && findAttr(k, "shape") < 0) undeclared("shape");
  if (a.perm && findAttr(k, "perm") < 0) undeclared("perm");
  for (int s = 0; s < kMaxAttrs; ++s) {
    if (!a.has(s)) continue;
    if (s >= static_cast<int>(decls.size()) || !isSlotType(decls[s].type))
      undeclared(fmt::format("in slot {}", s));
  }
  for (size_t s = 0; s < decls.size(); ++s) {
    const AttrDecl& d = decls[s];
    const int slot = static_cast<int>(s);
    if (given(d, a, slot)) {
      if (d.type == AttrType::kInt && a.slots[slot].count != 1)
        fail(ErrorKind::kShape, "{}: attribute {} of {} must be one integer", where, d.name,
             opTextName(k));
      if (d.type == AttrType::kFloat && (a.slots[slot].count != 1 || std::isnan(a.f(slot))))
        fail(ErrorKind::kShape, "{}: attribute {} of {} must be one number (not NaN)", where,
             d.name, opTextName(k));
      continue;
    }
    if (d.presence == AttrPresence::kRequired)
      fail(ErrorKind::kShape, "{}: {} needs attribute {} ({})", where, opTextName(k), d.name,
           attrTypeName(d.type));
    if (d.presence == AttrPresence::kDefault) setDefault(d, a, slot);
  }
}

bool attrIsDefault(OpKind k, const Attrs& a, int slot) {
  const auto decls = opAttrDecls(k);
  if (slot >= static_cast<int>(decls.size())) return false;
  const AttrDecl& d = decls[slot];
  if (d.presence != AttrPresence::kDefault || !isSlotType(d.type) || !a.has(slot)) return false;
  Attrs def;
  setDefault(d, def, slot);
  return def.slots[slot] == a.slots[slot];
}

std::string formatAttrFloat(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);
}

std::string formatAttrs(OpKind k, const Attrs& a) {
  std::string out;
  const auto decls = opAttrDecls(k);
  for (size_t s = 0; s < decls.size(); ++s) {
    const AttrDecl& d = decls[s];
    const int slot = static_cast<int>(s);
    switch (d.type) {
      case AttrType::kDim:
        if (a.dim) out += fmt::format(", {}={}", d.name, *a.dim);
        break;
      case AttrType::kShape:
        if (a.shape) out += fmt::format(", {}={}", d.name, a.shape->toString());
        break;
      case AttrType::kPerm:
        if (a.perm) out += fmt::format(", {}={}", d.name, a.perm->toString());
        break;
      case AttrType::kInt:
        if (a.has(slot) && !attrIsDefault(k, a, slot))
          out += fmt::format(", {}={}", d.name, a.i(slot));
        break;
      case AttrType::kFloat:
        if (a.has(slot) && !attrIsDefault(k, a, slot))
          out += fmt::format(", {}={}", d.name, formatAttrFloat(a.f(slot)));
        break;
      case AttrType::kInts:
        if (a.has(slot) && !attrIsDefault(k, a, slot))
          out += fmt::format(", {}=[{}]", d.name, fmt::join(a.ints(slot), ", "));
        break;
    }
  }
  return out;
}

}  // namespace gearbox
