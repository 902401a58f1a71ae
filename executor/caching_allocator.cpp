#include "executor/caching_allocator.h"

#include <algorithm>
#include <cassert>
#include <limits>

#include "graph/error.h"

namespace gearbox {

size_t CachingAllocatorModel::roundSize(size_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return kMinBlockSize * ((bytes + kMinBlockSize - 1) / kMinBlockSize);
}

size_t CachingAllocatorModel::segmentSize(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((rounded + kRoundLarge - 1) / kRoundLarge);
}

int CachingAllocatorModel::newBlock(const Block& b) {
  if (!unusedIds_.empty()) {
    const int id = unusedIds_.back();
    unusedIds_.pop_back();
    blocks_[static_cast<size_t>(id)] = b;
    return id;
  }
  blocks_.push_back(b);
  return static_cast<int>(blocks_.size() - 1);
}

void CachingAllocatorModel::dropBlock(int id) {
  blocks_[static_cast<size_t>(id)] = Block{};
  unusedIds_.push_back(id);
}

int64_t CachingAllocatorModel::releaseCached(std::vector<SegmentEvent>* events) {
  int64_t released = 0;
  for (FreeSet* pool : {&smallFree_, &largeFree_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      const int id = std::get<2>(*it);
      const Block& b = blocks_[static_cast<size_t>(id)];
      if (b.prev >= 0 || b.next >= 0) {  // part of a segment still (partly) in use
        ++it;
        continue;
      }
      if (events) events->push_back({b.address, b.size, false});
      stats_.bytesReserved -= static_cast<int64_t>(b.size);
      ++stats_.segmentReleases;
      ++released;
      it = pool->erase(it);
      dropBlock(id);
    }
  }
  return released;
}

CachingAllocatorModel::Allocation CachingAllocatorModel::allocate(
    size_t bytes, std::vector<SegmentEvent>* events) {
  // Far beyond any device: the rounding below must not wrap.
  if (bytes > (size_t{1} << 62))
    fail(ErrorKind::kShape, "a device allocation of {} bytes is beyond any device", bytes);
  const size_t size = roundSize(bytes);
  const bool small = size <= kSmallSize;
  FreeSet& pool = small ? smallFree_ : largeFree_;
  ++stats_.requests;
  Allocation a;
  int id = -1;
  auto it = pool.lower_bound({size, 0, std::numeric_limits<int>::min()});
  if (it != pool.end()) {
    id = std::get<2>(*it);
    pool.erase(it);
    ++stats_.cacheHits;
  } else {
    const size_t seg = segmentSize(size);
    if (static_cast<size_t>(stats_.bytesReserved) + seg > capacity_) releaseCached(events);
    if (static_cast<size_t>(stats_.bytesReserved) + seg > capacity_) ++stats_.overCapacity;
    Block b;
    b.address = nextAddress_;
    b.segment = nextAddress_;
    b.size = seg;
    b.small = small;
    nextAddress_ += seg;
    id = newBlock(b);
    if (events) events->push_back({b.address, seg, true});
    ++stats_.segmentAllocs;
    stats_.bytesReserved += static_cast<int64_t>(seg);
    stats_.bytesReservedTotal += static_cast<int64_t>(seg);
    stats_.peakBytesReserved = std::max(stats_.peakBytesReserved, stats_.bytesReserved);
    a.newSegment = true;
  }
  // Split off the rest when it is worth keeping (PyTorch's should_split).
  Block& b = blocks_[static_cast<size_t>(id)];
  const size_t rest = b.size - size;
  if (small ? rest >= kMinBlockSize : rest > kSmallSize) {
    Block r;
    r.address = b.address + size;
    r.segment = b.segment;
    r.size = rest;
    r.small = b.small;
    r.prev = id;
    r.next = b.next;
    b.size = size;
    const int rid = newBlock(r);  // may move blocks_: no references held across it
    Block& bb = blocks_[static_cast<size_t>(id)];
    if (bb.next >= 0) blocks_[static_cast<size_t>(bb.next)].prev = rid;
    bb.next = rid;
    pool.insert({rest, blocks_[static_cast<size_t>(rid)].address, rid});
    ++stats_.splits;
  }
  Block& got = blocks_[static_cast<size_t>(id)];
  got.allocated = true;
  live_.emplace(got.address, id);
  stats_.bytesInUse += static_cast<int64_t>(got.size);
  stats_.peakBytesInUse = std::max(stats_.peakBytesInUse, stats_.bytesInUse);
  a.address = got.address;
  a.segment = got.segment;
  a.size = got.size;
  return a;
}

void CachingAllocatorModel::free(uint64_t address) {
  auto found = live_.find(address);
  assert(found != live_.end() && "freeing a block the allocator did not hand out");
  if (found == live_.end()) return;
  int id = found->second;
  live_.erase(found);
  Block* b = &blocks_[static_cast<size_t>(id)];
  b->allocated = false;
  stats_.bytesInUse -= static_cast<int64_t>(b->size);
  FreeSet& pool = poolOf(*b);
  // Merge with a free previous neighbour: it absorbs this block.
  if (b->prev >= 0 && !blocks_[static_cast<size_t>(b->prev)].allocated) {
    const int pid = b->prev;
    Block& p = blocks_[static_cast<size_t>(pid)];
    pool.erase({p.size, p.address, pid});
    p.size += b->size;
    p.next = b->next;
    if (p.next >= 0) blocks_[static_cast<size_t>(p.next)].prev = pid;
    dropBlock(id);
    id = pid;
    b = &blocks_[static_cast<size_t>(id)];
  }
  // Merge with a free next neighbour: this block absorbs it.
  if (b->next >= 0 && !blocks_[static_cast<size_t>(b->next)].allocated) {
    const int nid = b->next;
    Block& n = blocks_[static_cast<size_t>(nid)];
    pool.erase({n.size, n.address, nid});
    b->size += n.size;
    b->next = n.next;
    if (b->next >= 0) blocks_[static_cast<size_t>(b->next)].prev = id;
    dropBlock(nid);
  }
  pool.insert({b->size, b->address, id});
}

}  // namespace gearbox
