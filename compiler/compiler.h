#pragma once
// The static compiler: input signature -> specialised graph -> verification -> memory plan ->
// per-op kernels from the kernel cache -> a Plan (cached by signature in a PlanCache).
//
//   build graph -> compilePlan(graph, signature) -> Plan (cached) -> bind buffers -> run
//
// Nothing compiles inside run; a static plan's run allocates nothing (executor/plan_runner.h).

#include <tbb/spin_mutex.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/kernel_spec.h"
#include "compiler/lru_cache.h"
#include "compiler/specialize.h"

namespace gearbox {

// Where compiled kernels can come from besides compiling: a persistent kernel_meta directory
// or a precompiled bundle (compiler/kernel_store.h). load() returns nullptr on a miss.
class KernelStore {
 public:
  virtual ~KernelStore() = default;
  virtual std::shared_ptr<const KernelSpec> load(const KernelKey& key) = 0;
  virtual void save(const KernelSpec& spec) = 0;
};

// Observes every kernel actually compiled (for --record-op-info and reports).
using KernelCompileHook = std::function<void(const KernelSpec&)>;

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

  explicit KernelCache(size_t capacity = 1024);
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
  KernelCacheStats stats() const;
  size_t capacity() const { return capacity_; }

 private:
  using SpecPtr = std::shared_ptr<const KernelSpec>;
  // One cached kernel, or one being compiled right now (spec still null): a second thread
  // asking for that key waits for the first instead of compiling it again, so shared op
  // shapes compile once even in parallel. Keeping in-flight keys in the same map as cached
  // ones makes a miss one insert (one copy of the key) in one shard.
  struct Entry {
    KernelKey key;
    size_t hash;
    SpecPtr spec;
  };
  using List = std::list<Entry>;  // most recently used first; nodes never move
  struct Ref {                    // a map key pointing at the key in a list node
    const KernelKey* key;
    size_t hash;  // computed once per lookup, outside the lock
  };
  struct RefHash {
    size_t operator()(const Ref& r) const { return r.hash; }
  };
  struct RefEq {
    bool operator()(const Ref& a, const Ref& b) const {
      return a.hash == b.hash && *a.key == *b.key;
    }
  };
  // Cache-line aligned: shards are written on every lookup (lock, recency), and two shards
  // sharing a line would make threads working on different shards contend anyway.
  struct alignas(64) Shard {
    explicit Shard(size_t c) : capacity(c) {}
    // Guards everything below; critical sections are a lookup or an insert, never a compile.
    mutable tbb::spin_mutex mu;
    size_t capacity;
    List order;
    std::unordered_map<Ref, List::iterator, RefHash, RefEq> map;
    size_t ready = 0;  // entries with a spec (in-flight ones are never evicted)
    CacheStats stats;
    int64_t compiles = 0, storeHits = 0, memoHits = 0;
    double compileSeconds = 0;
    // Waiters for an in-flight entry (rare): notified only when there are any.
    std::condition_variable_any done;
    int waiters = 0;
  };
  SpecPtr loadOrCompile(const KernelKey& key, int* compiled, bool* fromStore, double* secs);

  size_t capacity_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<std::shared_ptr<KernelStore>> stores_;
  std::vector<KernelCompileHook> hooks_;
  std::mutex hookMu_;
};

// Where the data of one value lives while a plan runs.
enum class Storage : uint8_t { kInput, kConst, kArena, kOutput, kNone };

struct PlanStep {
  std::shared_ptr<const KernelSpec> kernel;
  NodeId node = 0;
  int32_t firstArg = 0;  // into Plan::args
  int32_t numArgs = 0;
  ValueId out = 0;
  bool compiled = false;  // this plan's compile compiled the kernel (not a cache or memo hit)
};

struct Plan {
  uint64_t id = 0;
  InputSignature signature;  // may hold dynamic dims (automatic-dynamic plans)
  // The graph compiled, shared with the session and every other plan of it: a plan is
  // compiled per shape (64 at once for 64 gears), and copying the graph each time was most of
  // a plan's allocations.
  std::shared_ptr<const Graph> graph;
  std::vector<TensorType> types;  // per value of `graph`, specialised to `signature`
  bool isStatic = true;           // every dim concrete: runs with precompiled params, no allocation
  std::vector<PlanStep> steps;
  std::vector<ValueId> args;           // flattened step inputs
  std::vector<Storage> storage;        // per value
  std::vector<int64_t> location;       // per value: input index, arena offset, or output index
  std::vector<const void*> constData;  // per value (consts only)
  int64_t arenaBytes = 0;              // peak intermediate bytes after reuse
  int64_t naiveBytes = 0;              // without reuse
  int kernelsCompiled = 0;             // kernel compiles this plan caused (others were cache hits)
  int kernelsReused = 0;
  double compileSeconds = 0;  // measured host time
  std::string reason;

  // Scratch owned by the plan so that running it allocates nothing. A plan runs on one
  // thread at a time (the session's).
  std::shared_ptr<std::byte> arena;
  mutable std::vector<void*> ptrs;  // per value
  mutable std::vector<const void*> argPtrs;

  std::string summary() const;
};

struct PlanCompileOptions {
  std::string reason;
  // A static plan gets its own arena. Plans that never run at the same time can share one
  // instead (the gears of a session: one call runs one gear): compile them without, then
  // bindArena one arena of the largest arenaBytes to each.
  bool allocateArena = true;
};

// An arena of at least `bytes` (kArenaAlignment-aligned), and pointing a static plan's arena
// values into it. bindArena needs arena.size >= plan.arenaBytes.
std::shared_ptr<std::byte> allocateArena(int64_t bytes);
void bindArena(Plan& plan, std::shared_ptr<std::byte> arena);

// Compiles `g` for `sig`. With a fully static signature every kernel is static; with
// dynamic dims left in `sig` the kernels are shape-generic (dynamic mode). Throws Error.
std::shared_ptr<Plan> compilePlan(std::shared_ptr<const Graph> g, const InputSignature& sig,
                                  KernelCache& kernels, const PlanCompileOptions& options = {});
// Convenience for one-off compiles: the plan keeps its own copy of `g`.
std::shared_ptr<Plan> compilePlan(const Graph& g, const InputSignature& sig, KernelCache& kernels,
                                  const PlanCompileOptions& options = {});

using PlanCache = LruCache<InputSignature, std::shared_ptr<Plan>, SignatureHash>;

}  // namespace gearbox
