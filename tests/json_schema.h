#pragma once
// A small JSON Schema validator for the subset docs/report-schema.json uses: $ref to
// #/$defs/NAME, anyOf, type, enum, properties, required, additionalProperties (bool or schema),
// items, minimum. A schema keyword outside that subset is reported as an error, so the schema
// cannot quietly use something this validator ignores.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace gearbox::testing_util {

class JsonSchema {
 public:
  explicit JsonSchema(nlohmann::json root) : root_(std::move(root)) {}

  // Every violation, as "path: what" (empty: valid).
  std::vector<std::string> validate(const nlohmann::json& doc) const {
    std::vector<std::string> errors;
    check(root_, doc, "$", errors);
    return errors;
  }

 private:
  const nlohmann::json& resolve(const std::string& ref) const {
    const std::string prefix = "#/$defs/";
    if (ref.rfind(prefix, 0) != 0) throw std::runtime_error("unsupported $ref " + ref);
    return root_.at("$defs").at(ref.substr(prefix.size()));
  }

  static bool hasType(const nlohmann::json& v, const std::string& t) {
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    if (t == "integer") return v.is_number_integer();
    if (t == "number") return v.is_number();
    throw std::runtime_error("unknown type " + t);
  }

  void check(const nlohmann::json& s, const nlohmann::json& v, const std::string& path,
             std::vector<std::string>& errors) const {
    static const std::set<std::string> known = {
        "$schema", "$id",    "title", "description", "$defs",    "$ref",
        "anyOf",   "type",   "enum",  "properties",  "required", "additionalProperties",
        "items",   "minimum"};
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!known.count(it.key()))
        errors.push_back(fmt::format("schema uses unsupported keyword '{}'", it.key()));
    if (s.contains("$ref")) check(resolve(s["$ref"]), v, path, errors);
    if (s.contains("anyOf")) {
      bool any = false;
      std::vector<std::string> all;
      for (const auto& branch : s["anyOf"]) {
        std::vector<std::string> e;
        check(branch, v, path, e);
        if (e.empty()) any = true;
        all.insert(all.end(), e.begin(), e.end());
      }
      if (!any) {
        errors.push_back(fmt::format("{}: matches no anyOf branch", path));
        errors.insert(errors.end(), all.begin(), all.end());
      }
    }
    if (s.contains("type")) {
      bool ok = false;
      if (s["type"].is_array()) {
        for (const auto& t : s["type"]) ok = ok || hasType(v, t);
      } else {
        ok = hasType(v, s["type"]);
      }
      if (!ok) {
        errors.push_back(
            fmt::format("{}: expected type {}, got {}", path, s["type"].dump(), v.dump()));
        return;
      }
    }
    if (s.contains("enum")) {
      bool found = false;
      for (const auto& e : s["enum"]) found = found || e == v;
      if (!found)
        errors.push_back(fmt::format("{}: {} not in {}", path, v.dump(), s["enum"].dump()));
    }
    if (s.contains("minimum") && v.is_number() && v.get<double>() < s["minimum"].get<double>())
      errors.push_back(
          fmt::format("{}: {} below the minimum {}", path, v.dump(), s["minimum"].dump()));
    if (v.is_object()) {
      if (s.contains("required"))
        for (const auto& r : s["required"])
          if (!v.contains(r.get<std::string>()))
            errors.push_back(
                fmt::format("{}: missing required key '{}'", path, r.get<std::string>()));
      const nlohmann::json* props = s.contains("properties") ? &s["properties"] : nullptr;
      for (auto it = v.begin(); it != v.end(); ++it) {
        const std::string sub = path + "." + it.key();
        if (props && props->contains(it.key())) {
          check((*props)[it.key()], it.value(), sub, errors);
        } else if (s.contains("additionalProperties")) {
          const auto& ap = s["additionalProperties"];
          if (ap.is_boolean()) {
            if (!ap.get<bool>()) errors.push_back(fmt::format("{}: key not in the schema", sub));
          } else {
            check(ap, it.value(), sub, errors);
          }
        }
      }
    }
    if (v.is_array() && s.contains("items"))
      for (size_t i = 0; i < v.size(); ++i)
        check(s["items"], v[i], fmt::format("{}[{}]", path, i), errors);
  }

  nlohmann::json root_;
};

}  // namespace gearbox::testing_util

#ifdef GEARBOX_SOURCE_DIR
#include <fstream>
#include <sstream>

namespace gearbox::testing_util {

// Does a run or compare report conform to docs/report-schema.json? Every CLI test that reads a
// report checks this too, so every report the tests make is validated.
inline ::testing::AssertionResult conformsToReportSchema(const nlohmann::json& report) {
  static const JsonSchema schema = [] {
    std::ifstream f(std::string(GEARBOX_SOURCE_DIR) + "/docs/report-schema.json");
    std::stringstream ss;
    ss << f.rdbuf();
    return JsonSchema(nlohmann::json::parse(ss.str()));
  }();
  const auto errors = schema.validate(report);
  if (errors.empty()) return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure();
  for (size_t i = 0; i < errors.size() && i < 20; ++i) failure << errors[i] << "\n";
  return failure;
}

}  // namespace gearbox::testing_util
#endif
