// `gearbox suggest-gears MODEL --trace T [--max-gears K] [--device-profile P] [--cost k=v]
// [--merge zip|product] [--max-memory BYTES] [--max-startup US] [--graph-pool shared|separate]
// [--gear-fallback pad|error|dynamic|eager|pad+dynamic|pad+eager] [-o gears.json]
// [--json report.json]`: chooses the gears that minimise the MODELED total of geared mode over
// the trace (with that fallback) within the memory and start-up budgets and prints them next to
// the usual choices (driver/gear_suggest.h, docs/gears.md "Choosing gears").
#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "driver/gear_suggest.h"
#include "driver/run_options.h"
#include "driver/trace.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "graph/text.h"
#include "tools/commands.h"

namespace gearbox::cli {
namespace {

struct SuggestCliOptions {
  std::string model, trace, deviceProfile, output, json, merge = "zip", maxMemory,
                                                         graphPool = "shared", gearFallback = "pad";
  double maxStartupUs = 0;
  std::vector<std::string> costOverrides;
  // Signed, so "-1" is read as -1 and refused, not as 2^64-1.
  int64_t maxGears = static_cast<int64_t>(kMaxGears);
  bool noReferences = false, noPasses = false;
};

void runSuggest(const SuggestCliOptions& o) {
  // Everything that can be checked before the search is: a bad --json path must not fail
  // after -o has been written.
  if (o.maxGears < 0)
    fail(ErrorKind::kConfig, "--max-gears {} is negative: TorchAir needs 2 to {} gears per dim",
         o.maxGears, kMaxGears);
  if (o.maxGears > static_cast<int64_t>(kMaxGears))
    fail(ErrorKind::kConfig, "--max-gears {} is above TorchAir's limit of {} gears", o.maxGears,
         kMaxGears);
  if (!std::isfinite(o.maxStartupUs) || o.maxStartupUs < 0)
    fail(ErrorKind::kConfig, "--max-startup {}: expected a finite number of us >= 0 (0: none)",
         o.maxStartupUs);
  if (!o.output.empty()) checkOutputPath("-o", o.output);
  if (!o.json.empty()) checkOutputPath("--json", o.json);
  checkOutputsAreNotInputs({{"-o", o.output}, {"--json", o.json}},
                           {{"MODEL", o.model}, {"--trace", o.trace}});
  const MergePolicy merge = parseMergePolicy(o.merge);
  const GearFallback fallback = parseGearFallback(o.gearFallback);
  CostModel cost =
      loadDeviceProfile(o.deviceProfile.empty() ? std::string(kDefaultProfile) : o.deviceProfile);
  for (const std::string& a : o.costOverrides) applyCostOverride(cost, a);
  const Graph g = loadGraph(o.model);
  const auto trace = loadTrace(o.trace, g);
  SuggestOptions so;
  // The memory budget: --max-memory, else the device profile's capacity (a run that exceeds it
  // fails, so a set above it is no suggestion).
  so.maxMemoryBytes =
      o.maxMemory.empty() ? cost.memoryCapacityBytes : parseByteSize(o.maxMemory, "--max-memory");
  so.maxStartupUs = o.maxStartupUs;
  const auto pool = parseGraphPool(o.graphPool);
  if (!pool)
    fail(ErrorKind::kConfig, "--graph-pool '{}': expected shared or separate", o.graphPool);
  so.pool = *pool;
  so.fallback = fallback;
  so.maxGears = static_cast<size_t>(o.maxGears);
  so.merge = merge;
  so.references = !o.noReferences;
  so.runPasses = !o.noPasses;
  const GearSuggestion s = suggestGears(g, trace, cost, so);
  // Files first, each written atomically, so a failed write leaves no half-written report.
  if (!o.output.empty()) writeFileAtomic(o.output, s.gearsJson + "\n");
  if (!o.json.empty()) {
    nlohmann::ordered_json j = suggestionJson(s, cost.name);
    j["model"] = o.model;
    j["trace"] = o.trace;
    writeJsonFile(o.json, j);
  }
  std::cout << formatSuggestion(s, cost.name);
}

}  // namespace

void registerSuggestGears(CLI::App& app) {
  auto o = std::make_shared<SuggestCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "suggest-gears",
      "Choose gears for a trace: minimise the MODELED compile + run total (docs/gears.md)");
  cmd->add_option("model", o->model, "Model file (.gbx)")->required();
  cmd->add_option("--trace", o->trace, "Trace (JSON lines of input shapes)")->required();
  cmd->add_option("--max-gears", o->maxGears, "At most this many gears (2..100, default 100)");
  cmd->add_option("--device-profile", o->deviceProfile,
                  "Device profile name or file (default a100-class)");
  cmd->add_option("--cost", o->costOverrides, "Override one profile value, key=value");
  cmd->add_option("--merge", o->merge, "dynamic_gears_merge_policy of the written gears");
  cmd->add_option("--max-memory", o->maxMemory,
                  "MODELED device memory budget of a gear set, e.g. 16GiB (default: the device "
                  "profile's capacity)");
  cmd->add_option("--max-startup", o->maxStartupUs,
                  "MODELED start-up budget in us: the up-front compiles (0: none)");
  cmd->add_option("--graph-pool", o->graphPool,
                  "How the gears' workspaces add up: shared (the largest) or separate (the sum)");
  cmd->add_option("--gear-fallback", o->gearFallback,
                  "The run's fallback the gears are for: pad (default), error, dynamic, eager, "
                  "pad+dynamic or pad+eager (sizes above the largest gear take that path)");
  cmd->add_option("-o,--output", o->output, "Write the suggested gears JSON (for --gears @FILE)");
  cmd->add_option("--json", o->json, "Write the candidate table as JSON");
  cmd->add_flag("--no-references", o->noReferences,
                "Skip the dynamic and auto reference rows (they run the trace model-only)");
  cmd->add_flag("--no-passes", o->noPasses, "Cost the graph as written, without passes");
  cmd->callback([o] { runSuggest(*o); });
}

}  // namespace gearbox::cli
