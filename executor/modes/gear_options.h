#pragma once
// Geared mode's options (executor/modes/geared.cpp): the gear specs, the merge policy, what
// to do with a shape outside the gears and when the gears compile. A SessionOptions carries
// them as its mode's structured options (SessionOptions::modeConfig), set through
// gearOptions(); the session knows nothing of gears, and the geared mode reads and checks them
// when the session is built.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gears/gear_set.h"
#include "gears/padding.h"

namespace gearbox {

// What a call whose shapes are not a gear does (--gear-fallback).
enum class GearFallback {
  kError,    // Error(kGear) explaining the miss, as GE does
  kPad,      // zero-pad up to the smallest covering gear (vLLM's capture sizes)
  kDynamic,  // one plan with dynamic dims, compiled on the first such call, run op by op
             // (vLLM and SGLang run a batch above the largest captured size without the graph)
  kEager,    // op by op through the kernel cache (TorchAir past its capture limit)
  // vLLM's hybrid: a call some gear covers pads up to it (kPad); a call above every gear runs
  // through the dynamic (kPadDynamic) or eager (kPadEager) path. vLLM pads a batch up to the
  // next captured size and runs one larger than the largest without the graph.
  kPadDynamic,
  kPadEager,
};
// "error", "pad", "dynamic", "eager", "pad+dynamic", "pad+eager"
const char* gearFallbackName(GearFallback f);
// Whether a call some gear covers pads up to it (pad, pad+dynamic, pad+eager).
bool gearFallbackPads(GearFallback f);
// The path a call no gear serves takes: kDynamic or kEager for the four kinds that have one
// (dynamic, eager, pad+dynamic, pad+eager), else `f` itself (error, pad).
GearFallback gearFallbackPath(GearFallback f);
// Error(kConfig) naming the choices for anything else.
GearFallback parseGearFallback(std::string_view text);
// Every GearFallback's name, in declaration order (the option's choices).
std::vector<std::string> gearFallbackNames();

// When the gears compile (--gear-compile).
enum class GearCompile {
  kEager,  // every gear in prepare(), up front (TorchAir, GE, vLLM's capture at start-up)
  kLazy,   // a gear on its first use, in that call (vLLM's lazy capture proposal, vllm#20098)
};
const char* gearCompileName(GearCompile c);  // "eager", "lazy"
// Error(kConfig) naming the choices for anything else.
GearCompile parseGearCompile(std::string_view text);

// Geared mode (set_dim_gears): per-input gear specs, merge policy and what to do with a shape
// outside the gears.
struct GearOptions {
  // set_dim_gears calls in order (validated as TorchAir validates them).
  std::vector<std::pair<std::string, DimGearList>> dimGears;
  std::string json;  // --gears '{"x1": {"0": [2, 4]}}', applied after dimGears
  MergePolicy merge = MergePolicy::kZip;
  GearFallback fallback = GearFallback::kError;  // --gear-fallback
  GearCompile compile = GearCompile::kEager;     // --gear-compile
  // --pad-to NAME=DIMS (GearConfig::setPadTo): one fixed shape per input, every call padded
  // to it (implies GearFallback::kPad; another fallback is refused); dims sharing a symbol
  // follow. Beyond TorchAir's rules.
  std::vector<std::pair<std::string, Shape>> padTo;
  // A pad may allocate at most this many bytes of padded inputs and outputs per call (1 GiB):
  // a call of [3, 2] padded to a gear of 1e9 rows is refused with Error(kGear) naming the
  // bytes instead of allocating and zeroing gigabytes. The padded bytes of a call count in
  // SessionStats::peakBytes.
  int64_t maxPadBytes = int64_t{1} << 30;
};

struct SessionOptions;
// The gear options of `o`, made (defaults) on first use: `gearOptions(o).json = "..."`. Replaces
// structured options of another type.
GearOptions& gearOptions(SessionOptions& o);
// The gear options `o` holds, or null.
const GearOptions* findGearOptions(const SessionOptions& o);

}  // namespace gearbox
