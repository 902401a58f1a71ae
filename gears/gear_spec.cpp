#include "gears/gear_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_set>

#include "graph/error.h"
#include "graph/json_limits.h"

namespace gearbox {
namespace {

constexpr size_t kMinGearsPerDim = 2;
constexpr size_t kMaxGearsPerDim = 100;

// A dim_gears entry before validation. Both front ends (the C++ list and JSON text) lower to
// this, so the checks, their order and their messages live in exactly one function.
struct RawElem {
  std::string type = "int";  // Python type name; "int" when the element is an integer
  int64_t value = 0;
  bool fits = true;  // false: an integer beyond int64
  std::string text;  // as written, for the "too large" message
};
struct RawEntry {
  std::string keyType = "int";
  int64_t key = 0;
  bool keyFits = true;
  std::string keyText;
  std::string valueType = "list";  // JSON arrays and C++ vectors are both "list or tuple"
  std::vector<RawElem> elems;
};

std::vector<RawEntry> lowerList(const DimGearList& list) {
  std::vector<RawEntry> out;
  out.reserve(list.size());
  for (const DimGearEntry& e : list) {
    RawEntry r;
    r.key = e.dim;
    r.keyText = std::to_string(e.dim);
    for (int64_t v : e.values) r.elems.push_back(RawElem{"int", v, true, std::to_string(v)});
    out.push_back(std::move(r));
  }
  return out;
}

// The entries as a dim -> values map when they are well typed and have no repeated key; used
// only to decide whether a second set_dim_gears repeats the first one.
std::optional<std::map<int64_t, std::vector<int64_t>>> asPlainMap(
    const std::vector<RawEntry>& entries) {
  std::map<int64_t, std::vector<int64_t>> out;
  for (const RawEntry& e : entries) {
    if (e.keyType != "int" || !e.keyFits || e.valueType != "list") return std::nullopt;
    std::vector<int64_t> values;
    for (const RawElem& el : e.elems) {
      if (el.type != "int" || !el.fits) return std::nullopt;
      values.push_back(el.value);
    }
    if (!out.emplace(e.key, std::move(values)).second) return std::nullopt;
  }
  return out;
}

bool sameSpec(const std::map<int, std::vector<int64_t>>& stored,
              const std::vector<RawEntry>& entries) {
  auto plain = asPlainMap(entries);
  if (!plain || plain->size() != stored.size()) return false;
  for (const auto& [dim, values] : stored) {
    auto it = plain->find(dim);
    if (it == plain->end() || it->second != values) return false;
  }
  return true;
}

// The set_dim_gears checks. The first five messages are TorchAir's, word for word and in its
// order; the rest are gearbox's additions (GE rejects negative sizes; a repeated key cannot
// happen in a Python dict; a static-declared dim has nothing to gear).
std::map<int, std::vector<int64_t>> validate(const InputDecl& decl,
                                             const std::vector<RawEntry>& entries) {
  const int rank = decl.shape.rank();
  std::map<int, std::vector<int64_t>> out;
  for (const RawEntry& e : entries) {
    if (e.keyType != "int")
      fail(ErrorKind::kGear, "Dim index in dim_gears must be an integer, but got {}.", e.keyType);
    if (!e.keyFits || e.key < 0 || e.key >= rank)
      fail(ErrorKind::kGear, "Dim index in dim_gears must be in range [0, {}], but got {}.",
           rank - 1, e.keyText);
    const int d = static_cast<int>(e.key);
    if (e.valueType != "list")
      fail(ErrorKind::kGear,
           "Gears for dim index {} in dim_gears must be a list or tuple, but got {}.", d,
           e.valueType);
    std::vector<int64_t> values;
    values.reserve(e.elems.size());
    for (size_t k = 0; k < e.elems.size(); ++k) {
      const RawElem& el = e.elems[k];
      if (el.type != "int")
        fail(ErrorKind::kGear,
             "Element at index {} of value for dim index {} in dim_gears must be an integer, but "
             "got {}.",
             k, d, el.type);
      if (!el.fits)
        fail(ErrorKind::kGear, "Gear value at index {} for dim index {} is too large, got {}.", k,
             d, el.text);
      if (el.value == 0)
        fail(ErrorKind::kGear, "Gear value at index {} for dim index {} must not be 0, but got 0.",
             k, d);
      if (el.value < 0)
        fail(ErrorKind::kGear,
             "Gear value at index {} for dim index {} must be positive, but got {}.", k, d,
             el.value);
      values.push_back(el.value);
    }
    if (values.size() < kMinGearsPerDim || values.size() > kMaxGearsPerDim)
      fail(ErrorKind::kGear,
           "Length of gears for dim index {} in dim_gears must be in range [{}, {}], but got {}.",
           d, kMinGearsPerDim, kMaxGearsPerDim, values.size());
    if (out.count(d))
      fail(ErrorKind::kGear, "Dim index {} appears more than once in dim_gears of input '{}'.", d,
           decl.name);
    // A static dim is specialised already: a gear on it could only ever match one of its values,
    // so it is almost certainly a mistake in the model or the spec.
    if (isStaticDim(decl.shape[d]))
      fail(ErrorKind::kGear,
           "Dim index {} of input '{}' is declared static (size {}) in the graph {}; only a "
           "dynamic dim (-1 or a symbol) can have gears.",
           d, decl.name, decl.shape[d], decl.shape.toString());
    out.emplace(d, std::move(values));
  }
  return out;
}

using Json = nlohmann::ordered_json;

// Python's name for the type a JSON value would have after json.loads.
std::string pyTypeName(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "NoneType";
    case Json::value_t::boolean: return "bool";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "int";
    case Json::value_t::number_float: return "float";
    case Json::value_t::string: return "str";
    case Json::value_t::array: return "list";
    case Json::value_t::object: return "dict";
    case Json::value_t::binary: return "bytes";
    case Json::value_t::discarded: return "NoneType";
  }
  return "object";
}

// JSON object keys are always strings; a key spelled as an integer ("0", "-1") stands for that
// integer, anything else is a str key and fails the "must be an integer" check.
void lowerJsonKey(const std::string& key, RawEntry& r) {
  r.keyText = key;
  const char* begin = key.data();
  const char* end = key.data() + key.size();
  const char* digits = (begin != end && *begin == '-') ? begin + 1 : begin;
  bool allDigits = digits != end;
  for (const char* p = digits; p != end; ++p) allDigits = allDigits && (*p >= '0' && *p <= '9');
  if (!allDigits) {
    r.keyType = "str";
    return;
  }
  auto [ptr, ec] = std::from_chars(begin, end, r.key);
  r.keyFits = ec == std::errc() && ptr == end;
}

RawElem lowerJsonElem(const Json& j) {
  RawElem el;
  el.type = pyTypeName(j);
  if (j.is_number_unsigned()) {
    const uint64_t u = j.get<uint64_t>();
    el.text = std::to_string(u);
    el.fits = u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    el.value = el.fits ? static_cast<int64_t>(u) : 0;
  } else if (j.is_number_integer()) {
    el.value = j.get<int64_t>();
    el.text = std::to_string(el.value);
  }
  return el;
}

std::vector<RawEntry> lowerJson(const Json& spec) {
  std::vector<RawEntry> out;
  for (const auto& [key, value] : spec.items()) {
    RawEntry r;
    lowerJsonKey(key, r);
    r.valueType = pyTypeName(value);
    if (value.is_array())
      for (const Json& el : value) r.elems.push_back(lowerJsonElem(el));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

std::vector<InputDecl> graphInputDecls(const Graph& g) {
  std::vector<InputDecl> out;
  out.reserve(g.inputs.size());
  for (ValueId v : g.inputs) out.push_back(InputDecl{g.value(v).name, g.value(v).type.shape});
  return out;
}

std::string formatValues(const std::vector<int64_t>& values) {
  return fmt::format("[{}]", fmt::join(values, ", "));
}

GearConfig::GearConfig(std::vector<InputDecl> inputs) : inputs_(std::move(inputs)) {
  for (size_t i = 0; i < inputs_.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (inputs_[i].name == inputs_[j].name)
        fail(ErrorKind::kGear, "input '{}' is declared twice", inputs_[i].name);
}

int GearConfig::inputIndex(std::string_view name) const {
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i].name == name) return static_cast<int>(i);
  std::vector<std::string_view> names;
  for (const InputDecl& d : inputs_) names.push_back(d.name);
  fail(ErrorKind::kGear, "gears name input '{}', but the graph has no such input (inputs: {})",
       name, names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")));
}

namespace {

void setRaw(std::vector<InputDecl>& inputs, std::map<std::string, InputGears, std::less<>>& gears,
            int index, const std::vector<RawEntry>& entries) {
  const InputDecl& decl = inputs[index];
  auto it = gears.find(decl.name);
  if (it != gears.end()) {
    if (sameSpec(it->second.dims, entries)) return;
    fail(ErrorKind::kGear,
         "Tensor {} already has set dim gears, and it is not supported to set it again.",
         decl.name);
  }
  InputGears g{decl.name, index, validate(decl, entries)};
  gears.emplace(decl.name, std::move(g));
}

}  // namespace

void GearConfig::setDimGears(std::string_view input, const DimGearList& dimGears) {
  setRaw(inputs_, gears_, inputIndex(input), lowerList(dimGears));
}

void GearConfig::setPadTo(std::string_view input, const Shape& shape) {
  const int i = inputIndex(input);
  const InputDecl& decl = inputs_[i];
  if (gears_.count(decl.name))
    fail(ErrorKind::kGear, "input '{}' already has gears; a fixed pad shape replaces them",
         decl.name);
  if (shape.rank() != decl.shape.rank())
    fail(ErrorKind::kGear, "pad shape {} of input '{}' has rank {}, but {} is declared",
         shape.toString(), decl.name, shape.rank(), decl.shape.toString());
  InputGears g{decl.name, i, {}};
  for (int d = 0; d < shape.rank(); ++d) {
    if (shape[d] < 1)
      fail(ErrorKind::kGear, "pad shape {} of input '{}': dim {} must be >= 1, got {}",
           shape.toString(), decl.name, d, shape[d]);
    if (isStaticDim(decl.shape[d])) {
      if (shape[d] != decl.shape[d])
        fail(ErrorKind::kGear,
             "pad shape {} of input '{}': dim {} is declared static (size {}) in {}; only a "
             "dynamic dim can be padded",
             shape.toString(), decl.name, d, decl.shape[d], decl.shape.toString());
      continue;
    }
    // One value: beyond set_dim_gears' 2..100 rule, which setDimGears keeps.
    g.dims[d] = {shape[d]};
  }
  if (g.dims.empty())
    fail(ErrorKind::kGear, "pad shape {} of input '{}' pads nothing: every dim is static",
         shape.toString(), decl.name);
  gears_.emplace(decl.name, std::move(g));
}

bool GearConfig::hasGearedDim() const {
  for (const auto& [name, g] : gears_)
    if (!g.dims.empty()) return true;
  return false;
}

void setDimGears(GearConfig& cfg, const Graph& g, std::string_view input,
                 const DimGearList& dimGears) {
  std::vector<InputDecl> decls = graphInputDecls(g);
  if (cfg.inputs().empty() && cfg.gears().empty()) {
    cfg = GearConfig(std::move(decls));
  } else if (cfg.inputs() != decls) {
    fail(ErrorKind::kGear, "the gear config was built for another graph than '{}'", g.name);
  }
  cfg.setDimGears(input, dimGears);
}

void applyGearsJson(GearConfig& cfg, std::string_view jsonText) {
  try {
    checkJsonDepth(jsonText, "gears JSON");
  } catch (const Error& e) {
    fail(ErrorKind::kGear, "{}", e.what());
  }
  // A repeated key would silently keep its last value (as json.loads does); for gears that
  // hides a typo or a second, different set_dim_gears, so it is an error here. The check is a
  // hash set per open object, and no object may grow past what a valid document can hold (one
  // key per graph input at the top, one per dim below): ordered_json looks keys up linearly, so
  // a 100,000-key object would otherwise cost O(n^2) before any other check could run.
  struct OpenObject {
    std::unordered_set<std::string> keys;
    std::string firstUnknown;  // top level: the first key that names no graph input
  };
  std::vector<OpenObject> open;
  std::string currentInput;
  auto check = [&](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      open.emplace_back();
    } else if (event == Json::parse_event_t::object_end && !open.empty()) {
      open.pop_back();
    } else if (event == Json::parse_event_t::key && !open.empty()) {
      OpenObject& obj = open.back();
      std::string key = parsed.get<std::string>();
      if (open.size() == 1) {
        currentInput = key;
        if (obj.firstUnknown.empty() &&
            std::none_of(cfg.inputs().begin(), cfg.inputs().end(),
                         [&](const InputDecl& d) { return d.name == key; }))
          obj.firstUnknown = key;
      }
      if (!obj.keys.insert(key).second)
        fail(ErrorKind::kGear, "gears JSON repeats the key \"{}\" in one object", key);
      if (open.size() == 1 && obj.keys.size() > cfg.inputs().size())
        (void)cfg.inputIndex(obj.firstUnknown);  // throws: more keys than inputs
      if (open.size() == 2 && obj.keys.size() > static_cast<size_t>(kMaxRank))
        fail(ErrorKind::kGear,
             "gears for input '{}': dim_gears has more than {} keys, but a tensor has at most {} "
             "dims",
             currentInput, kMaxRank, kMaxRank);
    }
    return true;
  };
  Json doc;
  try {
    doc = Json::parse(jsonText.begin(), jsonText.end(), check);
  } catch (const Json::exception& e) {
    fail(ErrorKind::kGear, "gears JSON is malformed: {}", e.what());
  }
  if (!doc.is_object())
    fail(ErrorKind::kGear,
         "gears JSON must be an object mapping input names to {{dim: [values]}}, but got {}.",
         pyTypeName(doc));
  for (const auto& [name, spec] : doc.items()) {
    const int index = cfg.inputIndex(name);
    // TorchAir's messages do not name the tensor (Python shows it in the traceback); here the
    // prefix is the only way to tell which input of the document failed.
    if (!spec.is_object())
      fail(ErrorKind::kGear, "gears for input '{}': dim_gears must be a dict, but got {}.", name,
           pyTypeName(spec));
    try {
      setRaw(cfg.inputs_, cfg.gears_, index, lowerJson(spec));
    } catch (const Error& e) {
      fail(ErrorKind::kGear, "gears for input '{}': {}", name, e.what());
    }
  }
}

GearConfig parseGearsJson(std::vector<InputDecl> inputs, std::string_view jsonText) {
  GearConfig cfg(std::move(inputs));
  applyGearsJson(cfg, jsonText);
  return cfg;
}

}  // namespace gearbox
