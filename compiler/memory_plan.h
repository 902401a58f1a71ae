#pragma once
// Static memory planning: every intermediate value of a specialised graph gets an offset in
// one arena; values whose lifetimes do not overlap share bytes.
//
// Greedy by size (the TFLite arena planner's strategy): buffers are placed largest first, each
// at the lowest 64-byte-aligned offset that does not overlap any already-placed buffer that is
// live at the same time. Peak bytes = arena size.

#include <cstdint>
#include <vector>

namespace gearbox {

struct BufferRequest {
  int64_t bytes = 0;
  int first = 0;  // step that writes it
  int last = 0;   // last step that reads it (>= first)
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // one per request
  int64_t arenaBytes = 0;        // peak
  int64_t naiveBytes = 0;        // sum of all buffers (no reuse), for the report
};

constexpr int64_t kArenaAlignment = 64;

MemoryPlan planMemory(const std::vector<BufferRequest>& requests);

}  // namespace gearbox
