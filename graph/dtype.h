#pragma once
// Element types. The names follow the IR text (f32, i32, i64); kernel names use the
// framework spelling (float, int32, int64) as Ascend's op-info files do.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gearbox {

enum class DType : uint8_t { kF32, kI32, kI64 };

constexpr size_t dtypeSize(DType t) {
  return t == DType::kI64 ? 8 : 4;
}
std::string_view dtypeName(DType t);        // "f32"
std::string_view dtypeKernelName(DType t);  // "float", "int32", "int64"
std::optional<DType> parseDType(std::string_view s);

template <typename T>
constexpr DType dtypeOf();
template <>
constexpr DType dtypeOf<float>() {
  return DType::kF32;
}
template <>
constexpr DType dtypeOf<int32_t>() {
  return DType::kI32;
}
template <>
constexpr DType dtypeOf<int64_t>() {
  return DType::kI64;
}

// Calls fn with a value of the C++ type matching t: dispatchDType(t, [](auto tag) {
// using T = decltype(tag); ... }).
template <typename Fn>
decltype(auto) dispatchDType(DType t, Fn&& fn) {
  switch (t) {
    case DType::kF32: return fn(float{});
    case DType::kI32: return fn(int32_t{});
    case DType::kI64: return fn(int64_t{});
  }
  return fn(float{});
}

}  // namespace gearbox
