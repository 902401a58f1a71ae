#include "gears/gear_choice.h"

#include <algorithm>
#include <limits>

#include "graph/error.h"

namespace gearbox {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void checkProblem(const GearChoiceProblem& p) {
  const size_t n = p.sizes.size();
  if (n == 0) fail(ErrorKind::kGear, "no sizes to choose gears from");
  if (p.counts.size() != n || p.compileUs.size() != n || p.callUs.size() != n)
    fail(ErrorKind::kGear, "gear choice: {} sizes but {} counts, {} compile and {} call costs", n,
         p.counts.size(), p.compileUs.size(), p.callUs.size());
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && p.sizes[i] <= p.sizes[i - 1])
      fail(ErrorKind::kGear, "gear choice: sizes must be strictly ascending ({} after {})",
           p.sizes[i], p.sizes[i - 1]);
    if (p.counts[i] < 1)
      fail(ErrorKind::kGear, "gear choice: size {} has {} calls", p.sizes[i], p.counts[i]);
  }
}

// Calls with size index <= j.
std::vector<double> prefixCounts(const GearChoiceProblem& p) {
  std::vector<double> prefix(p.sizes.size());
  double sum = 0;
  for (size_t i = 0; i < p.sizes.size(); ++i) prefix[i] = sum += static_cast<double>(p.counts[i]);
  return prefix;
}

}  // namespace

double gearChoiceCost(const GearChoiceProblem& p, const std::vector<size_t>& gears) {
  checkProblem(p);
  if (gears.empty() || gears.back() != p.sizes.size() - 1)
    fail(ErrorKind::kGear, "a gear set must include the largest size {}", p.sizes.back());
  const std::vector<double> prefix = prefixCounts(p);
  double total = 0;
  for (size_t k = 0; k < gears.size(); ++k) {
    if (k > 0 && gears[k] <= gears[k - 1])
      fail(ErrorKind::kGear, "gear indices must be strictly ascending");
    const size_t g = gears[k];
    const double covered = prefix[g] - (k > 0 ? prefix[gears[k - 1]] : 0.0);
    total += p.compileUs[g] + p.callUs[g] * covered;
  }
  return total;
}

GearChoice chooseGears(const GearChoiceProblem& p, size_t minGears, size_t maxGears) {
  checkProblem(p);
  const size_t n = p.sizes.size();
  minGears = std::max<size_t>(minGears, 1);
  maxGears = std::min(maxGears, n);
  if (minGears > maxGears)
    fail(ErrorKind::kGear, "cannot choose at least {} gears from {} distinct sizes (at most {})",
         minGears, n, maxGears);
  const std::vector<double> prefix = prefixCounts(p);
  bool monotone = true;
  for (size_t i = 1; i < n; ++i) monotone = monotone && p.callUs[i] >= p.callUs[i - 1];

  // f[j]: the cheapest set of exactly k gears whose largest is size j, covering sizes 0..j.
  // parent[k][j]: the previous gear of that set (-1 for the first).
  std::vector<double> prev(n, kInf), cur(n, kInf);
  std::vector<std::vector<int32_t>> parent(maxGears, std::vector<int32_t>(n, -1));
  for (size_t j = 0; j < n; ++j) prev[j] = p.compileUs[j] + p.callUs[j] * prefix[j];
  double best = minGears == 1 ? prev[n - 1] : kInf;
  size_t bestK = minGears == 1 ? 1 : 0;
  // Lines of the hull: y = slope * x + icpt for previous gear i, slope = -prefix[i],
  // icpt = f_{k-1}[i]; the new gear j queries x = callUs[j].
  std::vector<int32_t> hull;
  for (size_t k = 2; k <= maxGears; ++k) {
    std::fill(cur.begin(), cur.end(), kInf);
    std::vector<int32_t>& par = parent[k - 1];
    hull.clear();
    size_t front = 0;
    for (size_t j = k - 1; j < n; ++j) {
      const double base = p.compileUs[j] + p.callUs[j] * prefix[j];
      if (monotone) {
        // Add previous gear i = j - 1 (slopes strictly decrease as i grows).
        const int32_t i = static_cast<int32_t>(j - 1);
        if (prev[i] < kInf) {
          auto bad = [&](int32_t a, int32_t b, int32_t c) {
            // b is never the minimum once c is in: x(a, c) <= x(a, b).
            const long double ma = -prefix[a], mb = -prefix[b], mc = -prefix[c];
            return (static_cast<long double>(prev[c]) - prev[a]) * (ma - mb) <=
                   (static_cast<long double>(prev[b]) - prev[a]) * (ma - mc);
          };
          while (hull.size() >= front + 2 && bad(hull[hull.size() - 2], hull.back(), i))
            hull.pop_back();
          hull.push_back(i);
          front = std::min(front, hull.size() - 1);
        }
        if (hull.size() > front) {
          const double x = p.callUs[j];
          auto value = [&](int32_t a) { return prev[a] - x * prefix[a]; };
          while (front + 1 < hull.size() && value(hull[front + 1]) <= value(hull[front])) ++front;
          cur[j] = base + value(hull[front]);
          par[j] = hull[front];
        }
      } else {
        for (size_t i = k - 2; i < j; ++i) {
          if (prev[i] == kInf) continue;
          const double v = base + prev[i] - p.callUs[j] * prefix[i];
          if (v < cur[j]) {
            cur[j] = v;
            par[j] = static_cast<int32_t>(i);
          }
        }
      }
    }
    if (k >= minGears && cur[n - 1] < best) {
      best = cur[n - 1];
      bestK = k;
    }
    prev.swap(cur);
    // parent rows of earlier layers stay; prev now holds layer k.
  }
  GearChoice out;
  size_t j = n - 1;
  for (size_t k = bestK; k >= 1; --k) {
    out.gears.push_back(j);
    if (k == 1) break;
    j = static_cast<size_t>(parent[k - 1][j]);
  }
  std::reverse(out.gears.begin(), out.gears.end());
  // Report the set's own total, summed the way every other set is, so comparisons are fair.
  out.totalUs = gearChoiceCost(p, out.gears);
  return out;
}

GearChoice chooseGearsByRange(size_t n, size_t minGears, size_t maxGears,
                              const std::function<double(int64_t, size_t)>& rangeUs) {
  if (n == 0) fail(ErrorKind::kGear, "no sizes to choose gears from");
  minGears = std::max<size_t>(minGears, 1);
  maxGears = std::min(maxGears, n);
  if (minGears > maxGears)
    fail(ErrorKind::kGear, "cannot choose at least {} gears from {} distinct sizes (at most {})",
         minGears, n, maxGears);
  std::vector<double> prev(n, kInf), cur(n, kInf);
  std::vector<std::vector<int32_t>> parent(maxGears, std::vector<int32_t>(n, -1));
  for (size_t j = 0; j < n; ++j) prev[j] = rangeUs(-1, j);
  double best = minGears == 1 ? prev[n - 1] : kInf;
  size_t bestK = minGears == 1 ? 1 : 0;
  for (size_t k = 2; k <= maxGears; ++k) {
    std::fill(cur.begin(), cur.end(), kInf);
    for (size_t j = k - 1; j < n; ++j)
      for (size_t i = k - 2; i < j; ++i) {
        if (prev[i] == kInf) continue;
        const double v = prev[i] + rangeUs(static_cast<int64_t>(i), j);
        if (v < cur[j]) {
          cur[j] = v;
          parent[k - 1][j] = static_cast<int32_t>(i);
        }
      }
    if (k >= minGears && cur[n - 1] < best) {
      best = cur[n - 1];
      bestK = k;
    }
    prev.swap(cur);
  }
  if (bestK == 0) fail(ErrorKind::kGear, "no gear set of {}..{} gears", minGears, maxGears);
  GearChoice out;
  size_t j = n - 1;
  for (size_t k = bestK; k >= 1; --k) {
    out.gears.push_back(j);
    if (k == 1) break;
    j = static_cast<size_t>(parent[k - 1][j]);
  }
  std::reverse(out.gears.begin(), out.gears.end());
  out.totalUs = best;
  return out;
}

GearChoice chooseGearsExhaustive(const GearChoiceProblem& p, size_t minGears, size_t maxGears) {
  checkProblem(p);
  const size_t n = p.sizes.size();
  if (n > 20) fail(ErrorKind::kGear, "exhaustive gear search is for n <= 20, got {}", n);
  GearChoice best;
  best.totalUs = kInf;
  for (uint32_t mask = 0; mask < (uint32_t{1} << (n - 1)); ++mask) {
    std::vector<size_t> gears;
    for (size_t i = 0; i + 1 < n; ++i)
      if (mask >> i & 1) gears.push_back(i);
    gears.push_back(n - 1);
    if (gears.size() < minGears || gears.size() > maxGears) continue;
    const double c = gearChoiceCost(p, gears);
    if (c < best.totalUs) best = GearChoice{gears, c};
  }
  if (best.gears.empty())
    fail(ErrorKind::kGear, "cannot choose {}..{} gears from {} sizes", minGears, maxGears, n);
  return best;
}

}  // namespace gearbox
