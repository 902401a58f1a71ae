#include "gears/gear_choice.h"

#include <algorithm>
#include <limits>
#include <optional>

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
  if (p.fallback != SizeFallback::kNone &&
      (p.fallbackCallUs.size() != n || p.fallbackFirstUs.size() != n ||
       p.fallbackShared.size() != n))
    fail(ErrorKind::kGear,
         "gear choice: {} sizes but {} fallback call, {} fallback first-call and {} shared "
         "fallback costs",
         n, p.fallbackCallUs.size(), p.fallbackFirstUs.size(), p.fallbackShared.size());
}

// Index of the largest size that may be a gear.
size_t gearLimit(const GearChoiceProblem& p) {
  return std::min(p.largestGearLimit, p.sizes.size() - 1);
}

// Calls with size index <= j.
std::vector<double> prefixCounts(const GearChoiceProblem& p) {
  std::vector<double> prefix(p.sizes.size());
  double sum = 0;
  for (size_t i = 0; i < p.sizes.size(); ++i) prefix[i] = sum += static_cast<double>(p.counts[i]);
  return prefix;
}

// What leaving size i to the fallback costs, shared part aside.
double fallbackOf(const GearChoiceProblem& p, size_t i) {
  return static_cast<double>(p.counts[i]) * p.fallbackCallUs[i] + p.fallbackFirstUs[i];
}

// kAboveLargest: tail[j] = what the sizes above j cost through the fallback (tail[n-1] = 0).
std::vector<double> fallbackTail(const GearChoiceProblem& p) {
  const size_t n = p.sizes.size();
  std::vector<double> tail(n, 0.0);
  double sum = 0;
  bool shared = false;
  for (size_t j = n - 1; j-- > 0;) {
    sum += fallbackOf(p, j + 1);
    shared = shared || p.fallbackShared[j + 1];
    tail[j] = sum + (shared ? p.fallbackSharedUs : 0.0);
  }
  return tail;
}

// Reads the set of `k` gears ending at `last` back from the parent rows.
std::vector<size_t> readBack(const std::vector<std::vector<int32_t>>& parent, size_t k,
                             size_t last) {
  std::vector<size_t> gears;
  size_t j = last;
  for (size_t layer = k; layer >= 1; --layer) {
    gears.push_back(j);
    if (layer == 1) break;
    j = static_cast<size_t>(parent[layer - 1][j]);
  }
  std::reverse(gears.begin(), gears.end());
  return gears;
}

// kNotAGear: each size is a gear (compile + its calls on it) or falls back. With b[i] = what
// making size i a gear saves, the best set of k gears is the k largest b, unless the shared
// fallback part decides it: then the best set holding every size that needs the shared part
// (so none of them falls back and the part is never paid) is those sizes plus the largest b of
// the rest. The cheaper of the two is exact for k.
std::vector<GearChoice> chooseNotAGear(const GearChoiceProblem& p, size_t minGears,
                                       size_t maxGears) {
  const size_t n = p.sizes.size(), limit = gearLimit(p);
  std::vector<double> saves(n);
  for (size_t i = 0; i < n; ++i) {
    saves[i] = fallbackOf(p, i) - p.compileUs[i] - static_cast<double>(p.counts[i]) * p.callUs[i];
  }
  std::vector<size_t> all, shared, rest;  // eligible sizes by what they save, most first
  bool sharedEligible = true;
  size_t sharedCount = 0;
  for (size_t i = 0; i < n; ++i) {
    if (p.fallbackShared[i]) {
      ++sharedCount;
      if (i > limit) sharedEligible = false;
    }
    if (i > limit) continue;
    all.push_back(i);
    (p.fallbackShared[i] ? shared : rest).push_back(i);
  }
  auto bySaving = [&](size_t a, size_t b) {
    return saves[a] > saves[b] || (saves[a] == saves[b] && a < b);
  };
  std::sort(all.begin(), all.end(), bySaving);
  std::sort(rest.begin(), rest.end(), bySaving);
  std::vector<GearChoice> out;
  for (size_t k = minGears; k <= maxGears; ++k) {
    GearChoice best;
    best.totalUs = kInf;
    auto consider = [&](std::vector<size_t> gears) {
      std::sort(gears.begin(), gears.end());
      const double total = gearChoiceCost(p, gears);
      if (total < best.totalUs) best = GearChoice{std::move(gears), total};
    };
    if (k <= all.size())
      consider(std::vector<size_t>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k)));
    if (sharedCount > 0 && sharedEligible && sharedCount <= k && k - sharedCount <= rest.size()) {
      std::vector<size_t> gears = shared;
      gears.insert(gears.end(), rest.begin(),
                   rest.begin() + static_cast<std::ptrdiff_t>(k - sharedCount));
      consider(std::move(gears));
    }
    if (best.gears.empty()) best.totalUs = kInf;
    out.push_back(std::move(best));
  }
  return out;
}

}  // namespace

double gearChoiceCost(const GearChoiceProblem& p, const std::vector<size_t>& gears) {
  checkProblem(p);
  const size_t n = p.sizes.size();
  if (gears.empty()) fail(ErrorKind::kGear, "a gear set needs at least one gear");
  for (size_t k = 1; k < gears.size(); ++k)
    if (gears[k] <= gears[k - 1]) fail(ErrorKind::kGear, "gear indices must be strictly ascending");
  if (gears.back() > gearLimit(p))
    fail(ErrorKind::kGear, "gear size {} is above the largest allowed gear {}",
         p.sizes[std::min(gears.back(), n - 1)], p.sizes[gearLimit(p)]);
  if (p.fallback == SizeFallback::kNone && gears.back() != n - 1)
    fail(ErrorKind::kGear, "a gear set must include the largest size {}", p.sizes.back());
  double total = 0;
  bool shared = false;
  size_t next = 0;  // the first gear >= i
  for (size_t i = 0; i < n; ++i) {
    while (next < gears.size() && gears[next] < i) ++next;
    const bool isGear = next < gears.size() && gears[next] == i;
    if (isGear) total += p.compileUs[i];
    const bool onGear = p.fallback == SizeFallback::kNotAGear ? isGear : next < gears.size();
    if (onGear) {
      total += static_cast<double>(p.counts[i]) * p.callUs[gears[next]];
    } else {
      total += fallbackOf(p, i);
      shared = shared || p.fallbackShared[i];
    }
  }
  return total + (shared ? p.fallbackSharedUs : 0.0);
}

std::vector<GearChoice> chooseGearsPerCount(const GearChoiceProblem& p, size_t minGears,
                                            size_t maxGears) {
  checkProblem(p);
  const size_t n = p.sizes.size();
  minGears = std::max<size_t>(minGears, 1);
  maxGears = std::min(maxGears, n);
  if (minGears > maxGears)
    fail(ErrorKind::kGear, "cannot choose at least {} gears from {} distinct sizes (at most {})",
         minGears, n, maxGears);
  if (p.fallback == SizeFallback::kNone && gearLimit(p) != n - 1)
    fail(ErrorKind::kGear,
         "the largest size {} must be a gear when nothing falls back, but gears above {} are "
         "ruled out",
         p.sizes.back(), p.sizes[gearLimit(p)]);
  if (p.fallback == SizeFallback::kNotAGear) return chooseNotAGear(p, minGears, maxGears);

  // Gears can only sit at indices 0..m-1; under kAboveLargest the sizes above the largest gear
  // are the tail's.
  const size_t m = gearLimit(p) + 1;
  const std::vector<double> prefix = prefixCounts(p);
  const std::vector<double> tail =
      p.fallback == SizeFallback::kAboveLargest ? fallbackTail(p) : std::vector<double>(n, 0.0);
  bool monotone = true;
  for (size_t i = 1; i < m; ++i) monotone = monotone && p.callUs[i] >= p.callUs[i - 1];

  // f[j]: the cheapest set of exactly k gears whose largest is size j, covering sizes 0..j.
  // parent[k][j]: the previous gear of that set (-1 for the first).
  std::vector<double> prev(m, kInf), cur(m, kInf);
  std::vector<std::vector<int32_t>> parent(maxGears, std::vector<int32_t>(m, -1));
  for (size_t j = 0; j < m; ++j) prev[j] = p.compileUs[j] + p.callUs[j] * prefix[j];
  // The best last gear of layer k: under kNone the largest size; else the cheapest with its
  // tail (ties: the smaller size).
  auto bestLast = [&](const std::vector<double>& f, size_t k) -> std::optional<size_t> {
    if (p.fallback == SizeFallback::kNone)
      return f[n - 1] < kInf ? std::optional<size_t>(n - 1) : std::nullopt;
    std::optional<size_t> best;
    for (size_t j = k - 1; j < m; ++j)
      if (f[j] < kInf && (!best || f[j] + tail[j] < f[*best] + tail[*best])) best = j;
    return best;
  };
  std::vector<GearChoice> out;
  auto record = [&](const std::vector<double>& f, size_t k) {
    if (k < minGears) return;
    GearChoice c;
    c.totalUs = kInf;
    if (const std::optional<size_t> last = bestLast(f, k)) {
      c.gears = readBack(parent, k, *last);
      // The set's own total, summed the way every other set is, so comparisons are fair.
      c.totalUs = gearChoiceCost(p, c.gears);
    }
    out.push_back(std::move(c));
  };
  record(prev, 1);
  // Lines of the hull: y = slope * x + icpt for previous gear i, slope = -prefix[i],
  // icpt = f_{k-1}[i]; the new gear j queries x = callUs[j].
  std::vector<int32_t> hull;
  for (size_t k = 2; k <= maxGears; ++k) {
    std::fill(cur.begin(), cur.end(), kInf);
    std::vector<int32_t>& par = parent[k - 1];
    hull.clear();
    size_t front = 0;
    for (size_t j = k - 1; j < m; ++j) {
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
    record(cur, k);
    prev.swap(cur);
    // parent rows of earlier layers stay; prev now holds layer k.
  }
  return out;
}

GearChoice chooseGears(const GearChoiceProblem& p, size_t minGears, size_t maxGears) {
  const std::vector<GearChoice> perCount = chooseGearsPerCount(p, minGears, maxGears);
  const GearChoice* best = nullptr;
  for (const GearChoice& c : perCount)
    if (!c.gears.empty() && (!best || c.totalUs < best->totalUs)) best = &c;
  if (!best)
    fail(ErrorKind::kGear, "no gear set of {}..{} gears is possible", std::max<size_t>(minGears, 1),
         maxGears);
  return *best;
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
  for (uint32_t mask = 1; mask < (uint32_t{1} << n); ++mask) {
    std::vector<size_t> gears;
    for (size_t i = 0; i < n; ++i)
      if (mask >> i & 1) gears.push_back(i);
    if (gears.size() < minGears || gears.size() > maxGears) continue;
    if (gears.back() > gearLimit(p)) continue;
    if (p.fallback == SizeFallback::kNone && gears.back() != n - 1) continue;
    const double c = gearChoiceCost(p, gears);
    if (c < best.totalUs) best = GearChoice{gears, c};
  }
  if (best.gears.empty())
    fail(ErrorKind::kGear, "cannot choose {}..{} gears from {} sizes", minGears, maxGears, n);
  return best;
}

}  // namespace gearbox
