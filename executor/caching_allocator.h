#pragma once
// The simulated device's memory: a model of a block-rounding, splitting caching allocator, after
// PyTorch's CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp). It hands out device
// addresses only; the Device backs them with host memory when kernels really run and leaves
// them unbacked under SessionOptions::modelOnly, so a model-only run materialises nothing.
//
// Rules (PyTorch's defaults, docs/cost-model.md "Device memory"):
//  - a request is rounded up to a multiple of 512 B (at least 512 B);
//  - requests up to 1 MiB come from a small pool of 2 MiB segments; larger ones from a large
//    pool whose segments are 20 MiB for requests below 10 MiB and the request rounded up to
//    2 MiB above;
//  - the best-fitting cached block (smallest, then lowest address) serves a request and is split
//    when the rest is worth keeping (>= 512 B in the small pool, > 1 MiB in the large one);
//  - a freed block merges with free neighbours of its segment;
//  - a new segment is a pool miss (a device malloc, charged `alloc_us`). When it would take the
//    reserved memory past the capacity, every wholly free segment is released first (PyTorch's
//    release_cached_blocks before it reports out-of-memory); a working set larger than the
//    capacity still runs (the simulator does not fail a run the old exact-size pool ran), and
//    `overCapacity` counts those segments.
// Everything is deterministic: the same requests give the same addresses and counters. Memory
// held is O(live blocks + cached segments), bounded by the capacity, whatever the number of
// distinct request sizes (the old pool kept one list per exact size and never reused across
// sizes, so N distinct sizes held O(N^2) bytes).

#include <cstddef>
#include <cstdint>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace gearbox {

struct CachingAllocatorStats {
  int64_t requests = 0;            // allocate() calls
  int64_t cacheHits = 0;           // served from a cached block
  int64_t segmentAllocs = 0;       // new segments (pool misses)
  int64_t segmentReleases = 0;     // cached segments released to make room (evictions)
  int64_t splits = 0;              // blocks split to serve a smaller request
  int64_t overCapacity = 0;        // segments allocated past the capacity (working set too large)
  int64_t bytesReservedTotal = 0;  // bytes of every segment ever allocated
  int64_t bytesReserved = 0;       // bytes of the segments held now
  int64_t peakBytesReserved = 0;
  int64_t bytesInUse = 0;  // rounded bytes of live blocks
  int64_t peakBytesInUse = 0;
};

class CachingAllocatorModel {
 public:
  static constexpr size_t kMinBlockSize = 512;                // PyTorch kMinBlockSize
  static constexpr size_t kSmallSize = size_t{1} << 20;       // kSmallSize: small pool limit
  static constexpr size_t kSmallBuffer = size_t{2} << 20;     // kSmallBuffer: small segment
  static constexpr size_t kLargeBuffer = size_t{20} << 20;    // kLargeBuffer
  static constexpr size_t kMinLargeAlloc = size_t{10} << 20;  // kMinLargeAlloc
  static constexpr size_t kRoundLarge = size_t{2} << 20;      // kRoundLarge
  static constexpr size_t kDefaultCapacity = size_t{4} << 30;

  struct Allocation {
    uint64_t address = 0;  // device address of the block
    uint64_t segment = 0;  // base address of its segment
    size_t size = 0;       // rounded size
    bool newSegment = false;
  };
  // What happened to segments, for the Device to back or free host memory.
  struct SegmentEvent {
    uint64_t base = 0;
    size_t bytes = 0;
    bool allocated = false;  // false: released
  };

  explicit CachingAllocatorModel(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  static size_t roundSize(size_t bytes);
  static size_t segmentSize(size_t rounded);

  // Serves `bytes` (> 0). Segment events (releases first, then the new segment) are appended to
  // `events` when it is not null.
  Allocation allocate(size_t bytes, std::vector<SegmentEvent>* events = nullptr);
  // Returns the block at `address` (from allocate) to the cache.
  void free(uint64_t address);
  // Releases every wholly free cached segment; returns how many.
  int64_t releaseCached(std::vector<SegmentEvent>* events = nullptr);

  const CachingAllocatorStats& stats() const { return stats_; }
  size_t capacity() const { return capacity_; }
  size_t liveBlocks() const { return live_.size(); }
  size_t cachedBlocks() const { return smallFree_.size() + largeFree_.size(); }

 private:
  struct Block {
    uint64_t address = 0;
    uint64_t segment = 0;
    size_t size = 0;
    int prev = -1, next = -1;  // neighbours in the same segment
    bool allocated = false;
    bool small = false;
  };
  using FreeSet = std::set<std::tuple<size_t, uint64_t, int>>;  // (size, address, block)
  FreeSet& poolOf(const Block& b) { return b.small ? smallFree_ : largeFree_; }
  int newBlock(const Block& b);
  void dropBlock(int id);

  size_t capacity_;
  uint64_t nextAddress_ = uint64_t{1} << 40;  // device addresses; never dereferenced unbacked
  std::vector<Block> blocks_;
  std::vector<int> unusedIds_;
  FreeSet smallFree_, largeFree_;
  std::unordered_map<uint64_t, int> live_;
  CachingAllocatorStats stats_;
};

}  // namespace gearbox
