// The simulated device's caching allocator (executor/caching_allocator.h): PyTorch's rounding,
// segment sizes, best-fit with splitting, merging, the capacity, and the finding of issue 22
// it fixes: device memory that grew with the square of the number of distinct sizes.
#include "executor/caching_allocator.h"

#include <gtest/gtest.h>

#include <vector>

#include "executor/device.h"
#include "executor/modes/mode_table.h"
#include "executor/session.h"
#include "graph/text.h"

namespace gearbox {
namespace {

using Model = CachingAllocatorModel;
constexpr size_t kMiB = size_t{1} << 20;

TEST(CachingAllocator, RoundsRequestsTo512ByteBlocksAndPicksPyTorchSegmentSizes) {
  EXPECT_EQ(Model::roundSize(1), 512u);
  EXPECT_EQ(Model::roundSize(512), 512u);
  EXPECT_EQ(Model::roundSize(513), 1024u);
  EXPECT_EQ(Model::segmentSize(512), 2 * kMiB);          // small pool
  EXPECT_EQ(Model::segmentSize(kMiB), 2 * kMiB);         // 1 MiB is still small
  EXPECT_EQ(Model::segmentSize(kMiB + 512), 20 * kMiB);  // large, below 10 MiB
  EXPECT_EQ(Model::segmentSize(10 * kMiB), 10 * kMiB);   // large: rounded to 2 MiB
  EXPECT_EQ(Model::segmentSize(11 * kMiB), 12 * kMiB);
}

TEST(CachingAllocator, SplitsASegmentAndMergesFreedNeighbours) {
  Model m;
  const auto a = m.allocate(1000);  // 1024 B from a new 2 MiB segment; the rest is split off
  EXPECT_TRUE(a.newSegment);
  EXPECT_EQ(a.size, 1024u);
  const auto b = m.allocate(4096);  // from the rest, no new segment
  EXPECT_FALSE(b.newSegment);
  EXPECT_EQ(b.address, a.address + 1024);
  EXPECT_EQ(m.stats().segmentAllocs, 1);
  EXPECT_EQ(m.stats().splits, 2);
  m.free(a.address);
  m.free(b.address);
  // Freed blocks merged back into one 2 MiB block: a 2 MiB request fits without a new segment
  // only in the large pool, so ask for the small pool's largest, 1 MiB, twice.
  EXPECT_EQ(m.cachedBlocks(), 1u);
  const auto c = m.allocate(kMiB);
  const auto d = m.allocate(kMiB);
  EXPECT_FALSE(c.newSegment);
  EXPECT_FALSE(d.newSegment);
  EXPECT_EQ(m.stats().segmentAllocs, 1);
  EXPECT_EQ(m.stats().bytesInUse, static_cast<int64_t>(2 * kMiB));
}

TEST(CachingAllocator, BestFitTakesTheSmallestCachedBlockThatFits) {
  Model m;
  const auto big = m.allocate(12 * kMiB);    // a 12 MiB segment
  const auto small = m.allocate(11 * kMiB);  // a 12 MiB segment (11 rounded to 2 MiB)
  m.free(big.address);
  m.free(small.address);
  const auto again = m.allocate(11 * kMiB);
  EXPECT_FALSE(again.newSegment);
  EXPECT_EQ(again.address, big.address);  // equal sizes: the lower address
  EXPECT_EQ(m.stats().splits, 0);         // a 1 MiB rest is not > 1 MiB: the block is used whole
}

TEST(CachingAllocator, TheCapacityReleasesCachedSegmentsBeforeGrowing) {
  Model m(40 * kMiB);
  const auto a = m.allocate(20 * kMiB);
  m.free(a.address);
  const auto b = m.allocate(30 * kMiB);  // does not fit the cached 20 MiB; 50 > 40 MiB
  EXPECT_TRUE(b.newSegment);
  EXPECT_EQ(m.stats().segmentReleases, 1);
  EXPECT_EQ(m.stats().bytesReserved, static_cast<int64_t>(30 * kMiB));
  EXPECT_EQ(m.stats().overCapacity, 0);
  // A working set above the capacity still runs, counted.
  const auto c = m.allocate(30 * kMiB);
  EXPECT_TRUE(c.newSegment);
  EXPECT_EQ(m.stats().overCapacity, 1);
  EXPECT_EQ(m.stats().peakBytesReserved, static_cast<int64_t>(60 * kMiB));
}

TEST(CachingAllocator, IsDeterministic) {
  auto run = [] {
    Model m(64 * kMiB);
    std::vector<uint64_t> addresses;
    std::vector<uint64_t> live;
    for (size_t i = 1; i < 500; ++i) {
      const auto a = m.allocate(i * 37 * 1024);
      addresses.push_back(a.address);
      live.push_back(a.address);
      if (i % 3 == 0) {
        m.free(live.front());
        live.erase(live.begin());
      }
    }
    return addresses;
  };
  EXPECT_EQ(run(), run());
}

// Issue 22, finding 5: the old pool kept blocks by exact size and never reused one for another
// size, so a dynamic model-only run over batch sizes 1..N held O(N^2) bytes (N = 800: 2.3 GB).
TEST(CachingAllocator, DistinctSizesDoNotSquareTheDeviceMemory) {
  const Graph g = parseGraph(
      "graph sq(%x: f32[B, 1024]) {\n"
      "  %h = relu(%x)\n"
      "  %hb = add(%h, %x)\n"
      "  %y = relu(%hb)\n"
      "  return %y\n"
      "}\n",
      "sq.gbx");
  // Every mode without gears: eager and dynamic run op by op, static and auto fall back to it
  // after the recompile limit.
  for (Mode mode : modes()) {
    if (modeInfo(mode).needsGears) continue;
    SessionOptions o;
    o.mode = mode;
    o.modelOnly = true;
    o.historyLimit = 16;
    Session s(g, o);
    for (int64_t b = 1; b <= 400; ++b) {
      std::vector<Tensor> in{Tensor(DType::kF32, Shape{b, 1024})};
      s.run(in);
    }
    // Old: every size kept its own blocks, 2 x 4 KiB x (1 + ... + 400) = 657 MB.
    const CachingAllocatorStats& st = s.device().memoryStats();
    EXPECT_LE(s.stats().peakBytes, int64_t{64} << 20) << modeName(mode);
    // reduce-overhead's captures keep their buffers for replay (as a CUDA graph keeps its
    // private memory pool), 64 captures of batches 1..64 here; every other mode holds none.
    const bool captures = mode == Mode::kReduceOverhead;
    EXPECT_LE(st.segmentAllocs, captures ? 16 : 8) << modeName(mode);
    if (captures)
      EXPECT_LE(st.bytesInUse, int64_t{64} << 20) << modeName(mode);
    else
      EXPECT_EQ(st.bytesInUse, 0) << modeName(mode);
    EXPECT_EQ(s.device().counters().poolMisses, st.segmentAllocs);
  }
}

// Model only: device memory is counted, never backed by host memory.
TEST(CachingAllocator, ModelOnlyDeviceMemoryIsNotMaterialised) {
  InlineDevice dev;
  dev.setExecute(false);
  void* p = dev.allocate(size_t{1} << 40);  // 1 TiB: counted, not allocated
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(dev.counters().poolMisses, 1);
  EXPECT_EQ(dev.counters().bytesAllocated, int64_t{1} << 40);
  dev.release(p, size_t{1} << 40);
  EXPECT_EQ(dev.memoryStats().bytesInUse, 0);
}

}  // namespace
}  // namespace gearbox
