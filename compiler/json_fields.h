#pragma once
// JSON field access with errors that name the field, shared by every reader of gearbox's JSON
// files (kernel descriptors, bundles, op-info records) and the per-op params serialisation in
// compiler/ops/. `kind` is the error kind to raise: kIo for descriptors and bundles, kParse for
// op-info files.

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/error.h"
#include "graph/graph.h"

namespace gearbox {

using Json = nlohmann::ordered_json;

std::optional<OpKind> parseKernelOp(std::string_view name);    // "IndexSelect"
std::optional<DType> parseKernelDType(std::string_view name);  // "int64"

const Json& field(const Json& j, const char* name, const std::string& where, ErrorKind kind);
std::string joinField(const std::string& where, const char* name);
int64_t getInt(const Json& j, const char* name, const std::string& where, ErrorKind kind);
std::string getString(const Json& j, const char* name, const std::string& where, ErrorKind kind);
const Json& getArray(const Json& j, const char* name, const std::string& where, ErrorKind kind);
std::vector<int64_t> getIntArray(const Json& j, const char* name, const std::string& where,
                                 ErrorKind kind);
// Dims as JSON: symbols by name (key files) or as -1 (op-info files).
Json shapeToJson(const Shape& s, bool symbolsByName);
Shape shapeFromJson(const Json& a, const std::string& where, ErrorKind kind);
DType dtypeField(const Json& j, const char* name, const std::string& where, ErrorKind kind);

// A kernel key's attributes as a JSON object ({"dim": 1}, {"shape": [4, 8, -1]},
// {"perm": [0, 2, 1]}) and back; unknown attributes are an error naming the field.
Json attrsToJson(OpKind op, const Attrs& attrs);
Attrs attrsFromJson(OpKind op, const Json& j, const std::string& where, ErrorKind kind);

// Multiplies non-negative extents; -1 on a negative factor or overflow, so a damaged file
// can never turn into a wrapped-around size.
int64_t checkedProduct(std::initializer_list<int64_t> factors);
// checkedProduct of dims [begin, end) of s.
int64_t dimsProduct(const Shape& s, int begin, int end);

template <size_t N>
Json intArray(const int64_t (&a)[N]) {
  Json j = Json::array();
  for (int64_t v : a) j.push_back(v);
  return j;
}

// Reads exactly N integers of kernel.params.<name> into `out`.
template <size_t N>
void fixedIntArray(const Json& p, const char* name, int64_t (&out)[N]) {
  const std::vector<int64_t> v = getIntArray(p, name, "kernel.params", ErrorKind::kIo);
  if (v.size() != N)
    fail(ErrorKind::kIo, "field 'kernel.params.{}' must hold {} integers, got {}", name, N,
         v.size());
  std::copy(v.begin(), v.end(), out);
}

}  // namespace gearbox
