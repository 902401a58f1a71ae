#include "driver/run_options.h"

#include <fmt/format.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>
#include <ostream>

#include "compiler/compile_log.h"
#include "executor/modes/geared.h"
#include "gearbox/version.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "graph/json_limits.h"

namespace gearbox::cli {

struct ProcessThreadCap::Control {
  explicit Control(int threads)
      : control(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(threads)) {}
  tbb::global_control control;
};

ProcessThreadCap::ProcessThreadCap(int threads) {
  if (threads < 0 || threads > kMaxThreads)
    fail(ErrorKind::kConfig, "--threads {}: expected 0 (no cap) to {}", threads, kMaxThreads);
  if (threads > 0) control_ = std::make_unique<Control>(threads);
}
ProcessThreadCap::~ProcessThreadCap() = default;

SessionOptions toSessionOptions(const RunOptions& o, Mode mode) {
  SessionOptions s;
  s.mode = mode;
  s.runPasses = !o.noPasses;
  s.disabledPasses = o.disablePasses;
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
  s.threads = o.threads;
  s.historyLimit = o.historyLimit;
  s.planCacheCapacity = o.planCacheCapacity;
  if (!o.deviceMemory.empty())
    s.deviceMemoryBytes = parseByteSize(o.deviceMemory, "--device-memory");
  s.outputPoolBytes = o.outputPool == "0"
                          ? 0  // the pool off
                          : static_cast<size_t>(parseByteSize(o.outputPool, "--output-pool"));
  const auto pool = parseGraphPool(o.graphPool);
  if (!pool) fail(ErrorKind::kConfig, "--graph-pool {}: expected shared or separate", o.graphPool);
  s.graphPool = *pool;
  const auto oom = parseOnOom(o.onOom);
  if (!oom) fail(ErrorKind::kConfig, "--on-oom {}: expected error or evict", o.onOom);
  s.onOom = *oom;
  if (o.recompileLimit < 1) fail(ErrorKind::kConfig, "--recompile-limit must be >= 1");
  s.recompileLimit = o.recompileLimit;
  s.accumulatedRecompileLimit = o.accumulatedRecompileLimit;
  s.onRecompileLimit =
      parseOnRecompileLimit(o.onRecompileLimit).value_or(OnRecompileLimit::kFallback);
  if (!o.dynamicDims.empty()) s.dynamicDims = parseDimMarks(o.dynamicDims);
  if (!o.staticDims.empty()) s.staticDims = parseDimMarks(o.staticDims);
  attachKernelStores(o, s);
  for (const std::string& a : o.modeOptions) {
    const size_t dot = a.find('.'), eq = a.find('=');
    if (dot == std::string::npos || eq == std::string::npos || dot > eq)
      fail(ErrorKind::kConfig, "--mode-option {}: expected MODE.NAME=VALUE", a);
    const auto m = parseMode(a.substr(0, dot));
    if (!m)
      fail(ErrorKind::kConfig, "--mode-option {}: unknown mode '{}' (one of {})", a,
           a.substr(0, dot), joinModeNames(ModeSet::kAll));
    if (*m == mode) s.modeOptions[a.substr(dot + 1, eq - dot - 1)] = a.substr(eq + 1);
  }
  if (modeInfo(mode).needsGears) {
    if (o.gears.empty() && o.padTo.empty())
      fail(ErrorKind::kConfig, "{} mode needs --gears or --pad-to", modeName(mode));
    GearOptions& gears = gearOptions(s);
    if (!o.gears.empty()) gears.json = gearsText(o.gears);
    for (const std::string& p : o.padTo) gears.padTo.push_back(parsePadTo(p));
    gears.merge = parseMergePolicy(o.merge);
    gears.fallback = parseGearFallback(o.gearFallback);
    gears.compile = parseGearCompile(o.gearCompile);
    gears.maxPadBytes = o.maxPadBytes;
  }
  return s;
}

NamedPaths inputPaths(const RunOptions& o) {
  NamedPaths in = {{"MODEL", o.model}, {"--trace", o.trace}};
  if (o.gears.size() > 1 && o.gears[0] == '@') in.emplace_back("--gears", o.gears.substr(1));
  in.emplace_back("--device-profile", o.deviceProfile);
  in.emplace_back("--cost-model", o.costModel);
  return in;
}

void configureLogFromOptions(const RunOptions& o, std::ostream& warnings) {
  // Warnings go through the deduplicating sink (driver/run_report.h) instead of stderr directly.
  configureLogging(LogOptions{o.logFile, o.logStdout, true});
  warningLog().clear();
  installWarningSink(o.quiet ? nullptr : &warnings);
}

Verbosity verbosityOf(const RunOptions& o) {
  if (o.quiet && o.verbose) fail(ErrorKind::kConfig, "give -q or -v, not both");
  return o.quiet ? Verbosity::kQuiet : o.verbose ? Verbosity::kVerbose : Verbosity::kDefault;
}

std::string gearsText(const std::string& arg) {
  if (arg.empty() || arg[0] != '@') return arg;
  const std::string path = arg.substr(1);
  try {
    return readFile(path);  // regular files only: a FIFO or directory is an error, not a hang
  } catch (const Error& e) {
    fail(ErrorKind::kIo, "cannot open gears file '{}': {}", path, e.what());
  }
}

std::pair<std::string, Shape> parsePadTo(const std::string& arg) {
  InputDecl d = parseShapeArg(arg, "--pad-to");
  for (int k = 0; k < d.shape.rank(); ++k)
    if (!isStaticDim(d.shape[k]))
      fail(ErrorKind::kConfig, "--pad-to '{}': dim {} must be a size", arg, k);
  return {d.name, d.shape};
}

}  // namespace gearbox::cli
