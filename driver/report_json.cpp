#include "driver/report_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>
#include <ostream>

#include "compiler/compile_log.h"
#include "driver/run_options.h"
#include "executor/modes/geared.h"
#include "gearbox/version.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "graph/json_limits.h"

namespace gearbox::cli {

nlohmann::ordered_json toolJson() {
  return {{"name", "gearbox"}, {"version", GEARBOX_VERSION}};
}

nlohmann::ordered_json configJson(const SessionOptions& s, const RunOptions* o) {
  nlohmann::ordered_json c;
  c["mode"] = modeName(s.mode);
  c["device"] = deviceKindName(s.device);
  c["seed"] = o ? o->seed : 0;
  c["device_profile"] = s.cost.name;
  c["model_only"] = s.modelOnly;
  c["passes"] = s.runPasses;
  if (!s.disabledPasses.empty()) c["disabled_passes"] = s.disabledPasses;
  c["kernel_cache_capacity"] = s.kernelCacheCapacity;
  c["plan_cache_capacity"] = s.planCacheCapacity;
  c["threads"] = s.threads;
  c["recompile_limit"] = s.recompileLimit;
  c["on_recompile_limit"] = onRecompileLimitName(s.onRecompileLimit);
  c["accumulated_recompile_limit"] = s.accumulatedRecompileLimit;
  auto marks = [](const DimMarks& m) {
    auto a = nlohmann::ordered_json::array();
    for (const auto& [name, dim] : m) a.push_back({{"input", name}, {"dim", dim}});
    return a;
  };
  {
    // The capacity in force: --device-memory, else the profile's (0: unlimited).
    nlohmann::ordered_json mem;
    mem["capacity_bytes"] =
        s.deviceMemoryBytes > 0 ? s.deviceMemoryBytes : s.cost.memoryCapacityBytes;
    mem["graph_pool"] = graphPoolName(s.graphPool);
    mem["on_oom"] = onOomName(s.onOom);
    c["memory"] = std::move(mem);
  }
  c["dynamic_dims"] = marks(s.dynamicDims);
  c["static_dims"] = marks(s.staticDims);
  if (!s.modeOptions.empty()) {
    auto& mo = c["mode_options"] = nlohmann::ordered_json::object();
    for (const auto& [name, value] : s.modeOptions) mo[name] = value;
  }
  if (modeInfo(s.mode).needsGears) {
    const GearOptions* given = findGearOptions(s);
    const GearOptions gears = given ? *given : GearOptions{};
    nlohmann::ordered_json g;
    // The report is written for a failed run too, so the gears text may be the one the session
    // refused: a document nested too deep is kept as a string, since building (and later
    // dumping and destroying) it as JSON recurses once per level (graph/json_limits.h).
    try {
      checkJsonDepth(gears.json, "gears JSON");
      g["spec"] = nlohmann::ordered_json::parse(gears.json);
    } catch (const Error&) {
      g["spec"] = gears.json;
    } catch (const nlohmann::json::exception&) {
      g["spec"] = gears.json;  // malformed: kept as given
    }
    g["merge"] = gears.merge == MergePolicy::kProduct ? "product" : "zip";
    g["fallback"] = gearFallbackName(gears.fallback);
    g["compile"] = gearCompileName(gears.compile);
    g["max_pad_bytes"] = gears.maxPadBytes;
    if (!gears.padTo.empty()) {
      nlohmann::ordered_json pad = nlohmann::ordered_json::object();
      for (const auto& [name, shape] : gears.padTo) {
        nlohmann::ordered_json dims = nlohmann::ordered_json::array();
        for (int d = 0; d < shape.rank(); ++d) dims.push_back(shape[d]);
        pad[name] = std::move(dims);
      }
      g["pad_to"] = std::move(pad);
    }
    c["gears"] = std::move(g);
  } else {
    c["gears"] = nullptr;
  }
  // The user's limit: without one the CLI keeps only a short window itself and streams the
  // records (RunTracker::spoolIterations), which is not a limit on the report.
  c["history_limit"] = o ? o->historyLimit : s.historyLimit;
  c["iterations"] = o ? o->iterations : "all";
  return c;
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

nlohmann::ordered_json startupJson(const StartupStats& s) {
  nlohmann::ordered_json j;
  j["up_front_graph_compiles"] = s.graphCompiles;
  j["measured_prepare_seconds"] = s.seconds;
  j["modeled_up_front_compile_us"] = s.modeledCompileUs;
  j["measured_first_call_seconds"] = s.firstCallSeconds;
  j["modeled_first_call_us"] = s.firstCallModeledUs;
  return j;
}

double medianRunSeconds(const Session& s, const RunTracker* tracker) {
  // Exact while the session still holds every call; otherwise the tracker's histogram, which
  // saw them all.
  const bool complete = s.historyDropped() == 0;
  if (!complete && tracker && tracker->calls() > 0) return tracker->medianRunSeconds();
  std::vector<double> t;
  for (const CallRecord& r : s.history()) t.push_back(r.runSeconds);
  if (t.empty()) return 0;
  std::sort(t.begin(), t.end());
  return t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
}

nlohmann::ordered_json modeledMemoryJson(const ModeledMemory& m, const SessionOptions& o) {
  nlohmann::ordered_json j;
  j["resident_bytes"] = m.residentBytes;
  j["peak_bytes"] = m.peakBytes;
  j["weights_bytes"] = m.weightsBytes;
  j["workspace_bytes"] = m.workspaceBytes;
  j["peak_workspace_bytes"] = m.peakWorkspaceBytes;
  j["op_by_op_bytes"] = m.opByOpBytes;
  j["resident_plans"] = m.residentPlans;
  j["graph_pool"] = graphPoolName(m.pool);
  j["capacity_bytes"] = m.capacityBytes;
  j["evictions"] = m.evictions;
  j["source"] = fmt::format(
      "MODELED, not measured (docs/cost-model.md, \"Device memory\"); capacity from {}",
      m.capacityBytes > 0 ? memoryCapacitySource(o) : std::string("nowhere: unlimited"));
  return j;
}

nlohmann::ordered_json reportJson(const Session& s, const std::string& model,
                                  const std::string& trace, const ReportExtras& extras) {
  const SessionStats& st = s.stats();
  nlohmann::ordered_json j;
  j["schema_version"] = kReportSchemaVersion;
  j["tool"] = toolJson();
  j["complete"] = true;  // the caller marks a failed run incomplete
  j["model"] = model;
  j["trace"] = trace;
  j["mode"] = modeName(st.mode);
  j["device"] = deviceKindName(s.options().device);
  j["config"] = configJson(s.options(), extras.options);
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
  // MODELED device memory (executor/device_memory.h): the two figures --assert can bound, and
  // every term.
  j["modeled_resident_bytes"] = st.memory.residentBytes;
  j["modeled_peak_bytes"] = st.memory.peakBytes;
  j["modeled_memory"] = modeledMemoryJson(st.memory, s.options());
  j["measured_host_compile_seconds"] = st.compileSeconds;
  j["measured_median_run_seconds"] = medianRunSeconds(s, extras.tracker);
  // Host memory of the outputs static plans returned (executor/output_pool.h): exact counters
  // for a given program, but what the caller holds decides the hits, so no MODELED term uses it.
  j["host_output_pool"] = {{"requests", st.outputPool.requests},
                           {"hits", st.outputPool.hits},
                           {"misses", st.outputPool.misses},
                           {"evictions", st.outputPool.evictions},
                           {"buffers_cached", st.outputPool.buffersCached},
                           {"bytes_cached", st.outputPool.bytesCached},
                           {"peak_bytes_cached", st.outputPool.peakBytesCached},
                           {"capacity_bytes", st.outputPool.capacityBytes}};
  j["device_profile"] = s.options().cost.name;
  j["modeled_device_us"] = st.modeledDeviceUs;
  j["modeled_compile_us"] = st.modeledCompileUs;
  j["modeled"] = modeledJson(st.modeled);
  j["modeled_last_call_us"] = s.history().empty() ? 0.0 : s.history().back().modeledDeviceUs;
  j["startup"] = startupJson(st.startup);
  if (s.options().modelOnly) j["model_only"] = true;
  // Padded geared calls are counted here and not as plan-cache misses (a gear served them); the
  // mode's counter, 0 in a mode that pads nothing.
  j["padded_calls"] = st.modeCounter("padded_calls");
  j["warnings"] = 0;
  for (const WarningLog::Entry& w : warningLog().entries())
    j["warnings"] = j["warnings"].get<int64_t>() + w.count;
  if (modeInfo(st.mode).needsGears) {
    const GearedCounters gears = gearedCounters(st);
    j["gears"] = gears.gears;
    // Padding waste: padded elements / real elements over the padded calls.
    j["padding_waste"] = gears.paddingWaste();
    j["gear_options"] = s.modeReportLines();
  }
  // The mode's own counters, whatever the mode (ModeStrategy::counters), but those the keys
  // above already report.
  nlohmann::ordered_json mc = nlohmann::ordered_json::object();
  for (const ModeCounter& c : st.modeCounters)
    if (c.place == ModeReportPlace::kModeSection) mc[c.name] = c.value;
  if (!mc.empty()) j["mode_counters"] = std::move(mc);
  j["passes_fired"] = st.passesFired;
  // Only with --history-limit: how many early iterations the report no longer lists.
  const size_t userLimit = extras.options ? extras.options->historyLimit : s.options().historyLimit;
  if (userLimit > 0) j["per_iteration_dropped"] = s.historyDropped();
  if (extras.tracker) {
    j["recompile_summary"] = extras.tracker->summaryJson();
    auto& w = j["warning_messages"] = nlohmann::ordered_json::array();
    for (const WarningLog::Entry& e : warningLog().entries())
      w.push_back({{"message", e.message}, {"count", e.count}});
  }
  // Streamed records are spliced in by writeReportFile, after every other key.
  if (extras.tracker && extras.tracker->spooling()) return j;
  auto& its = j["per_iteration"] = nlohmann::ordered_json::array();
  for (const CallRecord& r : s.history()) {
    if (extras.detail == IterationDetail::kNone) break;
    if (extras.detail == IterationDetail::kCompiles && !r.graphCompiled &&
        r.kernelsCompiled.empty())
      continue;
    its.push_back(iterationJson(s.graph(), r));
  }
  return j;
}

void printSummary(const Session& s, std::ostream& os, const RunTracker* tracker) {
  const SessionStats& st = s.stats();
  os << fmt::format("mode {}, device {}, {} {}\n", modeName(st.mode),
                    deviceKindName(s.options().device), st.iterations,
                    st.iterations == 1 ? "iteration" : "iterations");
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
    const GearedCounters gears = gearedCounters(st);
    const GearOptions* options = findGearOptions(s.options());
    const bool lazy = options && options->compile == GearCompile::kLazy;
    os << fmt::format("  gears {} {}, padded calls {}, padding waste {:.1f}%\n",
                      lazy ? "compiled on first use" : "compiled up front",
                      lazy ? fmt::format("{} of {}", gears.gearsCompiledOnFirstUse, gears.gears)
                           : std::to_string(gears.gears),
                      gears.paddedCalls, 100.0 * gears.paddingWaste());
    for (const std::string& line : s.modeReportLines()) os << "  " << line << "\n";
    // Start-up against the first call (--gear-compile moves compiles from one to the other).
    const StartupStats& up = st.startup;
    os << fmt::format(
        "  start-up: {} up front, measured {}, modeled compile {:.1f} us; first call: "
        "measured {}, modeled {:.1f} us\n",
        fmt::format("{} graph {}", up.graphCompiles,
                    up.graphCompiles == 1 ? "compile" : "compiles"),
        formatSeconds(up.seconds), up.modeledCompileUs, formatSeconds(up.firstCallSeconds),
        up.firstCallModeledUs);
  }
  std::string line;
  for (const ModeCounter& c : st.modeCounters)
    if (c.place == ModeReportPlace::kModeSection)
      line += fmt::format("{}{} {}", line.empty() ? "" : ", ", c.name, c.value);
  if (!line.empty()) os << fmt::format("  {}: {}\n", modeName(st.mode), line);
  os << fmt::format("  measured: host compile {}, median run per call {}\n",
                    formatSeconds(st.compileSeconds), formatSeconds(medianRunSeconds(s, tracker)));
  const ModeledTime& m = st.modeled;
  os << fmt::format(
      "  modeled device time ({}, not measured): {:.1f} us = compile {:.1f} + "
      "launch/sync/alloc {:.1f} + compute {:.1f} + host dynamic-shape work {:.1f}; "
      "padding waste {:.1f} us ({:.1f}% of compute)\n",
      s.options().cost.name, m.total(), m.compileUs, m.launchSyncUs, m.computeUs, m.hostDynamicUs,
      m.paddingWasteUs, m.computeUs > 0 ? 100.0 * m.paddingWasteUs / m.computeUs : 0.0);
  const ModeledMemory& mem = st.memory;
  const auto mib = humanBytes;
  os << fmt::format(
      "  modeled device memory ({}, not measured): resident {} = weights {} + workspace {} ({} "
      "{}, graph pool {}) + op-by-op pool {}; peak {}; capacity {}{}\n",
      s.options().cost.name, mib(mem.residentBytes), mib(mem.weightsBytes), mib(mem.workspaceBytes),
      mem.residentPlans, mem.residentPlans == 1 ? "plan" : "plans", graphPoolName(mem.pool),
      mib(mem.opByOpBytes), mib(mem.peakBytes),
      mem.capacityBytes > 0 ? mib(mem.capacityBytes) : std::string("unlimited"),
      mem.evictions > 0 ? fmt::format(", {} plans evicted to fit", mem.evictions) : "");
  if (s.options().modelOnly)
    os << "  model only: kernels were not executed; measured times are not kernel times\n";
}

std::vector<Assertion> parseAsserts(const std::vector<std::string>& asserts,
                                    const std::vector<std::string>& modes) {
  std::vector<Assertion> out;
  for (const std::string& text : asserts) {
    // The text goes into messages, the JSON report and JUnit XML attributes: control
    // characters (which strtod would also skip as leading space, e.g. \v) and bytes that are
    // not UTF-8 are refused up front, without echoing them.
    checkUtf8(text, "--assert");
    for (size_t i = 0; i < text.size(); ++i)
      if (static_cast<unsigned char>(text[i]) < 0x20 || text[i] == 0x7f)
        fail(ErrorKind::kConfig, "--assert: control character 0x{:02x} at offset {}",
             static_cast<unsigned char>(text[i]), i);
    Assertion a;
    a.text = text;
    // The operator starts at the first comparison character; "<=" and friends are two long.
    const size_t at = text.find_first_of("<>=!");
    if (at != std::string::npos) {
      a.op = text.substr(at, at + 1 < text.size() && text[at + 1] == '=' ? 2 : 1);
      if (a.op == "=" || a.op == "!") a.op.clear();
    }
    if (a.op.empty())
      fail(ErrorKind::kConfig, "--assert '{}': expected METRIC<=N (ops <=, >=, ==, !=, <, >)",
           text);
    auto trim = [](std::string v) {
      v.erase(0, v.find_first_not_of(" \t"));
      v.erase(v.find_last_not_of(" \t") + 1);
      return v;
    };
    std::string metric = trim(text.substr(0, at));
    const std::string rhs = trim(text.substr(at + a.op.size()));
    // MODE.METRIC (compare): the prefix up to the first dot, when it names a mode.
    const size_t dot = metric.find('.');
    if (dot != std::string::npos) {
      a.mode = metric.substr(0, dot);
      metric = metric.substr(dot + 1);
      if (modes.empty())
        fail(ErrorKind::kConfig, "--assert '{}': a MODE.METRIC bound needs gearbox compare", text);
      if (std::find(modes.begin(), modes.end(), a.mode) == modes.end())
        fail(ErrorKind::kConfig, "--assert '{}': mode '{}' is not compared (modes: {})", text,
             a.mode, fmt::join(modes, ", "));
    }
    if (metric.rfind("compiles_after(", 0) == 0 && metric.back() == ')') {
      const std::string n = metric.substr(15, metric.size() - 16);
      try {
        size_t used = 0;
        a.after = std::stoll(n, &used);
        if (used != n.size() || a.after < 0) throw std::invalid_argument("bad");
      } catch (const std::exception&) {
        fail(ErrorKind::kConfig, "--assert '{}': compiles_after(N) needs an iteration N >= 0",
             text);
      }
    } else if (metric == "compiles_after(N)" ||
               std::find(knownMetrics().begin(), knownMetrics().end(), metric) ==
                   knownMetrics().end()) {
      fail(ErrorKind::kConfig, "--assert '{}': unknown metric '{}' (one of: {})", text, metric,
           fmt::join(knownMetrics(), ", "));
    }
    a.metric = metric;
    try {
      size_t used = 0;
      // stod would skip leading whitespace itself; the bound starts with its sign or digit.
      if (rhs.empty() || !(std::isdigit(static_cast<unsigned char>(rhs[0])) || rhs[0] == '-' ||
                           rhs[0] == '+' || rhs[0] == '.'))
        throw std::invalid_argument("not a number");
      a.bound = std::stod(rhs, &used);
      if (used != rhs.size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      fail(ErrorKind::kConfig, "--assert '{}': '{}' is not a number", text, rhs);
    }
    // nan compares false with everything (the bound would always fail) and inf bounds nothing.
    if (!std::isfinite(a.bound))
      fail(ErrorKind::kConfig, "--assert '{}': the bound must be a finite number, got '{}'", text,
           rhs);
    out.push_back(std::move(a));
  }
  return out;
}

AssertResult evaluateAssert(const Assertion& a, const nlohmann::ordered_json& report,
                            const RunTracker* tracker, const std::string& modeLabel) {
  AssertResult r;
  r.assertion = modeLabel.empty() || !a.mode.empty() ? a.text : modeLabel + ": " + a.text;
  double v = 0;
  std::string shown;
  if (a.after >= 0) {
    if (!tracker) {
      r.ok = false;
      r.message = fmt::format("assertion not evaluated: {} (no per-call record)", a.text);
      return r;
    }
    v = static_cast<double>(tracker->compilesAfter(a.after));
    shown = fmt::format("{}", tracker->compilesAfter(a.after));
  } else if (report.contains(a.metric) && report[a.metric].is_number()) {
    v = report[a.metric].get<double>();
    shown = dumpJson(report[a.metric]);
  } else {
    r.ok = false;
    r.message = fmt::format("assertion failed: {} ({} is not in the {} report)", a.text, a.metric,
                            report.value("mode", std::string("run")));
    return r;
  }
  const double bound = a.bound;
  r.ok = a.op == "<="   ? v <= bound
         : a.op == ">=" ? v >= bound
         : a.op == "==" ? v == bound
         : a.op == "!=" ? v != bound
         : a.op == "<"  ? v < bound
                        : v > bound;
  if (!r.ok)
    r.message = fmt::format("assertion failed: {}{} (actual {} = {})",
                            modeLabel.empty() || !a.mode.empty() ? "" : modeLabel + ": ", a.text,
                            a.metric, shown);
  return r;
}

std::vector<std::string> checkAsserts(const nlohmann::ordered_json& report,
                                      const std::vector<std::string>& asserts) {
  std::vector<std::string> failures;
  for (const Assertion& a : parseAsserts(asserts)) {
    AssertResult r = evaluateAssert(a, report, nullptr);
    if (!r.ok) failures.push_back(r.message);
  }
  return failures;
}

void writeJsonFile(const std::string& path, const nlohmann::ordered_json& j) {
  writeFileAtomic(path, dumpJson(j, 2) + "\n");
}

void writeReportFile(const std::string& path, const nlohmann::ordered_json& report,
                     const RunTracker* tracker) {
  if (!tracker || !tracker->spooling() || !report.is_object() || report.empty())
    return writeJsonFile(path, report);
  writeFileAtomicStream(path, [&](const ByteSink& sink) {
    std::string head = dumpJson(report, 2);  // "{\n  ...\n}": the closing brace is dropped
    head.resize(head.rfind('}'));
    while (!head.empty() && head.back() == '\n') head.pop_back();
    sink(head);
    sink(",\n  \"per_iteration\": [");
    tracker->copySpool(sink);
    sink("\n  ]\n}\n");
  });
}

}  // namespace gearbox::cli
