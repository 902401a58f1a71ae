#pragma once
// The device model (docs/cost-model.md): a device profile -- peak FLOP/s per dtype, memory
// bandwidth, launch/sync/allocation latencies, compile costs and dynamic-shape overheads --
// and the functions that turn what a call did into MODELED device time. Every figure it
// produces is modeled, not measured, and is reported apart from measured host times.
//
// Profiles are JSON files (examples/devices/<name>.json, bundled into the binary so
// `--device-profile NAME` works anywhere); every default value carries its source there.
// The built-in default is the accelerator-class profile `a100-class` (kDefaultProfile).

#include <map>
#include <string>
#include <vector>

#include "compiler/compiler.h"
#include "compiler/kernel_cost.h"

namespace gearbox {

enum class SyncPolicy { kPerOp, kEndOnly };

// The ops' own compile-cost terms (compiler/kernel_cost.h) by kernel name, and their sources
// keyed as in a profile ("kernel_compile_us.MatMul").
std::map<std::string, double, std::less<>> builtinKernelCompileUs();
std::map<std::string, double, std::less<>> builtinKernelCompileLog2FlopsUs();
std::map<std::string, std::string> builtinCompileSources();

struct CostModel {
  std::string name = "a100-class";
  std::string description;
  // Roofline: peak GFLOP/s per kernel dtype name ("float", "int32", "int64") and memory
  // bandwidth in GB/s (read + written), plus a fixed minimum per kernel.
  std::map<std::string, double, std::less<>> peakGflops = {
      {"float", 19500}, {"int32", 19500}, {"int64", 4875}};
  double memoryGBps = 1555;
  double minKernelUs = 2;
  double launchUs = 4;                // per single-kernel launch
  double graphLaunchBaseUs = 4;       // per whole-graph launch of a static plan ...
  double graphLaunchPerNodeUs = 0.5;  // ... plus this per kernel in the graph
  double syncUs = 6;                  // per host-device synchronisation
  double allocUs = 20;                // per device allocation that needs new memory
  // Kernel compile: a per-op base (kernelCompileDefaultUs for ops not listed) plus, where real
  // compilers search tilings, a size term per log2 of the kernel's FLOPs. The built-in figures
  // are the ops' own (compileCost<Op> in compiler/ops/<op>.cpp, each with its source); a
  // profile's table replaces them.
  std::map<std::string, double, std::less<>> kernelCompileUs = builtinKernelCompileUs();
  double kernelCompileDefaultUs = 100;
  std::map<std::string, double, std::less<>> kernelCompileLog2FlopsUs =
      builtinKernelCompileLog2FlopsUs();
  double graphCompileBaseUs = 2000;   // per plan: graph optimisation, memory plan, load ...
  double graphCompilePerNodeUs = 20;  // ... plus this per node of the graph
  // Dynamic shapes: host work per op per call -- shape inference on every op-by-op path
  // (eager, dynamic, fallback) and tiling for shape-generic kernels only -- and the speed of
  // a shape-generic kernel relative to a static one (0 < e <= 1).
  double hostShapeInferenceUs = 5;
  double hostTilingUs = 10;
  double genericKernelEfficiency = 0.88;
  SyncPolicy syncPolicy = SyncPolicy::kPerOp;  // dynamic mode: sync after every op (seed 001)
  // Device memory capacity in bytes, for the MODELED device memory (executor/device_memory.h):
  // a run whose compiled shapes need more fails or evicts (--on-oom). 0: unlimited. The built-in
  // value is a100-class's 40 GiB, but unlike every other key a profile *file* without
  // "memory_capacity_bytes" (every profile older than the key) does not inherit it: a capacity
  // is a device's own, so such a profile sets no limit (loadCostModel).
  int64_t memoryCapacityBytes = int64_t{40} << 30;
  // Where each value comes from, by JSON key ("memory_gbps", "kernel_compile_us.MatMul").
  std::map<std::string, std::string> sources = builtinCompileSources();

  // MODELED microseconds.
  double kernelCompile(const KernelKey& key) const;
  // Roofline time of one kernel at the static shapes of `key` (the shape actually run: the
  // padded one for a padded call), divided by the generic efficiency when `generic`, plus the
  // minimum kernel time.
  double kernelRun(const KernelKey& key, bool generic) const;
  double roofline(const KernelCost& cost, DType dtype) const;  // no minimum, no efficiency
  double graphCompile(size_t nodes) const;
  double graphLaunch(size_t kernels) const;
};

// The bundled profile used when none is given: the accelerator-class one, since the modeled
// verdicts are about a real accelerator (docs/cost-model.md, "Which profile is the default").
inline constexpr const char* kDefaultProfile = "a100-class";

// Names of the profiles bundled into the binary (examples/devices/*.json).
std::vector<std::string> bundledProfiles();
// A bundled profile by name, or a JSON file by path (anything with a '/' or ending in
// ".json"). Error(kConfig) naming the file, or listing the bundled names.
CostModel loadDeviceProfile(const std::string& nameOrFile);

CostModel loadCostModel(const std::string& path);  // a profile file; Error(kIo/kConfig)
// Applies "key=value" (e.g. "launch_us=3", "kernel_compile_us.MatMul=500",
// "peak_gflops.float=1000", "sync_policy=end_only"); Error(kConfig) on an unknown key or bad
// value. Keys of the old cost model that changed meaning are rejected naming the new ones.
void applyCostOverride(CostModel& m, const std::string& assignment);
// Profile JSON, with each value's source when known.
std::string costModelToJson(const CostModel& m);
void applyCostJson(CostModel& m, const std::string& json, const std::string& where);

// MODELED device time of a call or of a whole session, split the way `compare` prints it.
// paddingWasteUs is the part of computeUs spent on padded elements (not added again).
struct ModeledTime {
  double compileUs = 0;       // kernel and graph compiles
  double launchSyncUs = 0;    // launches, graph launches, syncs and device allocations
  double computeUs = 0;       // kernel execution (roofline + minimum kernel time)
  double paddingWasteUs = 0;  // of computeUs: padded shape minus the real shape
  double hostDynamicUs = 0;   // host shape inference and tiling per op per call
  double total() const { return compileUs + launchSyncUs + computeUs + hostDynamicUs; }
  ModeledTime& operator+=(const ModeledTime& o);
};

}  // namespace gearbox
