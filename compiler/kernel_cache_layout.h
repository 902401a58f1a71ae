#pragma once
// The shard layout of KernelCache (compiler/kernel_cache.h), apart from the cache itself so a
// model of the cache can replay its lookups without compiling (suggest-gears replays a geared
// run's kernel lookups to count its compiles, evictions included).

#include <cstddef>
#include <vector>

namespace gearbox {

// The shards of a KernelCache of `capacity` kernels: each one's capacity, in order. A key goes
// to shard hash % count (with one shard, all keys), and each shard is an LRU
// (compiler/lru_cache.h) that evicts its least recently used kernel past its capacity.
std::vector<size_t> kernelCacheShardCapacities(size_t capacity);

}  // namespace gearbox
