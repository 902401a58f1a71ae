#include "executor/cost_model.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "graph/error.h"
#include "graph/file_io.h"
#include "graph/json_limits.h"

namespace gearbox {

// executor/embed_profiles.cmake: (name, JSON text) of every examples/devices/*.json.
const std::vector<std::pair<std::string, std::string>>& embeddedDeviceProfiles();

namespace {

double lookup(const std::map<std::string, double, std::less<>>& m, std::string_view key,
              double fallback) {
  auto it = m.find(key);
  return it == m.end() ? fallback : it->second;
}

// Keys of the first cost model whose meaning changed: rejected with the keys that replace
// them, so an old file fails loudly instead of being half-applied.
const std::map<std::string, std::string>& renamedKeys() {
  static const std::map<std::string, std::string> m = {
      {"graph_compile_us", "graph_compile_base_us and graph_compile_per_node_us"},
      {"graph_launch_us", "graph_launch_base_us and graph_launch_per_node_us"},
  };
  return m;
}

SyncPolicy parseSyncPolicy(const std::string& s, const std::string& where) {
  if (s == "per_op") return SyncPolicy::kPerOp;
  if (s == "end_only") return SyncPolicy::kEndOnly;
  fail(ErrorKind::kConfig, "{}: sync_policy must be per_op or end_only, got '{}'", where, s);
}

// The physical range of a profile value. Wide enough for any real device and for what
// `gearbox calibrate` measures (it clamps the efficiency to [0.01, 1] too); narrow enough that
// every modeled figure stays finite: a launch of 1e308 us times a launch count is inf, and
// 5e-324 GB/s turns a byte count into inf, which the report cannot hold and the HTML axes
// cannot divide.
struct ValueRange {
  double lo, hi;
  const char* unit;
};
constexpr ValueRange kMicroseconds{0, 1e9, "us"};  // up to about 17 minutes per event
constexpr ValueRange kGflops{1e-6, 1e9, "GFLOP/s"};
constexpr ValueRange kGBps{1e-6, 1e9, "GB/s"};
constexpr ValueRange kEfficiency{0.01, 1, "(a fraction of the static kernel's speed)"};
constexpr ValueRange kMemoryBytes{1, 1125899906842624.0, "bytes (1 B to 1 PiB)"};

struct ScalarKey {
  const char* key;
  double CostModel::*field;
  const ValueRange* range;
};

const std::vector<ScalarKey>& scalarKeys() {
  static const std::vector<ScalarKey> keys = {
      {"memory_gbps", &CostModel::memoryGBps, &kGBps},
      {"min_kernel_us", &CostModel::minKernelUs, &kMicroseconds},
      {"launch_us", &CostModel::launchUs, &kMicroseconds},
      {"graph_launch_base_us", &CostModel::graphLaunchBaseUs, &kMicroseconds},
      {"graph_launch_per_node_us", &CostModel::graphLaunchPerNodeUs, &kMicroseconds},
      {"sync_us", &CostModel::syncUs, &kMicroseconds},
      {"alloc_us", &CostModel::allocUs, &kMicroseconds},
      {"kernel_compile_default_us", &CostModel::kernelCompileDefaultUs, &kMicroseconds},
      {"graph_compile_base_us", &CostModel::graphCompileBaseUs, &kMicroseconds},
      {"graph_compile_per_node_us", &CostModel::graphCompilePerNodeUs, &kMicroseconds},
      {"host_shape_inference_us", &CostModel::hostShapeInferenceUs, &kMicroseconds},
      {"host_tiling_us", &CostModel::hostTilingUs, &kMicroseconds},
      {"generic_kernel_efficiency", &CostModel::genericKernelEfficiency, &kEfficiency},
  };
  return keys;
}

std::string knownKeys() {
  std::string s =
      "name, description, comment, peak_gflops.<dtype>, kernel_compile_us.<Op>, "
      "kernel_compile_log2_flops_us.<Op>, sync_policy, memory_capacity_bytes";
  for (const ScalarKey& k : scalarKeys()) s += std::string(", ") + k.key;
  return s;
}

}  // namespace

ModeledTime& ModeledTime::operator+=(const ModeledTime& o) {
  compileUs += o.compileUs;
  launchSyncUs += o.launchSyncUs;
  computeUs += o.computeUs;
  paddingWasteUs += o.paddingWasteUs;
  hostDynamicUs += o.hostDynamicUs;
  return *this;
}

namespace {
// Every op with a kernel (a zero base is Const's: no kernel to compile).
std::vector<OpKind> compiledOps() {
  std::vector<OpKind> kinds;
  for (int i = 0; i < kOpCount; ++i)
    if (compileCostTerms(static_cast<OpKind>(i)).baseUs > 0)
      kinds.push_back(static_cast<OpKind>(i));
  return kinds;
}
}  // namespace

std::map<std::string, double, std::less<>> builtinKernelCompileUs() {
  std::map<std::string, double, std::less<>> m;
  for (OpKind kind : compiledOps())
    m[std::string(opKernelName(kind))] = compileCostTerms(kind).baseUs;
  return m;
}

std::map<std::string, double, std::less<>> builtinKernelCompileLog2FlopsUs() {
  std::map<std::string, double, std::less<>> m;
  for (OpKind kind : compiledOps())
    if (const CompileCostTerms t = compileCostTerms(kind); t.perLog2FlopsUs > 0)
      m[std::string(opKernelName(kind))] = t.perLog2FlopsUs;
  return m;
}

std::map<std::string, std::string> builtinCompileSources() {
  std::map<std::string, std::string> m;
  for (OpKind kind : compiledOps()) {
    const CompileCostTerms t = compileCostTerms(kind);
    const std::string name(opKernelName(kind));
    m["kernel_compile_us." + name] = std::string(t.baseSource);
    if (t.perLog2FlopsUs > 0)
      m["kernel_compile_log2_flops_us." + name] = std::string(t.perLog2FlopsSource);
  }
  return m;
}

double CostModel::kernelCompile(const KernelKey& key) const {
  const std::string_view op = opKernelName(key.kind);
  double us = lookup(kernelCompileUs, op, kernelCompileDefaultUs);
  if (const double perLog2 = lookup(kernelCompileLog2FlopsUs, op, 0); perLog2 > 0)
    us += perLog2 * std::log2(1 + std::max(0.0, kernelCost(key).flops));
  return us;
}

double CostModel::roofline(const KernelCost& cost, DType dtype) const {
  // GFLOP/s and GB/s are 1e3 per microsecond.
  const double peak = lookup(peakGflops, dtypeKernelName(dtype), peakGflops.at("float"));
  return std::max(cost.flops / (peak * 1e3), cost.bytes / (memoryGBps * 1e3));
}

double CostModel::kernelRun(const KernelKey& key, bool generic) const {
  const double t = roofline(kernelCost(key), key.dtype);
  return (generic ? t / genericKernelEfficiency : t) + minKernelUs;
}

double CostModel::graphCompile(size_t nodes) const {
  return graphCompileBaseUs + graphCompilePerNodeUs * static_cast<double>(nodes);
}

double CostModel::graphLaunch(size_t kernels) const {
  return graphLaunchBaseUs + graphLaunchPerNodeUs * static_cast<double>(kernels);
}

void applyCostJson(CostModel& m, const std::string& text, const std::string& where) {
  nlohmann::json j;
  checkJsonDepth(text, where);
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kConfig, "{}: invalid JSON: {}", where, e.what());
  }
  if (!j.is_object()) fail(ErrorKind::kConfig, "{}: expected a JSON object", where);
  // A value is a number, or {"value": number, "source": "..."}; the source is kept.
  auto num = [&](const nlohmann::json& v, const std::string& key, const ValueRange& range) {
    const nlohmann::json* x = &v;
    if (v.is_object()) {
      for (auto& [k, _] : v.items())
        if (k != "value" && k != "source")
          fail(ErrorKind::kConfig, "{}: {}: unexpected field '{}' (value, source)", where, key, k);
      if (!v.contains("value")) fail(ErrorKind::kConfig, "{}: {}: missing 'value'", where, key);
      x = &v["value"];
      if (v.contains("source")) {
        if (!v["source"].is_string())
          fail(ErrorKind::kConfig, "{}: {}.source must be a string", where, key);
        m.sources[key] = v["source"].get<std::string>();
      }
    }
    if (!x->is_number()) fail(ErrorKind::kConfig, "{}: {} must be a number", where, key);
    const double d = x->get<double>();
    if (!(d >= range.lo && d <= range.hi))
      fail(ErrorKind::kConfig, "{}: {} = {} is outside its physical range [{}, {}] {}", where, key,
           d, range.lo, range.hi, range.unit);
    return d;
  };
  auto eraseSources = [&](const std::string& table) {
    std::erase_if(m.sources, [&](const auto& kv) { return kv.first.starts_with(table + "."); });
  };
  auto numMap = [&](const nlohmann::json& v, const std::string& key,
                    std::map<std::string, double, std::less<>>& out, const ValueRange& range) {
    if (!v.is_object()) fail(ErrorKind::kConfig, "{}: {} must be an object", where, key);
    for (auto& [k, x] : v.items()) out[k] = num(x, key + "." + k, range);
  };
  for (auto& [key, v] : j.items()) {
    if (key == "comment") continue;
    if (key == "name" || key == "description") {
      if (!v.is_string()) fail(ErrorKind::kConfig, "{}: {} must be a string", where, key);
      (key == "name" ? m.name : m.description) = v.get<std::string>();
    } else if (key == "peak_gflops") {
      numMap(v, key, m.peakGflops, kGflops);
    } else if (key == "kernel_compile_us") {
      // A profile's per-op table replaces the built-in one: the built-in figures are another
      // device's (a100-class), and an op the profile does not list costs its
      // kernel_compile_default_us, not a figure borrowed from that device.
      m.kernelCompileUs.clear();
      eraseSources(key);
      numMap(v, key, m.kernelCompileUs, kMicroseconds);
    } else if (key == "kernel_compile_log2_flops_us") {
      m.kernelCompileLog2FlopsUs.clear();
      eraseSources(key);
      numMap(v, key, m.kernelCompileLog2FlopsUs, kMicroseconds);
    } else if (key == "memory_capacity_bytes") {
      // A whole number of bytes: a capacity of 1 byte to 1 PiB (what an untrusted profile may
      // claim; above that, sums of plan workspaces could near int64's range).
      const double d = num(v, key, kMemoryBytes);
      if (d != std::floor(d))
        fail(ErrorKind::kConfig, "{}: memory_capacity_bytes = {} is not a whole number of bytes",
             where, d);
      m.memoryCapacityBytes = static_cast<int64_t>(d);
    } else if (key == "sync_policy") {
      const nlohmann::json* x = &v;
      if (v.is_object() && v.contains("value")) {
        if (v.contains("source") && v["source"].is_string())
          m.sources[key] = v["source"].get<std::string>();
        x = &v["value"];
      }
      if (!x->is_string()) fail(ErrorKind::kConfig, "{}: sync_policy must be a string", where);
      m.syncPolicy = parseSyncPolicy(x->get<std::string>(), where);
    } else if (auto renamed = renamedKeys().find(key); renamed != renamedKeys().end()) {
      fail(ErrorKind::kConfig, "{}: cost model key '{}' was replaced by {} (docs/cost-model.md)",
           where, key, renamed->second);
    } else {
      bool found = false;
      for (const ScalarKey& k : scalarKeys()) {
        if (key != k.key) continue;
        m.*k.field = num(v, key, *k.range);
        found = true;
      }
      if (!found)
        fail(ErrorKind::kConfig, "{}: unknown cost model key '{}' (known: {})", where, key,
             knownKeys());
    }
  }
  if (!m.peakGflops.count("float"))
    fail(ErrorKind::kConfig, "{}: peak_gflops needs a 'float' entry", where);
}

// A profile file starts from the built-in values, but not the capacity (CostModel's comment).
CostModel profileBase() {
  CostModel m;  // the ops' compile terms keep their sources unless the profile replaces them
  m.memoryCapacityBytes = 0;
  return m;
}

CostModel loadCostModel(const std::string& path) {
  CostModel m = profileBase();
  applyCostJson(m, readFile(path), path);
  return m;
}

std::vector<std::string> bundledProfiles() {
  std::vector<std::string> names;
  for (const auto& [name, text] : embeddedDeviceProfiles()) names.push_back(name);
  return names;
}

CostModel loadDeviceProfile(const std::string& nameOrFile) {
  const bool isFile = nameOrFile.find('/') != std::string::npos ||
                      (nameOrFile.size() > 5 && nameOrFile.ends_with(".json"));
  if (isFile) return loadCostModel(nameOrFile);
  for (const auto& [name, text] : embeddedDeviceProfiles()) {
    if (name != nameOrFile) continue;
    CostModel m = profileBase();
    applyCostJson(m, text, "examples/devices/" + name + ".json");
    return m;
  }
  std::string names;
  for (const std::string& n : bundledProfiles()) names += (names.empty() ? "" : ", ") + n;
  fail(ErrorKind::kConfig, "unknown device profile '{}' (bundled: {}; or a path to a .json file)",
       nameOrFile, names);
}

void applyCostOverride(CostModel& m, const std::string& assignment) {
  // Checked before the text becomes a JSON string (or a profile name in a report), which
  // nlohmann's dump refuses by throwing; the message leaves the bad bytes out.
  checkUtf8(assignment, "--cost");
  const auto eq = assignment.find('=');
  if (eq == std::string::npos)
    fail(ErrorKind::kConfig, "--cost expects key=value, got '{}'", assignment);
  const std::string key = assignment.substr(0, eq), value = assignment.substr(eq + 1);
  auto number = [&] {
    // strtod rather than stod: stod throws on a denormal such as 5e-324, which is a number,
    // just outside every range (the range check below says so, naming the key).
    char* end = nullptr;
    const double d = value.empty() || std::isspace(static_cast<unsigned char>(value[0]))
                         ? 0.0
                         : std::strtod(value.c_str(), &end);
    if (!end || end != value.c_str() + value.size())
      fail(ErrorKind::kConfig, "--cost {}: '{}' is not a number", key, value);
    if (!std::isfinite(d))
      fail(ErrorKind::kConfig, "--cost {}: '{}' is not a finite number", key, value);
    return d;
  };
  nlohmann::json j;
  const auto dot = key.find('.');
  if (key == "sync_policy" || key == "name") {
    j[key] = value;
  } else if (dot != std::string::npos) {
    j[key.substr(0, dot)][key.substr(dot + 1)] = number();
  } else {
    j[key] = number();
  }
  CostModel copy = m;  // nothing applied half-way
  applyCostJson(copy, j.dump(), "--cost " + assignment);
  // One entry of a per-op table is overridden, not the table replaced (as a profile's table
  // would be): the other ops keep their figures and sources.
  if (dot != std::string::npos) {
    const std::string table = key.substr(0, dot);
    auto keep = [&](auto& before, auto& after) {
      for (const auto& [op, us] : before) after.emplace(op, us);  // emplace: the new one stays
      for (const auto& [k, src] : m.sources)
        if (k.starts_with(table + ".")) copy.sources.emplace(k, src);
    };
    if (table == "kernel_compile_us") keep(m.kernelCompileUs, copy.kernelCompileUs);
    if (table == "kernel_compile_log2_flops_us")
      keep(m.kernelCompileLog2FlopsUs, copy.kernelCompileLog2FlopsUs);
  }
  // An overridden value no longer has its file's source.
  copy.sources[key] = "--cost " + assignment;
  m = std::move(copy);
}

std::string costModelToJson(const CostModel& m) {
  nlohmann::ordered_json j;
  auto val = [&](const std::string& key, const nlohmann::ordered_json& v) {
    auto it = m.sources.find(key);
    if (it == m.sources.end()) return v;
    nlohmann::ordered_json o;
    o["value"] = v;
    o["source"] = it->second;
    return o;
  };
  j["name"] = m.name;
  if (!m.description.empty()) j["description"] = m.description;
  j["peak_gflops"] = nlohmann::ordered_json::object();
  for (auto& [dt, g] : m.peakGflops) j["peak_gflops"][dt] = val("peak_gflops." + dt, g);
  for (const ScalarKey& k : scalarKeys()) {
    j[k.key] = val(k.key, m.*k.field);
    if (std::string(k.key) == "alloc_us") {
      j["kernel_compile_us"] = nlohmann::ordered_json::object();
      for (auto& [op, us] : m.kernelCompileUs)
        j["kernel_compile_us"][op] = val("kernel_compile_us." + op, us);
    }
    if (std::string(k.key) == "kernel_compile_default_us") {
      j["kernel_compile_log2_flops_us"] = nlohmann::ordered_json::object();
      for (auto& [op, us] : m.kernelCompileLog2FlopsUs)
        j["kernel_compile_log2_flops_us"][op] = val("kernel_compile_log2_flops_us." + op, us);
    }
  }
  j["sync_policy"] = val("sync_policy", m.syncPolicy == SyncPolicy::kPerOp ? "per_op" : "end_only");
  if (m.memoryCapacityBytes > 0)
    j["memory_capacity_bytes"] = val("memory_capacity_bytes", m.memoryCapacityBytes);
  return j.dump(2);
}

}  // namespace gearbox
