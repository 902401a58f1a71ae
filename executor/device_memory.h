#pragma once
// MODELED device memory (docs/cost-model.md, "Device memory"): what a session's compiled
// shapes hold on the device, by term, against the device profile's capacity.
//
//   weights    the graph's constants (initializers), held once for the whole session;
//   workspace  each resident compiled shape's activation arena, from the memory planner at
//              that shape (Plan::arenaBytes; a capture's block of intermediates). A cached plan
//              (static, auto) owns its arena, so those add up. Gears and captures share the
//              graph pool, which decides how theirs add up: kShared -- one pool that every
//              gear reuses, since one call runs one gear (vLLM#5074 made its CUDA graphs share
//              one output buffer): the max; kSeparate -- a pool per gear (TensorRT-LLM's
//              CUDA-graph memory grows with the batch sizes captured,
//              NVIDIA/TensorRT-LLM#12895): the sum;
//   op-by-op   the pooled intermediates of the op-by-op path (eager, dynamic, fallbacks): the
//              caching allocator's reserved bytes (executor/caching_allocator.h);
//   call I/O   a call's inputs and outputs at the shapes the device sees (a padded call's
//              padded ones); held only while the call runs, so it counts in the peak only.
// resident = weights + workspace + op-by-op; peak = the most of resident + call I/O at once.
//
// The figures are MODELED: the simulated device allocates host memory, and gearbox never
// holds a real accelerator's bytes. SessionStats::peakBytes is the simulated device's own
// figure (the largest arena it bound, or the allocator's most reserved segments) and stays.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "compiler/compiler.h"

namespace gearbox {

// How compiled shapes' workspaces share device memory (--graph-pool).
enum class GraphPool { kShared, kSeparate };
const char* graphPoolName(GraphPool p);
std::optional<GraphPool> parseGraphPool(std::string_view s);

// What a run does when a compiled shape does not fit the capacity (--on-oom).
enum class OnOom { kError, kEvict };
const char* onOomName(OnOom o);
std::optional<OnOom> parseOnOom(std::string_view s);

// "40GiB", "512MiB", "2GB", "1000000": bytes, integer, suffixes B, KB/MB/GB/TB (powers of
// 1000) and KiB/MiB/GiB/TiB (powers of 1024). Error(kConfig) naming `what` on anything else,
// on 0 and above kMaxDeviceMemoryBytes.
int64_t parseByteSize(const std::string& text, std::string_view what);
// The largest capacity a profile or --device-memory may give: 1 PiB.
inline constexpr int64_t kMaxDeviceMemoryBytes = int64_t{1} << 50;

// "2359296 bytes (2.25 MiB)": exact bytes for tests and scripts, MiB for people.
std::string formatBytes(int64_t bytes);
// "512 B", "816.00 KiB", "2.25 MiB", "40.00 GiB": for summaries and tables.
std::string humanBytes(int64_t bytes);
struct SessionOptions;
// Where a session's capacity comes from: "--device-memory" or "device profile a100-class".
std::string memoryCapacitySource(const SessionOptions& o);

// The session's MODELED device memory, by term (SessionStats::memory; the report's
// "modeled_memory" block).
struct ModeledMemory {
  int64_t weightsBytes = 0;        // the graph's constants
  int64_t workspaceBytes = 0;      // resident workspaces now, by the pool rule
  int64_t opByOpBytes = 0;         // the caching allocator's reserved bytes now
  int64_t residentBytes = 0;       // weights + workspace + op-by-op, now
  int64_t peakBytes = 0;           // the most resident + a call's inputs and outputs at once
  int64_t peakWorkspaceBytes = 0;  // the most workspace at once
  int64_t residentPlans = 0;       // compiled shapes whose workspace is resident now
  int64_t capacityBytes = 0;       // 0: unlimited (a profile without memory_capacity_bytes)
  int64_t evictions = 0;           // plans evicted to make room (--on-oom evict)
  GraphPool pool = GraphPool::kShared;
};

// The accounting itself: which compiled shapes hold a workspace, and the totals. No device, no
// session: the Session's host (executor/modes/mode_host.cpp) feeds it, and the sweep and
// suggest-gears can feed it without running anything (modeledPlanMemory below).
class DeviceMemoryModel {
 public:
  DeviceMemoryModel() = default;
  DeviceMemoryModel(int64_t weightsBytes, int64_t capacityBytes, GraphPool pool);

  // The workspace total with `extra` more bytes held (0: as now), in the graph pool (`pooled`:
  // a gear, a capture) or as a cached plan's own arena.
  int64_t workspaceWith(int64_t extra, bool pooled = true) const;
  // weights + workspaceWith(extra, pooled) + the op-by-op bytes.
  int64_t residentWith(int64_t extra, bool pooled = true) const;
  bool unlimited() const { return capacity_ == 0; }
  bool fits(int64_t bytes) const { return unlimited() || bytes <= capacity_; }
  bool holds(uint64_t id) const { return held_.contains(id); }

  // A compiled shape's workspace becomes resident / is freed. `evictable`: a plan-cache entry
  // (static, auto) with its own arena, which --on-oom evict may drop; else a gear or capture in
  // the graph pool, never evicted.
  void hold(uint64_t id, int64_t bytes, bool evictable);
  void release(uint64_t id);
  // The evictable ids held, for reconciling with the plan cache.
  std::vector<uint64_t> evictableIds() const;
  void countEviction() { ++evictions_; }
  void setOpByOpBytes(int64_t bytes);
  // Raises the peak to resident + `transient` (a call's inputs and outputs).
  void notePeak(int64_t transient);

  ModeledMemory snapshot() const;

 private:
  struct Held {
    int64_t bytes = 0;
    bool evictable = false;
  };
  int64_t weights_ = 0, capacity_ = 0;
  GraphPool pool_ = GraphPool::kShared;
  std::map<uint64_t, Held> held_;
  std::multiset<int64_t> pooled_;  // sizes of the graph pool's entries, for the max
  int64_t pooledSum_ = 0, cachedSum_ = 0, opByOp_ = 0, peak_ = 0, peakWorkspace_ = 0,
          evictions_ = 0;
};

// Bytes of the graph's constants (its weights).
int64_t graphWeightBytes(const Graph& g);
// Bytes of `plan`'s inputs and outputs at its shapes (a static plan).
int64_t planIoBytes(const Plan& plan);

// What a set of compiled shapes needs, without running a trace: the question of `gearbox
// sweep` and `suggest-gears --max-memory`. Each shape is planned as the session would compile
// it (the default passes first when `runPasses`, as SessionOptions::runPasses), without arenas.
struct PlanMemory {
  InputSignature signature;
  int64_t workspaceBytes = 0;  // Plan::arenaBytes
  int64_t ioBytes = 0;         // inputs and outputs at that shape
};
struct ShapeSetMemory {
  int64_t weightsBytes = 0;
  std::vector<PlanMemory> plans;  // in the order given
  int64_t workspaceBytes = 0;     // by the pool rule
  int64_t residentBytes = 0;      // weights + workspace (what prepare() holds for these gears)
  int64_t peakBytes = 0;          // resident + the largest plan's inputs and outputs
};
ShapeSetMemory modeledPlanMemory(const Graph& g, std::span<const InputSignature> shapes,
                                 GraphPool pool, bool runPasses = true);

}  // namespace gearbox
