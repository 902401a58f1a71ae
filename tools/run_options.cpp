#include "tools/run_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>

#include "compiler/compile_log.h"
#include "graph/error.h"
#include "graph/npy.h"

namespace gearbox::cli {

void addCommonOptions(CLI::App* cmd, RunOptions& o) {
  cmd->add_option("MODEL", o.model, "Model file (.gbx, docs/IR.md)")->required();
  cmd->add_option("--trace", o.trace, "Trace: one JSON object per line, input name -> shape")
      ->required();
  cmd->add_option("--device", o.device, "Simulated device: inline (deterministic) or stream")
      ->check(CLI::IsMember({"inline", "stream"}));
  cmd->add_option("--seed", o.seed, "Seed of the deterministic input data");
  // Range-checked on the text: a size_t option would otherwise take "-1" as 2^64-1.
  cmd->add_option("--kernel-cache-capacity", o.kernelCacheCapacity, "Kernel cache entries (LRU)")
      ->check(CLI::Range(1.0, static_cast<double>(kMaxCacheCapacity)));
  cmd->add_option("--plan-cache-capacity", o.planCacheCapacity, "Plan cache entries (LRU)")
      ->check(CLI::Range(1.0, static_cast<double>(kMaxCacheCapacity)));
  cmd->add_option("--recompile-limit", o.recompileLimit, "Plan compiles per graph (Dynamo: 8)");
  cmd->add_option("--on-recompile-limit", o.onRecompileLimit,
                  "fallback (run-only: misses take the dynamic path), error, unlimited")
      ->check(CLI::IsMember({"fallback", "error", "unlimited"}));
  cmd->add_option("--dynamic-dims", o.dynamicDims, "mark_dynamic: x:0,y:1");
  cmd->add_option("--static-dims", o.staticDims, "mark_static: x:1");
  cmd->add_option("--device-profile", o.deviceProfile,
                  fmt::format("Device profile for the MODELED times: a bundled name ({}) or a "
                              ".json file (docs/cost-model.md; default {})",
                              fmt::join(bundledProfiles(), ", "), kDefaultProfile));
  cmd->add_option("--cost-model", o.costModel,
                  "Same as --device-profile FILE (the older name of the option)");
  cmd->add_flag("--model-only", o.modelOnly,
                "Count and model every call without executing kernels (measured times and "
                "outputs are then meaningless)");
  cmd->add_option("--cost", o.costOverrides, "Cost model override key=value (repeatable)");
  cmd->add_option("--log", o.logFile, "Write the compile log (spdlog) to FILE");
  cmd->add_flag("--log-stdout", o.logStdout, "Also print the compile log on stdout");
  cmd->add_flag("--iter-markers", o.iterMarkers,
                "Log 'To compile op|=====iter<N>' before iteration N (seed 000 workflow)");
  cmd->add_flag("--explain", o.explain, "Print every failed guard of every recompile");
  cmd->add_flag("-q,--quiet", o.quiet, "Print only the summary");
  cmd->add_option("--gears", o.gears,
                  "Geared mode: gears as JSON {\"x1\": {\"0\": [2, 4]}} or @FILE");
  cmd->add_option("--merge", o.merge, "Gear merge policy: zip or product")
      ->check(CLI::IsMember({"zip", "product"}));
  cmd->add_option("--pad-to", o.padTo,
                  "Geared mode without gears: pad every call to this one shape, NAME=DIMS "
                  "(repeatable; dims sharing a symbol follow; beyond TorchAir's 2..100 rule)");
  cmd->add_option("--gear-fallback", o.gearFallback,
                  "A shape outside the gears: error, or pad up to the smallest covering gear")
      ->check(CLI::IsMember({"error", "pad"}));
  cmd->add_option("--history-limit", o.historyLimit,
                  "Keep only the last N per-iteration records (flat memory over long traces; the "
                  "JSON report then holds the last N and per_iteration_dropped; 0 = all)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--max-pad-bytes", o.maxPadBytes,
                  "Largest padded inputs + outputs one padded call may allocate (default 1 GiB)")
      ->check(CLI::Range(0.0, 1099511627776.0));
  cmd->add_flag("--no-passes", o.noPasses,
                "Skip the graph passes (dce, cat+index_select fusion; docs/passes.md)");
  addReferenceOptions(cmd, o.checkReference, o.tolerance);
  addKernelStoreOptions(cmd, o);
}

SessionOptions toSessionOptions(const RunOptions& o, Mode mode) {
  SessionOptions s;
  s.mode = mode;
  s.runPasses = !o.noPasses;
  s.device = o.device == "stream" ? DeviceKind::kStream : DeviceKind::kInline;
  if (!o.costModel.empty() && !o.deviceProfile.empty())
    fail(ErrorKind::kConfig, "give --device-profile or --cost-model, not both");
  s.cost = loadDeviceProfile(!o.deviceProfile.empty() ? o.deviceProfile
                             : !o.costModel.empty()   ? o.costModel
                                                      : std::string(kDefaultProfile));
  s.modelOnly = o.modelOnly;
  for (const std::string& a : o.costOverrides) applyCostOverride(s.cost, a);
  if (o.kernelCacheCapacity == 0 || o.planCacheCapacity == 0 ||
      o.kernelCacheCapacity > kMaxCacheCapacity || o.planCacheCapacity > kMaxCacheCapacity)
    fail(ErrorKind::kConfig, "cache capacities must be in [1, {}], got kernel {} and plan {}",
         kMaxCacheCapacity, o.kernelCacheCapacity, o.planCacheCapacity);
  s.kernelCacheCapacity = o.kernelCacheCapacity;
  s.historyLimit = o.historyLimit;
  s.planCacheCapacity = o.planCacheCapacity;
  if (o.recompileLimit < 1) fail(ErrorKind::kConfig, "--recompile-limit must be >= 1");
  s.recompileLimit = o.recompileLimit;
  s.onRecompileLimit =
      parseOnRecompileLimit(o.onRecompileLimit).value_or(OnRecompileLimit::kFallback);
  if (!o.dynamicDims.empty()) s.dynamicDims = parseDimMarks(o.dynamicDims);
  if (!o.staticDims.empty()) s.staticDims = parseDimMarks(o.staticDims);
  attachKernelStores(o, s);
  if (modeInfo(mode).needsGears) {
    if (o.gears.empty() && o.padTo.empty())
      fail(ErrorKind::kConfig, "{} mode needs --gears or --pad-to", modeName(mode));
    if (!o.gears.empty()) s.gears.json = gearsText(o.gears);
    for (const std::string& p : o.padTo) s.gears.padTo.push_back(parsePadTo(p));
    s.gears.merge = parseMergePolicy(o.merge);
    s.gears.padFallback = o.gearFallback == "pad";
    s.gears.maxPadBytes = o.maxPadBytes;
  }
  return s;
}

void configureLogFromOptions(const RunOptions& o) {
  configureLogging(LogOptions{o.logFile, o.logStdout, false});
}

nlohmann::ordered_json modeledJson(const ModeledTime& m) {
  nlohmann::ordered_json j;
  j["compile_us"] = m.compileUs;
  j["launch_sync_us"] = m.launchSyncUs;
  j["compute_us"] = m.computeUs;
  j["padding_waste_us"] = m.paddingWasteUs;
  j["padding_waste_pct"] = m.computeUs > 0 ? 100.0 * m.paddingWasteUs / m.computeUs : 0.0;
  j["host_dynamic_us"] = m.hostDynamicUs;
  j["total_us"] = m.total();
  return j;
}

double medianRunSeconds(const Session& s) {
  std::vector<double> t;
  for (const CallRecord& r : s.history()) t.push_back(r.runSeconds);
  if (t.empty()) return 0;
  std::sort(t.begin(), t.end());
  return t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
}

nlohmann::ordered_json reportJson(const Session& s, const std::string& model,
                                  const std::string& trace) {
  const SessionStats& st = s.stats();
  nlohmann::ordered_json j;
  j["model"] = model;
  j["trace"] = trace;
  j["mode"] = modeName(st.mode);
  j["device"] = deviceKindName(s.options().device);
  j["iterations"] = st.iterations;
  j["graph_compiles"] = st.graphCompiles;
  j["kernel_compiles"] = st.kernelCompiles;
  j["kernel_store_hits"] = st.kernelStoreHits;
  j["plan_cache_hits"] = st.planCacheHits;
  j["plan_cache_misses"] = st.planCacheMisses;
  j["kernel_cache_hits"] = st.kernelCacheHits;
  j["kernel_cache_misses"] = st.kernelCacheMisses;
  j["kernel_cache_evictions"] = st.kernelCache.evictions;
  j["plan_cache_evictions"] = st.planCache.evictions;
  j["launches"] = st.launches;
  j["syncs"] = st.syncs;
  j["allocations"] = st.allocations;
  j["fallback_runs"] = st.fallbackRuns;
  j["peak_bytes"] = st.peakBytes;
  j["measured_host_compile_seconds"] = st.compileSeconds;
  j["measured_median_run_seconds"] = medianRunSeconds(s);
  j["device_profile"] = s.options().cost.name;
  j["modeled_device_us"] = st.modeledDeviceUs;
  j["modeled_compile_us"] = st.modeledCompileUs;
  j["modeled"] = modeledJson(st.modeled);
  j["modeled_last_call_us"] = s.history().empty() ? 0.0 : s.history().back().modeledDeviceUs;
  if (s.options().modelOnly) j["model_only"] = true;
  if (modeInfo(st.mode).needsGears) {
    j["gears"] = st.gears;
    j["padded_calls"] = st.paddedCalls;
    // Padding waste: padded elements / real elements over the padded calls.
    j["padding_waste"] = st.realElements
                             ? static_cast<double>(st.paddedElements - st.realElements) /
                                   static_cast<double>(st.realElements)
                             : 0.0;
    j["gear_options"] = s.gearOptionLines();
  }
  j["passes_fired"] = st.passesFired;
  // Only with --history-limit: how many early iterations the report no longer lists.
  if (s.options().historyLimit > 0) j["per_iteration_dropped"] = s.historyDropped();
  auto& its = j["per_iteration"] = nlohmann::ordered_json::array();
  for (const CallRecord& r : s.history()) {
    nlohmann::ordered_json it;
    it["iteration"] = r.iteration;
    it["shapes"] = r.signature;
    it["graph_compiled"] = r.graphCompiled;
    it["plan"] = r.planId;
    it["reason"] = r.reason;
    it["guard_failures"] = r.guardFailures;
    it["kernels_compiled"] = r.kernelsCompiled;
    it["fallback"] = r.fallback;
    if (modeInfo(st.mode).needsGears) {
      it["gear"] = r.gear;
      it["padded"] = r.padded;
      it["real_elements"] = r.realElements;
      it["padded_elements"] = r.paddedElements;
    }
    it["launches"] = r.launches;
    it["syncs"] = r.syncs;
    it["allocations"] = r.allocations;
    it["measured_compile_seconds"] = r.compileSeconds;
    it["measured_run_seconds"] = r.runSeconds;
    it["modeled_device_us"] = r.modeledDeviceUs;
    if (r.modeled.paddingWasteUs > 0) it["modeled_padding_waste_us"] = r.modeled.paddingWasteUs;
    its.push_back(std::move(it));
  }
  return j;
}

std::string formatSeconds(double s) {
  if (s < 1e-6) return fmt::format("{:.0f} ns", s * 1e9);
  if (s < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.2f} s", s);
}

void printSummary(const Session& s, std::ostream& os) {
  const SessionStats& st = s.stats();
  os << fmt::format("mode {}, device {}, {} iterations\n", modeName(st.mode),
                    deviceKindName(s.options().device), st.iterations);
  os << fmt::format("  graph compiles {}, kernel compiles {} (+{} loaded from a kernel store)\n",
                    st.graphCompiles, st.kernelCompiles, st.kernelStoreHits);
  os << fmt::format("  plan cache: {} hits, {} misses, {} evictions (capacity {})\n",
                    st.planCacheHits, st.planCacheMisses, st.planCache.evictions,
                    st.planCache.capacity);
  os << fmt::format("  kernel cache: {} hits, {} misses, {} evictions (capacity {})\n",
                    st.kernelCacheHits, st.kernelCacheMisses, st.kernelCache.evictions,
                    st.kernelCache.capacity);
  os << fmt::format("  launches {}, syncs {}, allocations {}, fallback runs {}, peak bytes {}\n",
                    st.launches, st.syncs, st.allocations, st.fallbackRuns, st.peakBytes);
  if (modeInfo(st.mode).needsGears) {
    os << fmt::format("  gears compiled up front {}, padded calls {}, padding waste {:.1f}%\n",
                      st.gears, st.paddedCalls,
                      st.realElements
                          ? 100.0 * static_cast<double>(st.paddedElements - st.realElements) /
                                static_cast<double>(st.realElements)
                          : 0.0);
    for (const std::string& line : s.gearOptionLines()) os << "  " << line << "\n";
  }
  os << fmt::format("  measured: host compile {}, median run per call {}\n",
                    formatSeconds(st.compileSeconds), formatSeconds(medianRunSeconds(s)));
  const ModeledTime& m = st.modeled;
  os << fmt::format(
      "  modeled device time ({}, not measured): {:.1f} us = compile {:.1f} + "
      "launch/sync/alloc {:.1f} + compute {:.1f} + host dynamic-shape work {:.1f}; "
      "padding waste {:.1f} us ({:.1f}% of compute)\n",
      s.options().cost.name, m.total(), m.compileUs, m.launchSyncUs, m.computeUs, m.hostDynamicUs,
      m.paddingWasteUs, m.computeUs > 0 ? 100.0 * m.paddingWasteUs / m.computeUs : 0.0);
  if (s.options().modelOnly)
    os << "  model only: kernels were not executed; measured times are not kernel times\n";
}

std::vector<std::string> checkAsserts(const nlohmann::ordered_json& report,
                                      const std::vector<std::string>& asserts) {
  std::vector<std::string> failures;
  for (const std::string& a : asserts) {
    // The operator starts at the first comparison character; "<=" and friends are two long.
    const size_t at = a.find_first_of("<>=!");
    std::string op;
    if (at != std::string::npos) {
      op = a.substr(at, at + 1 < a.size() && a[at + 1] == '=' ? 2 : 1);
      if (op == "=" || op == "!") op.clear();
    }
    if (op.empty())
      fail(ErrorKind::kConfig, "--assert '{}': expected METRIC<=N (ops <=, >=, ==, !=, <, >)", a);
    auto trim = [](std::string v) {
      v.erase(0, v.find_first_not_of(" \t"));
      v.erase(v.find_last_not_of(" \t") + 1);
      return v;
    };
    const std::string metric = trim(a.substr(0, at));
    const std::string rhs = trim(a.substr(at + op.size()));
    if (!report.contains(metric) || !report[metric].is_number()) {
      std::string names;
      for (auto& [k, v] : report.items())
        if (v.is_number()) names += (names.empty() ? "" : ", ") + k;
      fail(ErrorKind::kConfig, "--assert '{}': unknown metric '{}' (one of: {})", a, metric, names);
    }
    double bound = 0;
    try {
      size_t used = 0;
      bound = std::stod(rhs, &used);
      if (used != rhs.size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      fail(ErrorKind::kConfig, "--assert '{}': '{}' is not a number", a, rhs);
    }
    const double v = report[metric].get<double>();
    const bool ok = op == "<="   ? v <= bound
                    : op == ">=" ? v >= bound
                    : op == "==" ? v == bound
                    : op == "!=" ? v != bound
                    : op == "<"  ? v < bound
                                 : v > bound;
    if (!ok)
      failures.push_back(
          fmt::format("assertion failed: {} (actual {} = {})", a, metric, report[metric].dump()));
  }
  return failures;
}

void writeJsonFile(const std::string& path, const nlohmann::ordered_json& j) {
  writeFileAtomic(path, j.dump(2) + "\n");
}

}  // namespace gearbox::cli
