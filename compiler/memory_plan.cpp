#include "compiler/memory_plan.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "graph/checked.h"

namespace gearbox {

static int64_t alignUp(int64_t v) {
  // Request sizes come from shapes already checked against kMaxTensorBytes, far below where
  // this could wrap; the check keeps a future caller from silently planning a wrapped size.
  return mulOrFail((v + kArenaAlignment - 1) / kArenaAlignment, kArenaAlignment, "buffer bytes");
}

namespace {

// The placed buffers, indexed by lifetime so that "which placed buffers are live at the same
// time as [first, last]" costs O(log n + k) for k answers instead of a scan over everything
// placed (which made planning quadratic in the number of nodes). Two overlapping intervals
// either contain the other's start or start inside it:
//   - a segment tree over steps finds the buffers whose [first, last] contains r.first;
//   - buffers sorted by start find those starting in (r.first, r.last].
// The two sets are disjoint, so each overlapping buffer is reported exactly once.
class LiveIndex {
 public:
  explicit LiveIndex(int steps) {
    size_ = 1;
    while (size_ < steps) size_ *= 2;
    tree_.resize(2 * static_cast<size_t>(size_));
  }

  void add(int first, int last, size_t id) {
    // Canonical cover of [first, last]: O(log n) tree nodes.
    for (int lo = first + size_, hi = last + size_ + 1; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1) tree_[lo++].push_back(id);
      if (hi & 1) tree_[--hi].push_back(id);
    }
    byStart_.emplace(first, id);
  }

  template <typename F>
  void forEachOverlap(int first, int last, F&& f) const {
    for (int node = first + size_; node >= 1; node /= 2)
      for (size_t id : tree_[node]) f(id);
    for (auto it = byStart_.upper_bound(first); it != byStart_.end() && it->first <= last; ++it)
      f(it->second);
  }

 private:
  int size_ = 1;
  std::vector<std::vector<size_t>> tree_;
  std::multimap<int, size_t> byStart_;
};

}  // namespace

MemoryPlan planMemory(const std::vector<BufferRequest>& requests) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; ties by definition order so the plan is deterministic.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].bytes != requests[b].bytes ? requests[a].bytes > requests[b].bytes : a < b;
  });
  int steps = 1;
  for (const BufferRequest& r : requests) steps = std::max(steps, r.last + 1);
  LiveIndex live(steps);
  // Scratch reused across requests: this runs on every plan compile.
  std::vector<std::pair<int64_t, int64_t>> busy;
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    const int64_t need = alignUp(r.bytes);
    plan.naiveBytes = addOrFail(plan.naiveBytes, need, "memory plan total");
    // The intervals of live-overlapping placed buffers, sorted by offset; take the first gap
    // large enough. Same placement as scanning every placed buffer, in O((log n + k) log k).
    busy.clear();
    live.forEachOverlap(r.first, r.last, [&](size_t p) {
      busy.emplace_back(plan.offsets[p], plan.offsets[p] + alignUp(requests[p].bytes));
    });
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [lo, hi] : busy) {
      if (offset + need <= lo) break;
      offset = std::max(offset, hi);
    }
    plan.offsets[idx] = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, addOrFail(offset, need, "memory plan offset"));
    live.add(r.first, r.last, idx);
  }
  return plan;
}

}  // namespace gearbox
