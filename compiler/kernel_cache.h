#pragma once
// The op-level kernel cache, its stores (kernel_meta, bundles) and compile hooks. The shards'
// locks (oneTBB spin mutexes) live in kernel_cache.cpp, so including this header pulls in no
// oneTBB header.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "compiler/kernel_spec.h"
#include "compiler/lru_cache.h"

namespace gearbox {

// Where compiled kernels can come from besides compiling: a persistent kernel_meta directory
// or a precompiled bundle (compiler/kernel_store.h). load() returns nullptr on a miss.
class KernelStore {
 public:
  virtual ~KernelStore() = default;
  virtual std::shared_ptr<const KernelSpec> load(const KernelKey& key) = 0;
  // Whether load(key) would find a kernel, without counting it as served (reduce-overhead mode
  // asks before choosing a static kernel over a generic one).
  virtual bool has(const KernelKey& key) { return load(key) != nullptr; }
  virtual void save(const KernelSpec& spec) = 0;
};

// Observes every kernel actually compiled (for --record-op-info and reports).
using KernelCompileHook = std::function<void(const KernelSpec&)>;
// Observes every kernel compile with its measured start and end (executor/timeline.h). Called
// on the compiling thread with no lock held, so it must be thread-safe itself.
using KernelCompileObserver =
    std::function<void(const KernelSpec&, std::chrono::steady_clock::time_point start,
                       std::chrono::steady_clock::time_point end)>;

struct KernelCacheStats {
  CacheStats cache;
  int64_t compiles = 0;   // kernels compiled in this process
  int64_t storeHits = 0;  // kernels loaded from a KernelStore instead of compiled
  double compileSeconds = 0;
};

// The op-level kernel cache, keyed by op type, dtype, format, every input shape and the
// attributes: two plans that share an op shape share one compiled kernel. Thread-safe, so
// geared mode can compile gears in parallel.
class KernelCache {
 public:
  // Capacities of at least kShardedCapacity are split by key hash over up to kMaxShards
  // shards of at least kMinShardCapacity entries, each with its own lock and LRU list (as
  // LevelDB's and RocksDB's sharded LRU caches): gears compile in parallel, and with few
  // shards the threads kept meeting on the same lock. Smaller caches keep one exact global LRU.
  static constexpr size_t kMaxShards = 64;
  static constexpr size_t kMinShardCapacity = 16;
  static constexpr size_t kShardedCapacity = 256;
  size_t shards() const { return shards_.size(); }

  // `threads` is the thread cap every kernel of this cache is compiled for (KernelKey::threads;
  // 0 = none): the callers build their keys with it (compilePlan reads it from here).
  explicit KernelCache(size_t capacity = 1024, int threads = 0);
  ~KernelCache();
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;
  // Returns the kernel for `key`, compiling it (and logging "To compile op: <name>") on a miss.
  // `compiled` (optional) is incremented when this call compiled.
  std::shared_ptr<const KernelSpec> get(const KernelKey& key, int* compiled = nullptr) {
    return get(key, key.hash(), compiled);
  }
  // The same for a caller that has already hashed the key (`hash` must be key.hash()).
  std::shared_ptr<const KernelSpec> get(const KernelKey& key, size_t hash, int* compiled);
  // Counts `n` hits that a caller served from its own memo of keys it already got from this
  // cache (compilePlan looks each distinct op shape of a plan up once), so the counters are
  // the same as if every lookup had come here.
  void countMemoHits(int64_t n);
  void addStore(std::shared_ptr<KernelStore> store) { stores_.push_back(std::move(store)); }
  void addCompileHook(KernelCompileHook hook) { hooks_.push_back(std::move(hook)); }
  // Add observers before the first get(): the list is read without a lock.
  void addCompileObserver(KernelCompileObserver o) { observers_.push_back(std::move(o)); }
  KernelCacheStats stats() const;
  size_t capacity() const { return capacity_; }
  int threads() const { return threads_; }

 private:
  using SpecPtr = std::shared_ptr<const KernelSpec>;
  struct Shard;  // an LruShard with its lock, counters and in-flight waiters (kernel_cache.cpp)
  SpecPtr loadOrCompile(const KernelKey& key, int* compiled, bool* fromStore, double* secs);

  size_t capacity_;
  int threads_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<std::shared_ptr<KernelStore>> stores_;
  std::vector<KernelCompileHook> hooks_;
  std::vector<KernelCompileObserver> observers_;
  std::mutex hookMu_;
};

}  // namespace gearbox
