#pragma once
// Choosing gears for one varying size (docs/gears.md, "Choosing gears"): given the distinct
// sizes a trace takes, how many calls take each, and the MODELED cost of a gear at each size,
// which sizes should be gears?
//
// A call of size s runs on the smallest gear g >= s and is charged the gear's per-call cost
// (a padded call runs the gear's plan at the gear's shape), so the total of a gear set is
//   sum over gears g of  compile(g) + call(g) * (calls whose size falls in (previous gear, g]).
// A gear between two distinct sizes can be lowered to the largest size it covers without
// raising either term when the costs grow with the size, so only distinct sizes need be
// considered, and the largest size must be a gear. The choice is then a partition of the
// sorted sizes into consecutive runs: an exact dynamic programme over (gear count, last gear).
//
// With a fallback (SizeFallback) a size need not run on a gear at all: it can be left to a
// fallback path whose per-call cost, first-call cost and shared one-off cost are inputs too.
// Under kAboveLargest (pad+dynamic, pad+eager) the gears cover a prefix of the sorted sizes
// and every size above the largest gear falls back, so the same programme runs over every
// possible largest gear; under kNotAGear (dynamic, eager: no padding) each size either is a
// gear or falls back, a selection solved exactly by sorting the sizes by what a gear saves.
//
// The costs are inputs: gears/ knows nothing of devices. driver/gear_suggest.h feeds it the
// device model's figures.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace gearbox {

// What a size that no gear serves does (the geared run's --gear-fallback, as gears/ sees it).
enum class SizeFallback {
  kNone,          // every size runs on a gear, padded up to the next one: the largest size must
                  // be a gear (--gear-fallback pad)
  kAboveLargest,  // sizes up to the largest gear pad up to the next gear; sizes above it fall
                  // back (pad+dynamic, pad+eager: vLLM)
  kNotAGear,      // no padding: every size that is not a gear falls back (dynamic, eager)
};

struct GearChoiceProblem {
  std::vector<int64_t> sizes;     // distinct, strictly ascending
  std::vector<int64_t> counts;    // calls per size (>= 1)
  std::vector<double> compileUs;  // per size: what making it a gear costs once
  std::vector<double> callUs;     // per size: what one call costs on a gear of that size
  SizeFallback fallback = SizeFallback::kNone;
  // With a fallback, per size (unused, and may be empty, under kNone): one call of that size
  // through the fallback path; what the size's first fallback call adds once (its own
  // compiles); whether its fallback calls need the shared part, which costs fallbackSharedUs
  // once when any such size falls back (the dynamic fallback's plan compile).
  std::vector<double> fallbackCallUs;
  std::vector<double> fallbackFirstUs;
  std::vector<char> fallbackShared;
  double fallbackSharedUs = 0;
  // Index of the largest size that may be a gear (a memory budget rules larger gears out).
  // Under kNone it must be the largest size.
  size_t largestGearLimit = std::numeric_limits<size_t>::max();
};

struct GearChoice {
  std::vector<size_t> gears;  // indices into sizes, ascending (under kNone the last is n - 1)
  double totalUs = 0;         // MODELED: compile of every gear + every call at its gear or
                              // through the fallback
};

// The total of a gear set (indices into sizes, ascending). Error(kGear) when the set is not
// ascending, breaks largestGearLimit, or (kNone) does not cover the largest size.
double gearChoiceCost(const GearChoiceProblem& p, const std::vector<size_t>& gears);

// Exact minimum over gear sets of minGears..maxGears distinct sizes (clamped to the number of
// sizes). kNone: O(K n) with a monotone convex-hull step when callUs does not decrease with
// the size (the device model's roofline never does), O(K n^2) otherwise; K = maxGears.
// kAboveLargest: the same programme, each layer's best taken over every largest gear (plus
// the fallback cost of the sizes above it): the same order. kNotAGear: O(n log n + K n).
// Ties go to the set found first (fewer gears, then smaller sizes). Error(kGear) on an
// inconsistent problem, minGears > the number of sizes, or when no set is possible.
GearChoice chooseGears(const GearChoiceProblem& p, size_t minGears, size_t maxGears);

// The best set of each gear count k = minGears..maxGears (clamped to the number of sizes), in
// that order, from the same single pass; an entry with no gears (and an infinite total) when
// no set of k gears is possible. chooseGears is the cheapest of them. O(K^2) on top of the
// pass, to read the K sets back.
std::vector<GearChoice> chooseGearsPerCount(const GearChoiceProblem& p, size_t minGears,
                                            size_t maxGears);

// The general form, for costs that are not compile + call x count (several varying symbols,
// where a call's cost also depends on the gear its other dims land on): chooses gears among n
// ordered sizes minimising sum over gears j of rangeUs(i, j), where i is the previous gear (-1
// for the first) and the gear covers sizes i+1..j; the last size must be a gear. O(K n^2)
// calls of rangeUs.
GearChoice chooseGearsByRange(size_t n, size_t minGears, size_t maxGears,
                              const std::function<double(int64_t, size_t)>& rangeUs);

// The same minimum by trying every subset: for tests (n <= 20).
GearChoice chooseGearsExhaustive(const GearChoiceProblem& p, size_t minGears, size_t maxGears);

}  // namespace gearbox
