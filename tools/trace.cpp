#include "tools/trace.h"

#include <nlohmann/json.hpp>

#include "graph/checked.h"
#include "graph/error.h"
#include "graph/json_limits.h"
#include "graph/npy.h"

namespace gearbox::cli {

namespace {

Shape shapeFromJson(const nlohmann::json& v, const std::string& where, const std::string& input) {
  if (!v.is_array())
    fail(ErrorKind::kParse, "{}: input '{}': expected a shape array like [2, 4], got {}", where,
         input, v.dump());
  if (v.size() > static_cast<size_t>(kMaxRank))
    fail(ErrorKind::kParse, "{}: input '{}': rank {} exceeds {}", where, input, v.size(), kMaxRank);
  Shape s;
  for (size_t d = 0; d < v.size(); ++d) {
    if (!v[d].is_number_integer() || v[d].get<int64_t>() < 0)
      fail(ErrorKind::kParse, "{}: input '{}' dim {}: expected a size >= 0, got {}", where, input,
           d, v[d].dump());
    s.push(v[d].get<int64_t>());
  }
  return s;
}

InputSignature signatureFromJson(const nlohmann::json& obj, const Graph& g,
                                 const std::string& where, bool requireAll) {
  if (!obj.is_object())
    fail(ErrorKind::kParse, "{}: expected a JSON object mapping input name -> shape", where);
  InputSignature sig;
  for (ValueId v : g.inputs) sig.push_back(g.values[v].type.shape);
  std::vector<bool> given(g.inputs.size(), false);
  for (auto& [name, value] : obj.items()) {
    const int i = g.findInput(name);
    if (i < 0) fail(ErrorKind::kParse, "{}: graph {} has no input '{}'", where, g.name, name);
    sig[i] = shapeFromJson(value, where, name);
    // The size limit is checked as soon as a shape is known, before anything is sized by it.
    checkTensorSize(sig[i], g.values[g.inputs[i]].type.dtype, where,
                    fmt::format("input '{}'", name));
    given[i] = true;
  }
  if (requireAll)
    for (size_t i = 0; i < given.size(); ++i)
      // An input declared with a fully static shape (a weight) has only one possible shape.
      if (!given[i] && !sig[i].isStatic())
        fail(ErrorKind::kParse, "{}: input '{}' is missing", where, g.values[g.inputs[i]].name);
  return sig;
}

}  // namespace

std::vector<InputSignature> parseTrace(const std::string& text, const std::string& file,
                                       const Graph& g, std::vector<int>* lines) {
  std::vector<InputSignature> out;
  size_t pos = 0;
  int line = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string l = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line;
    while (!l.empty() && (l.back() == '\r' || l.back() == ' ' || l.back() == '\t')) l.pop_back();
    size_t first = l.find_first_not_of(" \t");
    if (first == std::string::npos || l[first] == '#') {
      if (nl == text.size()) break;
      continue;
    }
    const std::string where = file + ":" + std::to_string(line);
    nlohmann::json j;
    checkJsonDepth(l, where);
    try {
      j = nlohmann::json::parse(l);
    } catch (const nlohmann::json::exception& e) {
      fail(ErrorKind::kParse, "{}: invalid JSON: {}", where, e.what());
    }
    InputSignature sig = signatureFromJson(j, g, where, true);
    try {
      checkSignature(g, sig);
    } catch (const Error& e) {
      fail(ErrorKind::kShape, "{}: {}", where, e.what());
    }
    out.push_back(std::move(sig));
    if (lines) lines->push_back(line);
    if (nl == text.size()) break;
  }
  if (out.empty()) fail(ErrorKind::kParse, "{}: the trace has no iterations", file);
  return out;
}

std::vector<InputSignature> loadTrace(const std::string& path, const Graph& g,
                                      std::vector<int>* lines) {
  return parseTrace(readFile(path), path, g, lines);
}

InputSignature parseShapesJson(const std::string& json, const Graph& g, const std::string& where) {
  nlohmann::json j;
  checkJsonDepth(json, where);
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kParse, "{}: invalid JSON: {}", where, e.what());
  }
  return signatureFromJson(j, g, where, false);
}

}  // namespace gearbox::cli
