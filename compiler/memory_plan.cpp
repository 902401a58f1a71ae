#include "compiler/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace gearbox {

static int64_t alignUp(int64_t v) {
  return (v + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

MemoryPlan planMemory(const std::vector<BufferRequest>& requests) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; ties by definition order so the plan is deterministic.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].bytes != requests[b].bytes ? requests[a].bytes > requests[b].bytes : a < b;
  });
  // Scratch reused across requests: this runs on every plan compile.
  std::vector<size_t> placed;
  placed.reserve(requests.size());
  std::vector<std::pair<int64_t, int64_t>> busy;
  busy.reserve(requests.size());
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    plan.naiveBytes += alignUp(r.bytes);
    // Collect the intervals of live-overlapping placed buffers, sorted by offset, and take the
    // first gap large enough.
    busy.clear();
    for (size_t p : placed) {
      const BufferRequest& q = requests[p];
      if (q.last < r.first || r.last < q.first) continue;
      busy.emplace_back(plan.offsets[p], plan.offsets[p] + alignUp(q.bytes));
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    const int64_t need = alignUp(r.bytes);
    for (const auto& [lo, hi] : busy) {
      if (offset + need <= lo) break;
      offset = std::max(offset, hi);
    }
    plan.offsets[idx] = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + need);
    placed.push_back(idx);
  }
  return plan;
}

}  // namespace gearbox
