// Kernel-name formatting and parsing (see compiler/kernel_name.h for the format).
#include "compiler/kernel_name.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace gearbox {
namespace {

void appendNumber(std::string& s, int64_t v) {
  const fmt::format_int f(v);
  s.append(f.data(), f.size());
}

void appendDims(std::string& s, const Shape& shape, bool keepCopyMarker) {
  for (int d = 0; d < shape.rank(); ++d) {
    if (d) s += '_';
    const int64_t v = shape[d];
    // Dynamic dims appear in shape-generic kernel names as "-1" like GE's unknown dims.
    if (v >= 0) {
      appendNumber(s, v);
    } else if (keepCopyMarker && v == kCopyInputDim) {
      s += "-2";
    } else {
      s += "-1";
    }
  }
}

std::vector<std::string_view> splitOn(std::string_view s, std::string_view sep) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t pos = s.find(sep);
    parts.push_back(s.substr(0, pos));
    if (pos == std::string_view::npos) return parts;
    s.remove_prefix(pos + sep.size());
  }
}

// Dims print as canonical decimals, with -1 for dynamic ones (and -2 in a reshape shape);
// anything else (leading zeros, '+', other negatives) means the name is not gearbox's, so it is
// rejected rather than guessed.
std::optional<int64_t> parseDim(std::string_view s, bool allowCopyMarker = false) {
  if (s == "-1") return -1;
  if (allowCopyMarker && s == "-2") return kCopyInputDim;
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size() || value < 0) return std::nullopt;
  return value;
}

std::optional<std::vector<int64_t>> parseDimList(std::string_view s, bool allowCopyMarker) {
  std::vector<int64_t> dims;
  if (s.empty()) return dims;  // a rank-0 reshape target
  for (std::string_view t : splitOn(s, "_")) {
    std::optional<int64_t> d = parseDim(t, allowCopyMarker);
    if (!d) return std::nullopt;
    dims.push_back(*d);
  }
  return dims;
}

bool isDTypeToken(std::string_view t) {
  for (DType d : {DType::kF32, DType::kI32, DType::kI64})
    if (dtypeKernelName(d) == t) return true;
  return false;
}

// One input section's tokens: its dims ("s" for rank 0), then an optional dtype token.
bool parseInput(std::vector<std::string_view> tokens, ParsedKernelName& parsed) {
  std::string dtype;
  if (tokens.size() >= 2 && isDTypeToken(tokens.back())) {
    dtype = tokens.back();
    tokens.pop_back();
  }
  std::vector<int64_t> dims;
  if (!(tokens.size() == 1 && tokens[0] == "s")) {
    for (std::string_view t : tokens) {
      std::optional<int64_t> d = parseDim(t);
      if (!d) return false;
      dims.push_back(*d);
    }
  }
  parsed.inputs.push_back(std::move(dims));
  parsed.inputDtypes.push_back(std::move(dtype));
  return true;
}

// The trailing attribute section, if `part` is one. Returns false for a malformed attribute.
bool parseAttr(std::string_view part, ParsedKernelName& parsed, bool* isAttr) {
  *isAttr = true;
  if (part.starts_with("dim")) {
    std::optional<int64_t> d = parseDim(part.substr(3));
    if (!d || *d < 0) return false;
    parsed.dim = *d;
  } else if (part.starts_with("shape")) {
    parsed.shape = parseDimList(part.substr(5), /*allowCopyMarker=*/true);
    if (!parsed.shape) return false;
  } else if (part.starts_with("perm")) {
    parsed.perm = parseDimList(part.substr(4), false);
    if (!parsed.perm || parsed.perm->empty()) return false;
    for (int64_t p : *parsed.perm)
      if (p < 0) return false;
  } else if (const size_t eq = part.find('=');
             eq != std::string_view::npos && part[0] >= 'a' && part[0] <= 'z') {
    // A typed attribute of ops.def: "name=v0_v1" (ints, or one float like "inf" or "1e-05").
    const std::string_view attrName = part.substr(0, eq);
    for (char c : attrName)
      if (!((c >= 'a' && c <= 'z') || c == '_')) return false;
    parsed.attrs.emplace_back(std::string(attrName), std::string(part.substr(eq + 1)));
  } else {
    *isAttr = false;
  }
  return true;
}

}  // namespace

void appendKernelName(std::string& s, OpKind kind, DType dtype, std::string_view format,
                      std::span<const TensorType> inputs, const Attrs& attrs, int threads) {
  s += opKernelName(kind);
  s += '_';
  s += dtypeKernelName(dtype);
  s += '_';
  s += format;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape& shape = inputs[i].shape;
    s += i == 0 ? "_" : "__";
    if (shape.rank() == 0) s += 's';
    appendDims(s, shape, false);
    // Index inputs (i32 or i64) differ from the data dtype; naming their dtype keeps the name
    // unique per key, since an i32 and an i64 index compile to different kernels.
    if (inputs[i].dtype != dtype) {
      s += '_';
      s += dtypeKernelName(inputs[i].dtype);
    }
  }
  if (attrs.dim) {
    s += "__dim";
    appendNumber(s, *attrs.dim);
  }
  if (attrs.shape) {
    s += "__shape";
    appendDims(s, *attrs.shape, true);
  }
  if (attrs.perm) {
    s += "__perm";
    appendDims(s, *attrs.perm, false);
  }
  // Typed attributes in declaration order; defaults are left out (keys hold them filled in, so
  // the name stays unique per key).
  const auto decls = opAttrDecls(kind);
  for (size_t i = 0; i < decls.size(); ++i) {
    const int slot = static_cast<int>(i);
    if (!attrs.has(slot) || attrIsDefault(kind, attrs, slot)) continue;
    s += "__";
    s += decls[i].name;
    s += '=';
    if (decls[i].type == AttrType::kFloat) {
      s += formatAttrFloat(attrs.f(slot));
      continue;
    }
    bool first = true;
    for (int64_t v : attrs.ints(slot)) {
      if (!first) s += '_';
      first = false;
      appendNumber(s, v);
    }
  }
  if (threads > 0) {
    s += "__threads=";
    appendNumber(s, threads);
  }
}

std::optional<ParsedKernelName> parseKernelName(std::string_view name) {
  std::vector<std::string_view> parts = splitOn(name, "__");
  ParsedKernelName parsed;
  // The thread cap, when there is one, is the last section.
  if (parts.size() > 1 && parts.back().starts_with("threads=")) {
    const std::optional<int64_t> t = parseDim(parts.back().substr(8));
    if (!t || *t < 1) return std::nullopt;
    parsed.threads = *t;
    parts.pop_back();
  }
  // Attribute sections trail the inputs; read them from the back.
  while (parts.size() > 1) {
    bool isAttr = false;
    if (!parseAttr(parts.back(), parsed, &isAttr)) return std::nullopt;
    if (!isAttr) break;
    parts.pop_back();
  }
  std::reverse(parsed.attrs.begin(), parsed.attrs.end());
  // The first part carries op, dtype and format in front of input 0.
  std::vector<std::string_view> head = splitOn(parts[0], "_");
  if (head.size() < 4 || head[0].empty() || head[1].empty() || head[2].empty()) return std::nullopt;
  parsed.op = head[0];
  parsed.dtype = head[1];
  parsed.format = head[2];
  for (size_t i = 0; i < parts.size(); ++i) {
    std::vector<std::string_view> tokens = splitOn(parts[i], "_");
    if (i == 0) tokens.erase(tokens.begin(), tokens.begin() + 3);
    if (!parseInput(std::move(tokens), parsed)) return std::nullopt;
  }
  return parsed;
}

}  // namespace gearbox
