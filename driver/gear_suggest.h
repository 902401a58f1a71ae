#pragma once
// suggest-gears (docs/gears.md, "Choosing gears"): which gears should a model use for a trace?
//
// The objective is the device model's MODELED total of geared mode over the trace, under the
// geared run's --gear-fallback: the up-front compile of every gear (graph compile + the
// kernels of its plan, each distinct kernel once) plus every call -- run on its exact gear,
// padded up to a covering one (whole-graph launch + sync + the plan's kernels at the gear's
// shape), or, under a dynamic or eager fallback, through that path (its compiles on first use,
// then op by op). Costs are computed per shape from the plan's kernel keys (specialising the
// compiled graph, as geared mode's plans do), cached by shape; no kernel runs. The search uses
// per-size terms (gears/gear_choice.h); every row of the table is then the exact MODELED total
// and peak memory of a geared run of its set, replayed over the trace in call order
// (device-pool misses, the dynamic fallback's plans), as the run reports them.

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compiler/specialize.h"
#include "executor/cost_model.h"
#include "executor/device_memory.h"
#include "executor/modes/gear_options.h"
#include "gears/gear_set.h"
#include "gears/padding.h"

namespace gearbox::cli {

// Input dims that vary in a trace and must take one value per call: all dims named by one
// symbol, or a single dim declared -1.
struct VaryingSymbol {
  std::string name;            // the symbol, or "input.dim" for a -1 dim
  std::vector<InputDim> dims;  // graph input order, dims ascending
};

// One row of the table: a gear set (or a reference mode) and its MODELED figures over the trace.
struct GearCandidate {
  std::string name;
  std::vector<std::vector<int64_t>> gears;  // per gear, one value per varying symbol
  bool reference = false;                   // a whole mode (dynamic, auto), not a gear set
  bool allowed = true;   // within TorchAir's rules (2..100 gears) and --max-gears
  std::string note;      // why not allowed, or what the row means
  int64_t compiles = 0;  // graph compiles (the gears, and the dynamic fallback's plans)
  int64_t paddedCalls = 0;
  int64_t fallbackCalls = 0;  // calls through the dynamic or eager fallback path
  double computeUs = 0;       // MODELED kernel execution over the trace
  double paddingWasteUs = 0;  // MODELED, part of computeUs
  double compileUs = 0;       // MODELED: every compile, up front and in calls
  double upFrontUs = 0;       // MODELED: the gears' up-front compiles, part of compileUs
  // MODELED: launch, sync, allocations, compute and host work (the op-by-op paths')
  double runUs = 0;
  double fallbackUs = 0;  // MODELED: the fallback calls' whole cost, their compiles included
  double totalUs() const { return compileUs + runUs; }
  double wastePct() const { return computeUs > 0 ? 100.0 * paddingWasteUs / computeUs : 0.0; }
  // MODELED device memory (executor/device_memory.h): the most a geared run of the set holds
  // at once -- weights + every gear's workspace by the graph pool + the device pool of the
  // padded copies and op-by-op intermediates + the call's inputs and outputs; a reference
  // mode's peak over the trace. 0 (not planned) for a set of more than 100 gears.
  int64_t memoryBytes = 0;
  // MODELED start-up: what geared mode compiles before the first call (--gear-compile eager,
  // the default): every gear's graph compile and kernels. 0 for a reference mode, which
  // compiles in its calls; a fallback compiles in its calls too.
  double startupUs() const { return reference ? 0.0 : upFrontUs; }
  bool best = false;
  // Not dominated by another allowed row in (MODELED total, memory, start-up): no other row is
  // at least as good in all three and better in one.
  bool pareto = false;
};

struct SuggestOptions {
  size_t maxGears = kMaxGears;  // --max-gears; TorchAir allows 2..100 per dim
  MergePolicy merge = MergePolicy::kZip;
  bool references = true;  // run dynamic and auto (model-only) for the reference rows
  bool runPasses = true;
  std::vector<std::string> disabledPasses;  // --disable-pass: as SessionOptions's
  // Budgets (0: none). A gear set above one is not allowed; the suggestion is the best set
  // within both. --max-memory defaults to the device profile's memory capacity.
  int64_t maxMemoryBytes = 0;           // --max-memory: MODELED device memory (GearCandidate)
  double maxStartupUs = 0;              // --max-startup: MODELED start-up (up-front compiles)
  GraphPool pool = GraphPool::kShared;  // --graph-pool: how the gears' workspaces add up
  // --gear-fallback of the run the gears are for: pad (the default: every call pads up to a
  // gear, so the largest size is one), error (every size a gear), dynamic or eager (no
  // padding: every other size takes that path), pad+dynamic or pad+eager (sizes above the
  // largest gear take that path, so rare large sizes can be left to it).
  GearFallback fallback = GearFallback::kPad;
};

struct GearSuggestion {
  std::vector<VaryingSymbol> symbols;
  std::vector<std::vector<int64_t>> gears;  // the suggestion: per gear, one value per symbol
  std::string gearsJson;                    // {"x": {"0": [...]}, ...}: what --gears takes
  MergePolicy merge = MergePolicy::kZip;
  std::string method;
  std::vector<std::string> notes;
  int64_t calls = 0;
  size_t distinctShapes = 0;
  bool padding = true;         // padding is legal (else only exact gears are possible)
  int64_t maxMemoryBytes = 0;  // the budgets in force (0: none)
  double maxStartupUs = 0;
  GraphPool pool = GraphPool::kShared;
  GearFallback fallback = GearFallback::kPad;  // what the gears were chosen for
  // What a geared run of the suggestion takes: `fallback`, except error when padding is
  // refused under pad (the gears are then exact, and pad would refuse the graph).
  GearFallback runFallback = GearFallback::kPad;
  std::vector<GearCandidate> candidates;  // [0] is the suggestion
};

// Chooses gears for `trace` on `g`. Error(kGear) when nothing varies, when padding is refused
// and exact gears would break the rules, or when no allowed gear set exists.
GearSuggestion suggestGears(const Graph& g, const std::vector<InputSignature>& trace,
                            const CostModel& cost, const SuggestOptions& options = {});

// The MODELED figures of gear sets (per gear, one value per varying symbol, in the order
// suggestGears finds the symbols) over `trace` under `fallback` and `pool`, computed as
// suggestGears computes its rows: what a geared run of each set reports.
std::vector<GearCandidate> evaluateGearSets(
    const Graph& g, const std::vector<InputSignature>& trace, const CostModel& cost,
    const std::vector<std::vector<std::vector<int64_t>>>& sets, bool runPasses = true,
    GearFallback fallback = GearFallback::kPad, GraphPool pool = GraphPool::kShared);

// The side-by-side table, one line per candidate, best marked with '*'.
std::string formatSuggestion(const GearSuggestion& s, const std::string& profile);
nlohmann::ordered_json suggestionJson(const GearSuggestion& s, const std::string& profile);

// vLLM's CUDA-graph capture sizes [1, 2, 4, 8, 16, 24, ..., 248, 256, 272, ...] up to the
// first value >= `largest` (docs/gears.md; /work reference recompile-policies.md), or only the
// first `maxCount` of them: the list grows with the largest size's value, not with the trace.
std::vector<int64_t> vllmCaptureSizes(int64_t largest,
                                      size_t maxCount = std::numeric_limits<size_t>::max());

// Candidates (vLLM sizes, powers of two, ...) with more gears than this are listed in the
// table as not allowed and not costed: costing a gear builds its shapes and kernel keys, so
// a two-line trace with a size of 1e9 would otherwise cost 62 million gears (and their
// memory). Far above TorchAir's 100, so every candidate that could be chosen is costed.
constexpr size_t kMaxCostedGears = 16384;

}  // namespace gearbox::cli
