#pragma once
// The op enum and per-op metadata, generated from graph/ops.def.

#include <cstdint>
#include <optional>
#include <string_view>

#include "graph/shape.h"

namespace gearbox {

enum class OpKind : uint8_t {
#define GEARBOX_OP(e, text, kernel, arity, attr, index) k##e,
#include "graph/ops.def"
#undef GEARBOX_OP
};

constexpr int kOpCount = 0
#define GEARBOX_OP(e, text, kernel, arity, attr, index) +1
#include "graph/ops.def"
#undef GEARBOX_OP
    ;
static_assert(kOpCount == 10, "update docs/IR.md's op table when adding an op");

// The one attribute an op may carry (ops.def's attribute column).
enum class OpAttr : uint8_t { kNone, kDim, kShape, kPerm };
// Which input holds indices (ops.def's index column).
enum class IndexInput : uint8_t { kNone, kSecond, kLast };

std::string_view opTextName(OpKind k);    // "index_select"
std::string_view opKernelName(OpKind k);  // "IndexSelect"
std::optional<OpKind> parseOpKind(std::string_view text);
std::optional<OpKind> parseOpKernelName(std::string_view kernelName);  // "IndexSelect"
int opArity(OpKind k);                                                 // -1: one or more inputs
OpAttr opAttr(OpKind k);
IndexInput opIndexInput(OpKind k);

// Attributes, one struct so the kernel key and the IR printer see every attribute through one
// type. Each op uses at most one field (ops.def's attribute column).
struct Attrs {
  std::optional<int64_t> dim;  // index_select, cat, cat_gather
  // reshape: the target shape; dims are sizes, -1 (at most one: inferred from the element
  // count) or named (a named dim at position i takes the input's dim i, like ONNX's 0).
  // Default member initializers keep `Attrs{dim}` free of -Wmissing-field-initializers.
  std::optional<Shape> shape = std::nullopt;
  std::optional<Shape> perm = std::nullopt;  // transpose: output dim i is input dim perm[i]
  bool operator==(const Attrs& o) const {
    return dim == o.dim && shape == o.shape && perm == o.perm;
  }
};

}  // namespace gearbox
