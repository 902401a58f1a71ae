#pragma once
// The op enum and per-op metadata, generated from graph/ops.def.

#include <cstdint>
#include <optional>
#include <string_view>

namespace gearbox {

enum class OpKind : uint8_t {
#define GEARBOX_OP(e, text, kernel) k##e,
#include "graph/ops.def"
#undef GEARBOX_OP
};

constexpr int kOpCount = 0
#define GEARBOX_OP(e, text, kernel) +1
#include "graph/ops.def"
#undef GEARBOX_OP
    ;
static_assert(kOpCount == 6, "update kOpCount users (kernel tables, docs/IR.md) when adding an op");

std::string_view opTextName(OpKind k);    // "index_select"
std::string_view opKernelName(OpKind k);  // "IndexSelect"
std::optional<OpKind> parseOpKind(std::string_view text);

// Attributes. Only `dim` exists today; kept as a struct so the kernel key and the IR printer
// see every attribute through one type.
struct Attrs {
  std::optional<int64_t> dim;
  bool operator==(const Attrs& o) const { return dim == o.dim; }
};

}  // namespace gearbox
