#pragma once
// Geared mode's options (executor/modes/geared.cpp): the gear specs, the merge policy and what
// to do with a shape outside the gears. A SessionOptions carries them as its mode's structured
// options (SessionOptions::modeConfig), set through gearOptions(); the session knows nothing
// of gears, and the geared mode reads and checks them when the session is built.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gears/gear_set.h"
#include "gears/padding.h"

namespace gearbox {

// Geared mode (set_dim_gears): per-input gear specs, merge policy and what to do with a shape
// outside the gears.
struct GearOptions {
  // set_dim_gears calls in order (validated as TorchAir validates them).
  std::vector<std::pair<std::string, DimGearList>> dimGears;
  std::string json;  // --gears '{"x1": {"0": [2, 4]}}', applied after dimGears
  MergePolicy merge = MergePolicy::kZip;
  bool padFallback = false;  // --gear-fallback pad: pad up to the smallest covering gear
  // --pad-to NAME=DIMS (GearConfig::setPadTo): one fixed shape per input, every call padded
  // to it (implies padFallback); dims sharing a symbol follow. Beyond TorchAir's rules.
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
