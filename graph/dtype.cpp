#include "graph/dtype.h"

#include "graph/error.h"
#include "graph/op.h"

namespace gearbox {

std::string_view dtypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
  }
  return "?";
}

std::string_view dtypeKernelName(DType t) {
  switch (t) {
    case DType::kF32: return "float";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view s) {
  if (s == "f32") return DType::kF32;
  if (s == "i32") return DType::kI32;
  if (s == "i64") return DType::kI64;
  return std::nullopt;
}

const char* errorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kParse: return "parse error";
    case ErrorKind::kShape: return "shape error";
    case ErrorKind::kIndex: return "index error";
    case ErrorKind::kIo: return "I/O error";
    case ErrorKind::kGear: return "gear error";
    case ErrorKind::kConfig: return "config error";
    case ErrorKind::kLimit: return "recompile limit";
  }
  return "error";
}

namespace {
struct OpInfo {
  std::string_view text, kernel;
  int arity;
  OpAttr attr;
  IndexInput index;
};
constexpr OpInfo kOps[] = {
#define GEARBOX_OP(e, text, kernel, arity, attr, index) \
  {text, kernel, arity, OpAttr::k##attr, IndexInput::k##index},
#include "graph/ops.def"
#undef GEARBOX_OP
};
static_assert(std::size(kOps) == kOpCount);
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
int opArity(OpKind k) {
  return kOps[static_cast<int>(k)].arity;
}
OpAttr opAttr(OpKind k) {
  return kOps[static_cast<int>(k)].attr;
}
IndexInput opIndexInput(OpKind k) {
  return kOps[static_cast<int>(k)].index;
}

}  // namespace gearbox
