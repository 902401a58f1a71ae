#pragma once
// The documented cost model of the simulated device (docs/cost-model.md). Every figure it
// produces is MODELED, not measured, and is reported apart from measured host times.
// Defaults live in examples/cost_model.json too (a test keeps the two equal); a JSON file and
// `key=value` overrides replace them.

#include <map>
#include <string>

#include "compiler/compiler.h"

namespace gearbox {

enum class SyncPolicy { kPerOp, kEndOnly };

struct CostModel {
  // Modeled device compile latency per kernel, by op kernel name ("Add", "MatMul", ...).
  std::map<std::string, double, std::less<>> kernelCompileUs = {
      {"Add", 40}, {"MatMul", 900}, {"IndexSelect", 60}, {"Cat", 50}, {"CatGather", 80}};
  double graphCompileUs = 2000;                // per plan: graph optimisation, memory plan, load
  double launchUs = 5;                         // per single-kernel launch
  double graphLaunchUs = 8;                    // per whole-graph launch of a static plan
  double syncUs = 15;                          // per host-device synchronisation
  double allocUs = 2;                          // per device allocation that needs new memory
  SyncPolicy syncPolicy = SyncPolicy::kPerOp;  // dynamic mode: sync after every op (seed 001)

  double kernelCompile(std::string_view op) const;
};

CostModel loadCostModel(const std::string& path);  // Error(kIo/kConfig) naming the file
// Applies "key=value" (e.g. "launch_us=3", "kernel_compile_us.MatMul=500",
// "sync_policy=end_only"); Error(kConfig) on an unknown key or bad value.
void applyCostOverride(CostModel& m, const std::string& assignment);
std::string costModelToJson(const CostModel& m);
void applyCostJson(CostModel& m, const std::string& json, const std::string& where);

}  // namespace gearbox
