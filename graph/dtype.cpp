#include "graph/dtype.h"

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

}  // namespace gearbox
