#pragma once
// The op enum, per-op metadata and typed attributes, all generated from graph/ops.def.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "graph/shape.h"

namespace gearbox {

enum class OpKind : uint8_t {
#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index) k##e,
#include "graph/ops.def"
#undef GEARBOX_OP
};

constexpr int kOpCount = 0
#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index) +1
#include "graph/ops.def"
#undef GEARBOX_OP
    ;
static_assert(kOpCount == 38, "update docs/IR.md's op table when adding an op");

// Which input holds indices (ops.def's index column).
enum class IndexInput : uint8_t { kNone, kSecond, kLast };

std::string_view opTextName(OpKind k);    // "index_select"
std::string_view opKernelName(OpKind k);  // "IndexSelect"
std::optional<OpKind> parseOpKind(std::string_view text);
std::optional<OpKind> parseOpKernelName(std::string_view kernelName);  // "IndexSelect"
int opMinInputs(OpKind k);
int opMaxInputs(OpKind k);  // -1: any number
IndexInput opIndexInput(OpKind k);

// ---- Typed attributes ----------------------------------------------------------------------
//
// An op declares its attributes once, in its ops.def row. Int, Ints and Float live in numbered
// slots of Attrs (the slot is the attribute's position in the row; graph/ops/<op>.cpp names
// them through the generated enum `attr::<Enum>`). Dim, Shape and Perm have fields of their own
// because the compiler rewrites them: a Dim is wrapped against input 0's rank in kernel keys,
// a Shape may hold symbols that keys resolve, and passes rewrite both.
enum class AttrType : uint8_t { kInt, kInts, kFloat, kDim, kShape, kPerm };
enum class AttrPresence : uint8_t { kRequired, kDefault, kOptional };

constexpr int kMaxAttrs = 6;      // attributes per op
constexpr int kMaxAttrInts = 12;  // entries of an Ints attribute (pad: begins + ends, rank 6)

struct AttrDecl {
  std::string_view name;
  AttrType type = AttrType::kInt;
  AttrPresence presence = AttrPresence::kRequired;
  std::array<double, kMaxAttrInts> defaults{};  // kDefault: the value(s)
  int defaultCount = 0;
};

// The attributes an op declares, in ops.def order.
std::span<const AttrDecl> opAttrDecls(OpKind k);
// The slot of attribute `name` of op `k`, or -1.
int findAttr(OpKind k, std::string_view name);
std::string_view attrTypeName(AttrType t);  // "int", "ints", "float", "dim", "dims", "perm"

// One Int / Ints / Float attribute value. count -1 = not given.
struct AttrValue {
  int8_t count = -1;
  std::array<int64_t, kMaxAttrInts> ints{};
  double f = 0;
  bool operator==(const AttrValue& o) const {
    if (count != o.count) return false;
    for (int i = 0; i < count; ++i)
      if (ints[i] != o.ints[i]) return false;
    return f == o.f || (f != f && o.f != o.f);
  }
};

// Attributes, one struct so the kernel key and the IR printer see every attribute through one
// type.
struct Attrs {
  std::optional<int64_t> dim;  // Dim: index_select, cat, cat_gather
  // Shape (reshape): the target shape; dims are sizes, -1 (at most one: inferred from the
  // element count) or named (a named dim at position i takes the input's dim i, like ONNX's 0).
  // Default member initializers keep `Attrs{dim}` free of -Wmissing-field-initializers.
  std::optional<Shape> shape = std::nullopt;
  std::optional<Shape> perm = std::nullopt;  // Perm (transpose): output dim i is input dim perm[i]
  std::array<AttrValue, kMaxAttrs> slots = {};  // Int, Ints, Float, by declaration slot

  bool has(int slot) const { return slots[slot].count >= 0; }
  int64_t i(int slot) const { return slots[slot].ints[0]; }
  std::span<const int64_t> ints(int slot) const {
    const AttrValue& v = slots[slot];
    return {v.ints.data(), static_cast<size_t>(v.count < 0 ? 0 : v.count)};
  }
  double f(int slot) const { return slots[slot].f; }
  void setInt(int slot, int64_t v) {
    slots[slot] = AttrValue{};
    slots[slot].count = 1;
    slots[slot].ints[0] = v;
  }
  // Throws Error(kParse) past kMaxAttrInts entries.
  void setInts(int slot, std::initializer_list<int64_t> v) { setInts(slot, std::span(v)); }
  void setInts(int slot, std::span<const int64_t> v);
  void setFloat(int slot, double v) {
    slots[slot] = AttrValue{};
    slots[slot].count = 1;
    slots[slot].f = v;
  }
  bool operator==(const Attrs& o) const {
    return dim == o.dim && shape == o.shape && perm == o.perm && slots == o.slots;
  }
  size_t hash() const;
};

// Fills declared defaults and checks that required attributes are given and that no slot is
// set that the op does not declare; throws Error(kShape) naming `where`, the op and the
// attribute. Runs when a node is built and when a key is read back from a file.
void normalizeAttrs(OpKind k, Attrs& a, std::string_view where);
// True when slot `slot` holds its declared default (printers leave such attributes out).
bool attrIsDefault(OpKind k, const Attrs& a, int slot);
// ", strides=[2, 2], group=2": every attribute that is given and not a default, as the IR text
// writes it (Dim/Shape/Perm included).
std::string formatAttrs(OpKind k, const Attrs& a);
// A float attribute as the IR and kernel names print it: the shortest text that reads back to
// the same double ("6", "1e-05", "-inf").
std::string formatAttrFloat(double v);

// Slot names per op: attr::Conv2d::strides is the slot of conv2d's `strides`.
namespace attr {
#define GEARBOX_REQ(name, type) name
#define GEARBOX_DEF(name, type, ...) name
#define GEARBOX_OPT(name, type) name
#define GEARBOX_ATTR_LIST(...) __VA_ARGS__
// A named enum: an op without attributes has an empty one, which clang warns about unnamed.
#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index) \
  namespace e {                                                    \
  enum Slot : int { GEARBOX_ATTR_LIST attrList };                  \
  }
#include "graph/ops.def"
#undef GEARBOX_OP
#undef GEARBOX_ATTR_LIST
#undef GEARBOX_REQ
#undef GEARBOX_DEF
#undef GEARBOX_OPT
}  // namespace attr

}  // namespace gearbox
