#include "compiler/compiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>

#include "compiler/compile_log.h"
#include "compiler/memory_plan.h"
#include "graph/error.h"

namespace gearbox {

KernelCache::KernelCache(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {
  size_t n = 1;
  if (capacity_ >= kShardedCapacity)
    while (n < kMaxShards && capacity_ / (2 * n) >= kMinShardCapacity) n *= 2;
  for (size_t i = 0; i < n; ++i)
    shards_.push_back(std::make_unique<Shard>((capacity_ + n - 1 - i) / n));
}

std::shared_ptr<const KernelSpec> KernelCache::get(const KernelKey& key, size_t hash,
                                                   int* compiled) {
  Shard& shard = *shards_[shards_.size() == 1 ? 0 : hash % shards_.size()];
  std::unique_lock<tbb::spin_mutex> lock(shard.mu);
  // Exactly one caller per key counts a miss (the one that compiles or loads it); everyone
  // else counts a hit, so the counters are the same whatever the thread interleaving.
  for (;;) {
    auto it = shard.map.find(Ref{&key, hash});
    if (it == shard.map.end()) break;
    if (SpecPtr spec = it->second->spec) {
      ++shard.stats.hits;
      shard.order.splice(shard.order.begin(), shard.order, it->second);
      return spec;
    }
    // In flight on another thread. If that compile fails the entry is gone when we wake, and
    // this caller compiles the key itself (and fails the same way).
    ++shard.waiters;
    shard.done.wait(lock);
    --shard.waiters;
  }
  ++shard.stats.misses;
  shard.order.push_front(Entry{key, hash, nullptr});
  const List::iterator node = shard.order.begin();
  shard.map.emplace(Ref{&node->key, hash}, node);
  lock.unlock();

  SpecPtr spec;
  bool fromStore = false;
  double secs = 0;
  try {
    spec = loadOrCompile(key, compiled, &fromStore, &secs);
  } catch (...) {
    lock.lock();
    shard.map.erase(Ref{&node->key, hash});
    shard.order.erase(node);
    const bool wake = shard.waiters > 0;
    lock.unlock();
    if (wake) shard.done.notify_all();
    throw;
  }
  lock.lock();
  node->spec = spec;
  // Recency and the insert count at completion, as if the finished kernel had been put then.
  shard.order.splice(shard.order.begin(), shard.order, node);
  ++shard.stats.inserts;
  ++shard.ready;
  if (fromStore) {
    ++shard.storeHits;
  } else {
    ++shard.compiles;
    shard.compileSeconds += secs;
  }
  // Evict least recently used finished kernels past capacity; in-flight ones stay.
  for (auto victim = shard.order.end();
       shard.ready > shard.capacity && victim != shard.order.begin();) {
    --victim;
    if (!victim->spec) continue;
    shard.map.erase(Ref{&victim->key, victim->hash});
    victim = shard.order.erase(victim);
    --shard.ready;
    ++shard.stats.evictions;
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
  *secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
    const CacheStats& c = shard->stats;
    s.cache.hits += c.hits + shard->memoHits;
    s.cache.misses += c.misses;
    s.cache.evictions += c.evictions;
    s.cache.inserts += c.inserts;
    s.cache.size += static_cast<int64_t>(shard->ready);
    s.cache.capacity += static_cast<int64_t>(shard->capacity);
    s.compiles += shard->compiles;
    s.storeHits += shard->storeHits;
    s.compileSeconds += shard->compileSeconds;
  }
  return s;
}

std::string Plan::summary() const {
  return fmt::format(
      "plan #{} [{}]: {} steps, {} kernels compiled, {} reused, arena {} B "
      "(without reuse {} B)",
      id, signatureToString(*graph, signature), steps.size(), kernelsCompiled, kernelsReused,
      arenaBytes, naiveBytes);
}

namespace {
std::atomic<uint64_t> gNextPlanId{1};

bool isStaticSignature(const InputSignature& sig) {
  for (const Shape& s : sig)
    if (!s.isStatic()) return false;
  return true;
}
}  // namespace

std::shared_ptr<std::byte> allocateArena(int64_t bytes) {
  const size_t size = static_cast<size_t>(std::max<int64_t>(bytes, kArenaAlignment));
  auto* p = static_cast<std::byte*>(std::aligned_alloc(kArenaAlignment, size));
  if (!p) throw std::bad_alloc();
  return std::shared_ptr<std::byte>(p, [](std::byte* q) { std::free(q); });
}

void bindArena(Plan& plan, std::shared_ptr<std::byte> arena) {
  plan.arena = std::move(arena);
  for (size_t v = 0; v < plan.storage.size(); ++v)
    if (plan.storage[v] == Storage::kArena) plan.ptrs[v] = plan.arena.get() + plan.location[v];
}

std::shared_ptr<Plan> compilePlan(const Graph& g, const InputSignature& sig, KernelCache& kernels,
                                  const PlanCompileOptions& options) {
  return compilePlan(std::make_shared<const Graph>(g), sig, kernels, options);
}

std::shared_ptr<Plan> compilePlan(std::shared_ptr<const Graph> graph, const InputSignature& sig,
                                  KernelCache& kernels, const PlanCompileOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const Graph& g = *graph;
  auto plan = std::make_shared<Plan>();
  plan->id = gNextPlanId++;
  plan->signature = sig;
  plan->types = specializeTypes(g, sig);
  plan->graph = std::move(graph);
  plan->isStatic = isStaticSignature(sig);
  plan->reason = options.reason;
  const std::vector<TensorType>& types = plan->types;
  const size_t nv = g.values.size();
  plan->storage.assign(nv, Storage::kNone);
  plan->location.assign(nv, -1);
  plan->constData.assign(nv, nullptr);

  for (size_t i = 0; i < g.inputs.size(); ++i) {
    plan->storage[g.inputs[i]] = Storage::kInput;
    plan->location[g.inputs[i]] = static_cast<int64_t>(i);
  }
  std::vector<int> producerStep(nv, -1), lastUse(nv, -1);
  size_t numArgs = 0;
  for (const Node& node : g.nodes) numArgs += node.inputs.size();
  plan->steps.reserve(g.nodes.size());
  plan->args.reserve(numArgs);
  // Each distinct op shape of the plan goes to the shared cache once; repeats (a ShuffleNet
  // stage repeats its units) are served from this memo. Parallel gear compiles then write the
  // shared cache's lines (lock, recency list) a few times per plan instead of once per op.
  struct Memo {
    size_t hash;
    std::shared_ptr<const KernelSpec> spec;  // spec->key is the key
  };
  std::vector<Memo> memo;
  memo.reserve(g.nodes.size());
  int64_t memoHits = 0;
  KernelKey key;  // scratch, rebuilt in place for every op
  for (NodeId n = 0; n < static_cast<NodeId>(g.nodes.size()); ++n) {
    const Node& node = g.nodes[n];
    if (node.kind == OpKind::kConst) {
      plan->storage[node.output] = Storage::kConst;
      plan->constData[node.output] = node.constant->data();
      continue;
    }
    PlanStep step;
    step.node = n;
    step.out = node.output;
    step.firstArg = static_cast<int32_t>(plan->args.size());
    step.numArgs = static_cast<int32_t>(node.inputs.size());
    const int stepIndex = static_cast<int>(plan->steps.size());
    for (ValueId v : node.inputs) {
      plan->args.push_back(v);
      lastUse[v] = stepIndex;
    }
    makeKernelKeyInto(key, g, types, n);
    const size_t hash = key.hash();
    auto seen = std::find_if(memo.begin(), memo.end(),
                             [&](const Memo& m) { return m.hash == hash && m.spec->key == key; });
    int compiled = 0;
    if (seen != memo.end()) {
      step.kernel = seen->spec;
      ++memoHits;
    } else {
      step.kernel = kernels.get(key, hash, &compiled);
      memo.push_back(Memo{hash, step.kernel});
    }
    step.compiled = compiled > 0;
    plan->kernelsCompiled += compiled;
    plan->kernelsReused += compiled ? 0 : 1;
    producerStep[node.output] = stepIndex;
    plan->steps.push_back(std::move(step));
  }
  // Graph outputs produced by a kernel are written straight into the caller's buffers; the
  // first occurrence owns the buffer, repeats (and returned inputs/consts) are copied.
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const ValueId v = g.outputs[i];
    if (producerStep[v] >= 0 && plan->storage[v] == Storage::kNone) {
      plan->storage[v] = Storage::kOutput;
      plan->location[v] = static_cast<int64_t>(i);
    }
  }
  kernels.countMemoHits(memoHits);
  std::vector<BufferRequest> requests;
  std::vector<ValueId> requestValue;
  requests.reserve(nv);
  requestValue.reserve(nv);
  for (ValueId v = 0; v < static_cast<ValueId>(nv); ++v) {
    if (producerStep[v] < 0 || plan->storage[v] != Storage::kNone) continue;
    plan->storage[v] = Storage::kArena;
    if (!plan->isStatic) continue;  // dynamic plans allocate per call from a pool
    const TensorType& t = types[v];
    requests.push_back(BufferRequest{
        static_cast<int64_t>(t.shape.numel()) * static_cast<int64_t>(dtypeSize(t.dtype)),
        producerStep[v], std::max(producerStep[v], lastUse[v])});
    requestValue.push_back(v);
  }
  if (plan->isStatic) {
    MemoryPlan mp = planMemory(requests);
    for (size_t i = 0; i < requests.size(); ++i) plan->location[requestValue[i]] = mp.offsets[i];
    plan->arenaBytes = mp.arenaBytes;
    plan->naiveBytes = mp.naiveBytes;
  }
  plan->ptrs.assign(nv, nullptr);
  plan->argPtrs.assign(plan->args.size(), nullptr);
  for (ValueId v = 0; v < static_cast<ValueId>(nv); ++v)
    if (plan->storage[v] == Storage::kConst) plan->ptrs[v] = const_cast<void*>(plan->constData[v]);
  if (plan->isStatic && options.allocateArena) bindArena(*plan, allocateArena(plan->arenaBytes));
  plan->compileSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto& log = compileLogger();
  if (log->should_log(spdlog::level::info))
    log->info("Compiled graph {} plan #{} for [{}] ({}): {} kernels compiled, {} reused", g.name,
              plan->id, signatureToString(g, sig), options.reason, plan->kernelsCompiled,
              plan->kernelsReused);
  return plan;
}

}  // namespace gearbox
