#include "executor/cost_model.h"

#include <nlohmann/json.hpp>

#include "graph/error.h"
#include "graph/json_limits.h"
#include "graph/npy.h"

namespace gearbox {

double CostModel::kernelCompile(std::string_view op) const {
  auto it = kernelCompileUs.find(op);  // no string built: runs once per kernel compiled
  return it == kernelCompileUs.end() ? 100.0 : it->second;
}

static SyncPolicy parseSyncPolicy(const std::string& s, const std::string& where) {
  if (s == "per_op") return SyncPolicy::kPerOp;
  if (s == "end_only") return SyncPolicy::kEndOnly;
  fail(ErrorKind::kConfig, "{}: sync_policy must be per_op or end_only, got '{}'", where, s);
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
  auto num = [&](const nlohmann::json& v, const std::string& key) {
    if (!v.is_number() || v.get<double>() < 0)
      fail(ErrorKind::kConfig, "{}: {} must be a non-negative number", where, key);
    return v.get<double>();
  };
  for (auto& [key, v] : j.items()) {
    if (key == "kernel_compile_us") {
      if (!v.is_object())
        fail(ErrorKind::kConfig, "{}: kernel_compile_us must be an object", where);
      for (auto& [op, us] : v.items()) m.kernelCompileUs[op] = num(us, "kernel_compile_us." + op);
    } else if (key == "graph_compile_us") {
      m.graphCompileUs = num(v, key);
    } else if (key == "launch_us") {
      m.launchUs = num(v, key);
    } else if (key == "graph_launch_us") {
      m.graphLaunchUs = num(v, key);
    } else if (key == "sync_us") {
      m.syncUs = num(v, key);
    } else if (key == "alloc_us") {
      m.allocUs = num(v, key);
    } else if (key == "sync_policy") {
      if (!v.is_string()) fail(ErrorKind::kConfig, "{}: sync_policy must be a string", where);
      m.syncPolicy = parseSyncPolicy(v.get<std::string>(), where);
    } else if (key == "comment") {
      continue;
    } else {
      fail(ErrorKind::kConfig, "{}: unknown cost model key '{}'", where, key);
    }
  }
}

CostModel loadCostModel(const std::string& path) {
  CostModel m;
  applyCostJson(m, readFile(path), path);
  return m;
}

void applyCostOverride(CostModel& m, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos)
    fail(ErrorKind::kConfig, "--cost expects key=value, got '{}'", assignment);
  const std::string key = assignment.substr(0, eq), value = assignment.substr(eq + 1);
  nlohmann::json j;
  if (key == "sync_policy") {
    j[key] = value;
  } else if (key.rfind("kernel_compile_us.", 0) == 0) {
    try {
      j["kernel_compile_us"][key.substr(18)] = std::stod(value);
    } catch (const std::exception&) {
      fail(ErrorKind::kConfig, "--cost {}: '{}' is not a number", key, value);
    }
  } else {
    try {
      j[key] = std::stod(value);
    } catch (const std::exception&) {
      fail(ErrorKind::kConfig, "--cost {}: '{}' is not a number", key, value);
    }
  }
  applyCostJson(m, j.dump(), "--cost " + assignment);
}

std::string costModelToJson(const CostModel& m) {
  nlohmann::ordered_json j;
  j["kernel_compile_us"] = nlohmann::ordered_json::object();
  for (auto& [op, us] : m.kernelCompileUs) j["kernel_compile_us"][op] = us;
  j["graph_compile_us"] = m.graphCompileUs;
  j["launch_us"] = m.launchUs;
  j["graph_launch_us"] = m.graphLaunchUs;
  j["sync_us"] = m.syncUs;
  j["alloc_us"] = m.allocUs;
  j["sync_policy"] = m.syncPolicy == SyncPolicy::kPerOp ? "per_op" : "end_only";
  return j.dump(2);
}

}  // namespace gearbox
