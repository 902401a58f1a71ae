// The sharded kernel cache (compiler/kernel_cache.h). Each shard is one LruShard -- the same
// shard type as the plan cache's LruCache -- behind its own spin lock.
#include "compiler/kernel_cache.h"

#include <tbb/spin_mutex.h>

#include <cassert>
#include <chrono>
#include <condition_variable>

#include "compiler/compile_log.h"
#include "compiler/kernel_cache_layout.h"

namespace gearbox {

// Cache-line aligned: shards are written on every lookup (lock, recency), and two shards sharing
// a line would make threads working on different shards contend anyway.
struct alignas(64) KernelCache::Shard {
  explicit Shard(size_t capacity) : lru(capacity) {}
  // Guards everything below; critical sections are a lookup or an insert, never a compile.
  mutable tbb::spin_mutex mu;
  // A key being compiled is a pinned entry with a null spec: a second thread asking for it
  // waits for the first instead of compiling it again, so shared op shapes compile once even
  // in parallel, and a miss is one insert (one copy of the key) in one shard.
  LruShard<KernelKey, SpecPtr> lru;
  int64_t compiles = 0, storeHits = 0, memoHits = 0;
  double compileSeconds = 0;
  // Waiters for an in-flight entry (rare): notified only when there are any.
  std::condition_variable_any done;
  int waiters = 0;
};

std::vector<size_t> kernelCacheShardCapacities(size_t capacity) {
  capacity = capacity == 0 ? 1 : capacity;
  size_t n = 1;
  if (capacity >= KernelCache::kShardedCapacity)
    while (n < KernelCache::kMaxShards && capacity / (2 * n) >= KernelCache::kMinShardCapacity)
      n *= 2;
  std::vector<size_t> out;
  for (size_t i = 0; i < n; ++i) out.push_back((capacity + n - 1 - i) / n);
  return out;
}

KernelCache::KernelCache(size_t capacity, int threads)
    : capacity_(capacity == 0 ? 1 : capacity), threads_(threads) {
  for (size_t c : kernelCacheShardCapacities(capacity_))
    shards_.push_back(std::make_unique<Shard>(c));
}

KernelCache::~KernelCache() = default;

std::shared_ptr<const KernelSpec> KernelCache::get(const KernelKey& key, size_t hash,
                                                   int* compiled) {
  // A key built for another thread cap would put a kernel split for other threads into this
  // session's plans: every caller builds its keys with threads().
  assert(key.threads == threads_ && "a kernel key with another thread cap than its cache's");
  Shard& shard = *shards_[shards_.size() == 1 ? 0 : hash % shards_.size()];
  std::unique_lock<tbb::spin_mutex> lock(shard.mu);
  // Exactly one caller per key counts a miss (the one that compiles or loads it); everyone
  // else counts a hit, so the counters are the same whatever the thread interleaving.
  for (;;) {
    auto* e = shard.lru.find(key, hash);
    if (!e) break;
    if (!e->pinned) {
      shard.lru.countHit();
      shard.lru.touch(e);
      return e->value;
    }
    // In flight on another thread. If that compile fails the entry is gone when we wake, and
    // this caller compiles the key itself (and fails the same way).
    ++shard.waiters;
    shard.done.wait(lock);
    --shard.waiters;
  }
  shard.lru.countMiss();
  auto* entry = shard.lru.insert(key, hash, nullptr, /*pinned=*/true);
  lock.unlock();

  SpecPtr spec;
  bool fromStore = false;
  double secs = 0;
  try {
    spec = loadOrCompile(key, compiled, &fromStore, &secs);
  } catch (...) {
    lock.lock();
    shard.lru.erase(entry);
    const bool wake = shard.waiters > 0;
    lock.unlock();
    if (wake) shard.done.notify_all();
    throw;
  }
  lock.lock();
  // Recency and the insert count at completion, as if the finished kernel had been put then;
  // least recently used finished kernels past capacity are evicted, in-flight ones stay.
  shard.lru.unpin(entry, spec);
  if (fromStore) {
    ++shard.storeHits;
  } else {
    ++shard.compiles;
    shard.compileSeconds += secs;
  }
  const bool wake = shard.waiters > 0;
  lock.unlock();
  if (wake) shard.done.notify_all();
  return spec;
}

void KernelCache::countMemoHits(int64_t n) {
  if (n <= 0) return;
  Shard& shard = *shards_.front();
  std::lock_guard<tbb::spin_mutex> lock(shard.mu);
  shard.memoHits += n;
}

KernelCache::SpecPtr KernelCache::loadOrCompile(const KernelKey& key, int* compiled,
                                                bool* fromStore, double* secs) {
  for (auto& store : stores_) {
    if (auto loaded = store->load(key)) {
      *fromStore = true;
      return loaded;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const KernelSpec> spec = compileKernelSpec(key);
  const auto end = std::chrono::steady_clock::now();
  *secs = std::chrono::duration<double>(end - start).count();
  for (auto& observe : observers_) observe(*spec, start, end);
  // The exact line seed 000's workflow greps for; one per kernel compile.
  compileLogger()->info("To compile op: {}", spec->name);
  if (!hooks_.empty()) {
    // Hooks (the session's compile log, op-info recorders) are not thread-safe themselves.
    std::lock_guard lock(hookMu_);
    for (auto& hook : hooks_) hook(*spec);
  }
  for (auto& store : stores_) store->save(*spec);
  if (compiled) ++*compiled;
  return spec;
}

KernelCacheStats KernelCache::stats() const {
  KernelCacheStats s;
  for (const auto& shard : shards_) {
    std::lock_guard<tbb::spin_mutex> lock(shard->mu);
    const CacheStats c = shard->lru.stats();
    s.cache.hits += c.hits + shard->memoHits;
    s.cache.misses += c.misses;
    s.cache.evictions += c.evictions;
    s.cache.inserts += c.inserts;
    s.cache.size += c.size;
    s.cache.capacity += c.capacity;
    s.compiles += shard->compiles;
    s.storeHits += shard->storeHits;
    s.compileSeconds += shard->compileSeconds;
  }
  return s;
}

}  // namespace gearbox
