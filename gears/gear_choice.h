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
// The costs are inputs: gears/ knows nothing of devices. driver/gear_suggest.h feeds it the
// device model's figures.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace gearbox {

struct GearChoiceProblem {
  std::vector<int64_t> sizes;     // distinct, strictly ascending
  std::vector<int64_t> counts;    // calls per size (>= 1)
  std::vector<double> compileUs;  // per size: what making it a gear costs once
  std::vector<double> callUs;     // per size: what one call costs on a gear of that size
};

struct GearChoice {
  std::vector<size_t> gears;  // indices into sizes, ascending; the last is sizes.size() - 1
  double totalUs = 0;         // MODELED: compile of every gear + every call at its gear
};

// The total of a gear set (indices into sizes, ascending, last = largest size). Error(kGear)
// when the set does not cover the largest size or is not ascending.
double gearChoiceCost(const GearChoiceProblem& p, const std::vector<size_t>& gears);

// Exact minimum over gear sets of minGears..maxGears distinct sizes (clamped to the number of
// sizes). O(K n) with a monotone convex-hull step when callUs does not decrease with the size
// (the device model's roofline never does), O(K n^2) otherwise; K = maxGears. Ties go to the
// set found first (fewer gears, then smaller sizes). Error(kGear) on an inconsistent problem
// or minGears > the number of sizes.
GearChoice chooseGears(const GearChoiceProblem& p, size_t minGears, size_t maxGears);

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
