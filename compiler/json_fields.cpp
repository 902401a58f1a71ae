// JSON field helpers (see compiler/json_fields.h).
#include "compiler/json_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gearbox {

std::optional<OpKind> parseKernelOp(std::string_view name) {
  return parseOpKernelName(name);
}

std::optional<DType> parseKernelDType(std::string_view name) {
  for (DType t : {DType::kF32, DType::kI32, DType::kI64})
    if (dtypeKernelName(t) == name) return t;
  return std::nullopt;
}

// Field access with errors that name the field; `kind` is kIo for descriptors and bundles
// and kParse for op-info files.
const Json& field(const Json& j, const char* name, const std::string& where, ErrorKind kind) {
  if (!j.is_object())
    fail(kind, "{} is not a JSON object", where.empty() ? "the document" : "field '" + where + "'");
  auto it = j.find(name);
  if (it == j.end()) fail(kind, "missing field '{}{}{}'", where, where.empty() ? "" : ".", name);
  return *it;
}

std::string joinField(const std::string& where, const char* name) {
  return where.empty() ? std::string(name) : where + "." + name;
}

int64_t getInt(const Json& j, const char* name, const std::string& where, ErrorKind kind) {
  const Json& v = field(j, name, where, kind);
  if (!v.is_number_integer())
    fail(kind, "field '{}' must be an integer, got {}", joinField(where, name), v.dump());
  return v.get<int64_t>();
}

std::string getString(const Json& j, const char* name, const std::string& where, ErrorKind kind) {
  const Json& v = field(j, name, where, kind);
  if (!v.is_string())
    fail(kind, "field '{}' must be a string, got {}", joinField(where, name), v.dump());
  return v.get<std::string>();
}

const Json& getArray(const Json& j, const char* name, const std::string& where, ErrorKind kind) {
  const Json& v = field(j, name, where, kind);
  if (!v.is_array()) fail(kind, "field '{}' must be an array", joinField(where, name));
  return v;
}

std::vector<int64_t> getIntArray(const Json& j, const char* name, const std::string& where,
                                 ErrorKind kind) {
  const Json& a = getArray(j, name, where, kind);
  std::vector<int64_t> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_number_integer())
      fail(kind, "field '{}[{}]' must be an integer, got {}", joinField(where, name), i,
           a[i].dump());
    out.push_back(a[i].get<int64_t>());
  }
  return out;
}

Json shapeToJson(const Shape& s, bool symbolsByName) {
  Json a = Json::array();
  for (int64_t d : s) {
    if (symbolsByName && isSymbolDim(d)) {
      a.push_back(symbolName(d));
    } else {
      a.push_back(d >= 0 ? d : kAnyDim);
    }
  }
  return a;
}

Shape shapeFromJson(const Json& a, const std::string& where, ErrorKind kind) {
  if (!a.is_array()) fail(kind, "field '{}' must be an array", where);
  if (a.size() > static_cast<size_t>(kMaxRank))
    fail(kind, "field '{}' has rank {}, above the maximum of {}", where, a.size(), kMaxRank);
  Shape s;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].is_string()) {
      const std::string name = a[i].get<std::string>();
      if (name.empty()) fail(kind, "field '{}[{}]' is an empty symbol name", where, i);
      s.push(symbolDim(name));
    } else if (a[i].is_number_integer() && a[i].get<int64_t>() >= kAnyDim) {
      s.push(a[i].get<int64_t>());
    } else {
      fail(kind, "field '{}[{}]' must be a dim (integer >= -1 or a symbol name), got {}", where, i,
           a[i].dump());
    }
  }
  return s;
}

DType dtypeField(const Json& j, const char* name, const std::string& where, ErrorKind kind) {
  const std::string s = getString(j, name, where, kind);
  auto t = parseKernelDType(s);
  if (!t) fail(kind, "field '{}': unknown dtype '{}'", joinField(where, name), s);
  return *t;
}

// Multiplies non-negative extents; -1 on a negative factor or overflow, so a damaged file
// can never turn into a wrapped-around size.
int64_t checkedProduct(std::initializer_list<int64_t> factors) {
  int64_t p = 1;
  for (int64_t f : factors) {
    if (f < 0 || __builtin_mul_overflow(p, f, &p)) return -1;
  }
  return p;
}

int64_t dimsProduct(const Shape& s, int begin, int end) {
  int64_t p = 1;
  for (int i = begin; i < end; ++i) p = checkedProduct({p, s[i]});
  return p;
}

Json attrsToJson(OpKind op, const Attrs& attrs) {
  Json j = Json::object();
  if (attrs.dim) j["dim"] = *attrs.dim;
  // Reshape's target keeps -2 (kCopyInputDim) as written; symbols never reach a key's attrs.
  auto dims = [](const Shape& s) {
    Json a = Json::array();
    for (int64_t d : s) a.push_back(d);
    return a;
  };
  if (attrs.shape) j["shape"] = dims(*attrs.shape);
  if (attrs.perm) j["perm"] = dims(*attrs.perm);
  // Typed attributes, every one given (defaults included: a descriptor states the whole key).
  const auto decls = opAttrDecls(op);
  for (size_t i = 0; i < decls.size(); ++i) {
    const int slot = static_cast<int>(i);
    if (!attrs.has(slot)) continue;
    const std::string name(decls[i].name);
    switch (decls[i].type) {
      case AttrType::kInt: j[name] = attrs.i(slot); break;
      // JSON has no infinity: clip's open bounds are written as strings.
      case AttrType::kFloat:
        if (std::isfinite(attrs.f(slot))) {
          j[name] = attrs.f(slot);
        } else {
          j[name] = formatAttrFloat(attrs.f(slot));
        }
        break;
      case AttrType::kInts: {
        Json a = Json::array();
        for (int64_t v : attrs.ints(slot)) a.push_back(v);
        j[name] = std::move(a);
        break;
      }
      default: break;
    }
  }
  return j;
}

Attrs attrsFromJson(OpKind op, const Json& j, const std::string& where, ErrorKind kind) {
  if (!j.is_object()) fail(kind, "field '{}' must be an object", where);
  Attrs attrs;
  auto dims = [&](const char* name) {
    const std::vector<int64_t> v = getIntArray(j, name, where, kind);
    if (v.size() > static_cast<size_t>(kMaxRank))
      fail(kind, "field '{}' has {} entries, above the maximum rank {}", joinField(where, name),
           v.size(), kMaxRank);
    Shape s;
    for (int64_t d : v) {
      if (d < -2) fail(kind, "field '{}': {} is not a dim", joinField(where, name), d);
      s.push(d);
    }
    return s;
  };
  for (const auto& [name, value] : j.items()) {
    const int slot = findAttr(op, name);
    if (slot < 0) fail(kind, "field '{}': {} has no attribute '{}'", where, opTextName(op), name);
    switch (opAttrDecls(op)[slot].type) {
      case AttrType::kDim:
        if (!value.is_number_integer()) fail(kind, "field '{}.dim' must be an integer", where);
        attrs.dim = value.get<int64_t>();
        break;
      case AttrType::kShape: attrs.shape = dims("shape"); break;
      case AttrType::kPerm: attrs.perm = dims("perm"); break;
      case AttrType::kInt:
        if (!value.is_number_integer())
          fail(kind, "field '{}' must be an integer", joinField(where, name.c_str()));
        attrs.setInt(slot, value.get<int64_t>());
        break;
      case AttrType::kFloat: {
        double f = 0;
        if (value.is_number()) {
          f = value.get<double>();
        } else if (value == "inf" || value == "-inf") {
          f = value == "inf" ? HUGE_VAL : -HUGE_VAL;
        } else {
          fail(kind, "field '{}' must be a number, \"inf\" or \"-inf\"",
               joinField(where, name.c_str()));
        }
        attrs.setFloat(slot, f);
        break;
      }
      case AttrType::kInts: {
        const std::vector<int64_t> v = getIntArray(j, name.c_str(), where, kind);
        if (v.size() > static_cast<size_t>(kMaxAttrInts))
          fail(kind, "field '{}' has {} entries, above {}", joinField(where, name.c_str()),
               v.size(), kMaxAttrInts);
        attrs.setInts(slot, v);
        break;
      }
    }
  }
  // A descriptor or record written by another version may leave a default out; a missing
  // required attribute is an error naming the field.
  try {
    normalizeAttrs(op, attrs, where);
  } catch (const Error& e) {
    fail(kind, "field '{}': {}", where, e.what());
  }
  return attrs;
}

}  // namespace gearbox
