// suggest-gears (driver/gear_suggest.h).
#include "driver/gear_suggest.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "compiler/kernel_cache.h"
#include "compiler/kernel_cache_layout.h"
#include "compiler/passes.h"
#include "compiler/recompile_policy.h"
#include "executor/caching_allocator.h"
#include "executor/session.h"
#include "gears/gear_choice.h"
#include "graph/checked.h"
#include "graph/error.h"

namespace gearbox::cli {
namespace {

struct KeyHash {
  size_t operator()(const KernelKey& k) const { return k.hash(); }
};
using KeySet = std::unordered_set<KernelKey, KeyHash>;

// MODELED cost of geared mode's plan at one shape: what the gear costs to compile and what
// one call on it costs. The same terms Session::modelCall and GearedMode::prepare charge.
struct ShapeCost {
  std::vector<KernelKey> keys;   // distinct kernel keys of the plan (each compiles once)
  std::vector<uint32_t> keyIds;  // the same, as GearCoster::keyId
  double computeUs = 0;          // the plan's kernels at this shape
  double callUs = 0;             // graph launch + one sync + compute
  int64_t elements = 0;          // input elements (padTarget's tie-break)
};

// One device request of a call, in order (Device::allocate / Device::release): bytes > 0
// allocates into `slot`, bytes == 0 releases it. Zero-byte requests never reach the pool and
// are left out.
struct PoolRequest {
  int64_t bytes = 0;
  int32_t slot = 0;
};

// One call at one shape through the op-by-op path (SessionHost::runOpByOp), as the eager and
// dynamic fallbacks run it: MODELED host work and compute, its launches and syncs, the device
// requests of its pooled intermediates, and its inputs and outputs (the call's I/O term of the
// MODELED memory).
struct OpByOpCost {
  double hostUs = 0;
  double computeUs = 0;
  int64_t launches = 0, syncs = 0;
  int64_t ioBytes = 0;
  std::vector<PoolRequest> pool;
  std::vector<uint32_t> keyIds;  // per op, its runtime kernel key (GearCoster::keyId): the
                                 // eager path looks each up
};

// A plan the dynamic fallback compiles (GearedMode::runFallback): the one with dynamic dims,
// or a static one for sizes 0 and 1, which dynamic mode's policy specialises.
struct FallbackPlan {
  std::shared_ptr<Plan> plan;
  std::vector<char> generic;  // per step: its kernel is shape-generic
};

// Session::modelCall's launch/sync/allocation term, spelled as it is so the sums agree.
double launchSyncUs(const CostModel& c, int64_t graphLaunches, int64_t graphKernels,
                    int64_t launches, int64_t syncs, int64_t poolMisses) {
  return static_cast<double>(graphLaunches) * c.graphLaunchBaseUs +
         static_cast<double>(graphKernels) * c.graphLaunchPerNodeUs +
         static_cast<double>(launches - graphLaunches) * c.launchUs +
         static_cast<double>(syncs) * c.syncUs + static_cast<double>(poolMisses) * c.allocUs;
}

class GearCoster {
 public:
  GearCoster(const Graph& g, const InputSignature& first, const CostModel& cost, bool runPasses,
             std::span<const std::string> disabledPasses = {})
      : cost_(cost),
        // The dynamic fallback leaves dynamic what dynamic mode does (GearedMode's policy).
        fallbackDims_(DynamicDimPolicy::Start::kDeclared, {}, {}) {
    Graph copy = g;
    verifyGraph(copy);
    // What Session does before any mode.
    if (runPasses) defaultPipeline(disabledPasses).run(copy);
    graph_ = std::make_shared<const Graph>(std::move(copy));
    // One plan gives the steps (the nodes that launch a kernel); every other shape reuses the
    // step list with its own specialised types, as a padded call's model does.
    KernelCache kernels(64);
    auto plan = compilePlan(graph_, first, kernels, PlanCompileOptions{"suggest-gears", false});
    for (const PlanStep& s : plan->steps) steps_.push_back(s.node);
  }

  const Graph& graph() const { return *graph_; }
  const CostModel& cost() const { return cost_; }
  size_t steps() const { return steps_.size(); }
  double graphCompileUs() const { return cost_.graphCompile(graph_->nodes.size()); }

  const ShapeCost& at(const InputSignature& sig) {
    auto it = cache_.find(sig);
    if (it != cache_.end()) return it->second;
    const std::vector<TensorType> types = typesAt(sig);
    ShapeCost c;
    KeySet seen;
    KernelKey key;
    for (NodeId n : steps_) {
      makeKernelKeyInto(key, *graph_, types, n);
      c.computeUs += cost_.kernelRun(key, false);
      if (seen.insert(key).second) {
        c.keys.push_back(key);
        c.keyIds.push_back(keyId(key));
      }
    }
    c.callUs = c.computeUs + cost_.graphLaunch(steps_.size()) + cost_.syncUs;
    for (const Shape& s : sig) c.elements += s.numel();
    return cache_.emplace(sig, std::move(c)).first->second;
  }
  double kernelCompileUs(const KernelKey& k) const { return cost_.kernelCompile(k); }
  size_t cached() const { return cache_.size(); }

  // A small id per distinct kernel key, with its hash and MODELED compile cost, so the kernel
  // cache's replay (KernelCacheReplay) looks up integers instead of hashing and copying keys.
  uint32_t keyId(const KernelKey& k) {
    auto [it, fresh] = keyIds_.try_emplace(k, static_cast<uint32_t>(keyHashes_.size()));
    if (fresh) {
      keyHashes_.push_back(k.hash());
      keyCompileUs_.push_back(cost_.kernelCompile(k));
    }
    return it->second;
  }
  size_t keyHash(uint32_t id) const { return keyHashes_[id]; }
  double keyCompileUs(uint32_t id) const { return keyCompileUs_[id]; }

  // MODELED device memory of one gear shape (executor/device_memory.h): its workspace and its
  // inputs and outputs, planned as geared mode compiles it (the passes have run on graph_).
  // Cached by shape, as at() is; planned only for shapes a gear set names.
  const PlanMemory& memoryAt(const InputSignature& sig) {
    auto it = memory_.find(sig);
    if (it != memory_.end()) return it->second;
    const ShapeSetMemory m =
        modeledPlanMemory(*graph_, std::span(&sig, 1), GraphPool::kShared, /*runPasses=*/false);
    return memory_.emplace(sig, m.plans.front()).first->second;
  }
  int64_t weightBytes() {
    if (weights_ < 0) weights_ = graphWeightBytes(*graph_);
    return weights_;
  }

  // The dynamic fallback's plan for `sig` (DynamicDimPolicy::target, as GearedMode compiles
  // it), by index into fallbackPlan(); compiled once per target (without an arena, into a
  // scratch kernel cache: only its steps and kernels are read).
  size_t fallbackPlanFor(const InputSignature& sig) {
    const InputSignature target = fallbackDims_.target(*graph_, sig);
    auto it = fallbackIndex_.find(target);
    if (it != fallbackIndex_.end()) return it->second;
    FallbackPlan fp;
    fp.plan = compilePlan(graph_, target, scratchKernels_,
                          PlanCompileOptions{"suggest-gears: gear fallback dynamic", false});
    for (const PlanStep& s : fp.plan->steps) fp.generic.push_back(s.kernel->generic ? 1 : 0);
    fallbackPlans_.push_back(std::move(fp));
    return fallbackIndex_[target] = fallbackPlans_.size() - 1;
  }
  const FallbackPlan& fallbackPlan(size_t index) const { return fallbackPlans_[index]; }

  // One call at `sig` on the op-by-op path: the eager fallback's (`plan` = -1: every kernel
  // static, one sync at the end) or the dynamic fallback's with plan `plan` (its kernels'
  // genericness, a sync per op under sync_policy per_op). The terms runOpByOp charges, in its
  // order; cached per path and shape.
  const OpByOpCost& opByOpAt(const InputSignature& sig, int plan) {
    auto& byShape = opByOp_[plan];
    auto it = byShape.find(sig);
    if (it != byShape.end()) return it->second;
    const Graph& g = *graph_;
    const std::vector<TensorType> types = typesAt(sig);
    OpByOpCost c;
    const size_t nv = g.values.size();
    std::vector<int> remaining(nv, 0), slot(nv, -1);
    for (const Node& n : g.nodes)
      for (ValueId v : n.inputs) remaining[v]++;
    std::vector<char> isOutput(nv, 0);
    for (ValueId v : g.outputs) isOutput[v] = 1;
    int32_t slots = 0;
    size_t step = 0;
    KernelKey key;
    for (NodeId n = 0; n < static_cast<NodeId>(g.nodes.size()); ++n) {
      const Node& node = g.nodes[n];
      if (node.kind == OpKind::kConst) continue;
      if (!isOutput[node.output]) {
        const int64_t bytes = checkedBytes(types[node.output].shape, types[node.output].dtype,
                                           "op-by-op intermediate");
        if (bytes > 0) {
          slot[node.output] = slots;
          c.pool.push_back({bytes, slots++});
        }
      }
      makeKernelKeyInto(key, g, types, n);
      if (plan < 0) c.keyIds.push_back(keyId(key));
      const bool generic = plan >= 0 && fallbackPlans_[static_cast<size_t>(plan)].generic[step];
      c.hostUs += cost_.hostShapeInferenceUs + (generic ? cost_.hostTilingUs : 0.0);
      c.computeUs += cost_.kernelRun(key, generic);
      ++c.launches;
      ++step;
      for (ValueId v : node.inputs)
        if (--remaining[v] == 0 && slot[v] >= 0) {
          c.pool.push_back({0, slot[v]});
          slot[v] = -1;
        }
    }
    for (ValueId v = 0; v < static_cast<ValueId>(nv); ++v)
      if (slot[v] >= 0) c.pool.push_back({0, slot[v]});
    const bool perOp = plan >= 0 && cost_.syncPolicy == SyncPolicy::kPerOp;
    c.syncs = perOp ? c.launches : 1;
    for (size_t i = 0; i < g.inputs.size(); ++i)
      c.ioBytes = addOrFail(c.ioBytes, checkedBytes(sig[i], types[g.inputs[i]].dtype, "input"),
                            "call inputs and outputs");
    for (ValueId v : g.outputs)
      c.ioBytes = addOrFail(c.ioBytes, checkedBytes(types[v].shape, types[v].dtype, "output"),
                            "call inputs and outputs");
    return byShape.emplace(sig, std::move(c)).first->second;
  }

 private:
  std::vector<TensorType> typesAt(const InputSignature& sig) const {
    try {
      return specializeTypes(*graph_, sig);
    } catch (const Error& e) {
      fail(ErrorKind::kGear, "gear shapes [{}] are rejected by the graph: {}",
           signatureToString(*graph_, sig), e.what());
    }
  }

  const CostModel& cost_;
  std::shared_ptr<const Graph> graph_;
  std::vector<NodeId> steps_;
  std::unordered_map<InputSignature, ShapeCost, SignatureHash> cache_;
  std::unordered_map<InputSignature, PlanMemory, SignatureHash> memory_;
  int64_t weights_ = -1;
  DynamicDimPolicy fallbackDims_;
  KernelCache scratchKernels_{256};
  std::vector<FallbackPlan> fallbackPlans_;
  std::unordered_map<InputSignature, size_t, SignatureHash> fallbackIndex_;
  std::map<int, std::unordered_map<InputSignature, OpByOpCost, SignatureHash>> opByOp_;
  std::unordered_map<KernelKey, uint32_t, KeyHash> keyIds_;
  std::vector<size_t> keyHashes_;
  std::vector<double> keyCompileUs_;
};

struct Histogram {
  std::vector<VaryingSymbol> symbols;
  InputSignature base;                       // the first call; non-varying dims keep its sizes
  std::vector<std::vector<int64_t>> tuples;  // ascending (lexicographic)
  std::vector<int64_t> counts;
  int64_t calls = 0;
  std::vector<uint32_t> sequence;  // per call of the trace, in order: its index into tuples
  std::vector<uint32_t> lastCall;  // per tuple, the index of its last call in `sequence`
};

Histogram buildHistogram(const Graph& g, const std::vector<InputSignature>& trace) {
  if (trace.empty()) fail(ErrorKind::kGear, "the trace has no calls to choose gears for");
  Histogram h;
  h.base = trace.front();
  // One hash per call: each distinct shape gets an id on first sight, and the call order is
  // kept as ids (the device pool and the dynamic fallback's plans depend on it).
  struct Seen {
    uint32_t id = 0;
    int64_t count = 0;
  };
  std::unordered_map<InputSignature, Seen, SignatureHash> distinct;
  if (trace.size() > std::numeric_limits<uint32_t>::max())
    fail(ErrorKind::kGear, "the trace has {} calls; suggest-gears takes at most {}", trace.size(),
         std::numeric_limits<uint32_t>::max());
  h.sequence.resize(trace.size());
  for (size_t i = 0; i < trace.size(); ++i) {
    auto [it, fresh] = distinct.try_emplace(trace[i]);
    if (fresh) it->second.id = static_cast<uint32_t>(distinct.size() - 1);
    it->second.count++;
    h.sequence[i] = it->second.id;
  }
  // Dims that vary, grouped by symbol (a -1 dim is its own group).
  std::map<int64_t, size_t> bySymbol;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Shape& decl = g.values[g.inputs[i]].type.shape;
    for (int d = 0; d < decl.rank(); ++d) {
      bool varies = false;
      for (const auto& entry : distinct)
        if (entry.first[i][d] != h.base[i][d]) {
          varies = true;
          break;
        }
      if (!varies && !isSymbolDim(decl[d])) continue;
      if (isSymbolDim(decl[d])) {
        auto [it, fresh] = bySymbol.emplace(decl[d], h.symbols.size());
        if (fresh) h.symbols.push_back(VaryingSymbol{symbolName(decl[d]), {}});
        h.symbols[it->second].dims.push_back(InputDim{static_cast<int>(i), d});
        continue;
      }
      h.symbols.push_back(VaryingSymbol{fmt::format("{}.{}", g.values[g.inputs[i]].name, d),
                                        {InputDim{static_cast<int>(i), d}}});
    }
  }
  // A symbol group is kept only when it varies somewhere.
  std::vector<VaryingSymbol> varying;
  for (VaryingSymbol& s : h.symbols) {
    bool varies = false;
    for (const auto& entry : distinct)
      for (const InputDim& d : s.dims)
        varies = varies || entry.first[d.input][d.dim] != h.base[d.input][d.dim];
    if (varies) varying.push_back(std::move(s));
  }
  // Groups that take equal sizes in every call are one group: seed 001's x1 and x2 are both
  // [-1, 2] (no shared symbol) but always added, so gearing them apart would only make
  // combinations the graph rejects.
  std::vector<VaryingSymbol> merged;
  for (VaryingSymbol& s : varying) {
    bool joined = false;
    for (VaryingSymbol& m : merged) {
      bool equal = true;
      for (const auto& entry : distinct)
        if (entry.first[s.dims[0].input][s.dims[0].dim] !=
            entry.first[m.dims[0].input][m.dims[0].dim]) {
          equal = false;
          break;
        }
      if (!equal) continue;
      m.name += "=" + s.name;
      m.dims.insert(m.dims.end(), s.dims.begin(), s.dims.end());
      joined = true;
      break;
    }
    if (!joined) merged.push_back(std::move(s));
  }
  h.symbols = std::move(merged);
  if (h.symbols.empty())
    fail(ErrorKind::kGear,
         "no input dim varies in the trace ({} calls of one shape): static mode compiles it once, "
         "and gears need a dim that varies",
         trace.size());
  std::map<std::vector<int64_t>, int64_t> tuples;
  std::vector<std::vector<int64_t>> tupleOfId(distinct.size());
  for (const auto& [sig, seen] : distinct) {
    std::vector<int64_t> t;
    for (const VaryingSymbol& s : h.symbols) t.push_back(sig[s.dims[0].input][s.dims[0].dim]);
    tuples[t] += seen.count;
    tupleOfId[seen.id] = std::move(t);
  }
  std::map<std::vector<int64_t>, uint32_t> index;
  for (const auto& [t, c] : tuples) {
    index.emplace(t, static_cast<uint32_t>(h.tuples.size()));
    h.tuples.push_back(t);
    h.counts.push_back(c);
    h.calls += c;
  }
  std::vector<uint32_t> tupleIndex(distinct.size());
  for (size_t id = 0; id < tupleOfId.size(); ++id) tupleIndex[id] = index.at(tupleOfId[id]);
  h.lastCall.assign(h.tuples.size(), 0);
  for (size_t i = 0; i < h.sequence.size(); ++i) {
    h.sequence[i] = tupleIndex[h.sequence[i]];
    h.lastCall[h.sequence[i]] = static_cast<uint32_t>(i);
  }
  return h;
}

InputSignature signatureFor(const Histogram& h, const std::vector<int64_t>& tuple) {
  InputSignature sig = h.base;
  for (size_t k = 0; k < h.symbols.size(); ++k)
    for (const InputDim& d : h.symbols[k].dims) sig[d.input][d.dim] = tuple[k];
  return sig;
}

// The MODELED device memory a geared run of `gears` holds at most: the weights, every gear's
// workspace by the graph pool (shared: the largest; separate: the sum) and the largest gear's
// inputs and outputs (DeviceMemoryModel's terms; what the run's out-of-memory check adds up).
// `pads`: some call pads up to a gear. A padded call's input copies come from the device's
// caching allocator (executor/modes/geared.cpp), whose pool keeps the segments: the op-by-op
// pool term of the run, here the allocator model's reservation for the copies of the largest
// gear's varying inputs.

// Why `c` is over a budget of `o`, or empty when it is within both.
std::string overBudget(const GearCandidate& c, const SuggestOptions& o) {
  if (o.maxMemoryBytes > 0 && c.memoryBytes > o.maxMemoryBytes)
    return fmt::format("needs {} of MODELED device memory, above the budget of {}",
                       humanBytes(c.memoryBytes), humanBytes(o.maxMemoryBytes));
  if (o.maxStartupUs > 0 && c.startupUs() > o.maxStartupUs)
    return fmt::format("MODELED start-up {:.0f} us, above --max-startup {:.0f} us", c.startupUs(),
                       o.maxStartupUs);
  return {};
}

// What a gear set is evaluated under: the run's --gear-fallback and --graph-pool, whether the
// graph lets calls pad, and whether to plan its memory (not for sets beyond TorchAir's 100
// gears, which are not allowed anyway: planning them would compile a plan per gear).
struct EvalOptions {
  GearFallback fallback = GearFallback::kPad;
  GraphPool pool = GraphPool::kShared;
  bool padding = true;
  bool memory = true;
};

// The device's caching allocator over the trace's calls (Device::allocate/release), for the
// order-dependent terms: pool misses (alloc_us each) and the op-by-op pool in the MODELED
// memory. Between calls every block is free again and merged back into its segment, so the
// allocator's state is its set of segments, which changes only when a call adds (or, at the
// capacity, releases) one; a call that added none leaves it as it was, and a later call of the
// same requests in the same state adds none either. So each distinct request list is simulated
// once per state, and every other call is one lookup.
class PoolReplay {
 public:
  explicit PoolReplay(size_t lists) : clean_(lists, 0) {}
  // Runs request list `list` (an index the caller keeps per list); returns the pool misses.
  int64_t run(size_t list, const std::vector<PoolRequest>& requests) {
    if (clean_[list] == epoch_ || requests.empty()) return 0;  // the first: no pointer chase
    const CachingAllocatorStats before = allocator_.stats();
    address_.resize(std::max<size_t>(address_.size(), requests.size()));
    for (const PoolRequest& r : requests) {
      if (r.bytes > 0)
        address_[static_cast<size_t>(r.slot)] =
            allocator_.allocate(static_cast<size_t>(r.bytes)).address;
      else
        allocator_.free(address_[static_cast<size_t>(r.slot)]);
    }
    const CachingAllocatorStats& after = allocator_.stats();
    const int64_t misses = after.segmentAllocs - before.segmentAllocs;
    if (misses == 0 && after.segmentReleases == before.segmentReleases)
      clean_[list] = epoch_;
    else
      ++epoch_;  // a new state: every list runs again once
    return misses;
  }
  // CachingAllocatorStats::peakBytesReserved: the op-by-op pool term of the MODELED memory.
  int64_t peakReserved() const { return allocator_.stats().peakBytesReserved; }
  // The allocator's state (it changes only when a call adds or releases a segment), and
  // whether list `list` ran without a miss in it.
  uint32_t state() const { return epoch_; }
  bool clean(size_t list) const { return clean_[list] == epoch_; }

 private:
  CachingAllocatorModel allocator_;  // the Device's, with its default capacity
  std::vector<uint32_t> clean_;      // per list: the state (epoch) it last ran clean in
  uint32_t epoch_ = 1;
  std::vector<uint64_t> address_;
};

// A session's kernel cache (compiler/kernel_cache.h) as a geared run looks kernels up, holding
// no kernels: the same shards (kernelCacheShardCapacities, a key to shard hash % count), each
// with LruShard's policy -- a hit or an insert makes the kernel the most recently used, and
// past its capacity the least recently used is evicted -- so a lookup hits, or misses (a
// compile, charged kernel_compile_us) exactly as KernelCache::get does. Keys are GearCoster
// ids; a shard holds at most 16 of them at the default capacity, so a lookup scans a few
// integers (a thrashing eager fallback does millions). Every lookup is replayed in the run's
// order: a gear's distinct kernels when it compiles, a fallback plan's when it compiles, and
// every op of every eager call.
class KernelCacheReplay {
 public:
  KernelCacheReplay() {
    for (size_t c : kernelCacheShardCapacities(SessionOptions{}.kernelCacheCapacity)) {
      capacity_.push_back(c);
      shards_.emplace_back().reserve(c);
    }
  }
  // The shard of a key with hash `hash`.
  size_t shardOf(size_t hash) const { return shards_.size() == 1 ? 0 : hash % shards_.size(); }
  // Looks kernel `id` (hash `hash`) up; true when it had to compile.
  bool get(uint32_t id, size_t hash) { return getIn(id, shardOf(hash)); }
  // The same with its shard found already.
  bool getIn(uint32_t id, size_t s) {
    std::vector<Entry>& shard = shards_[s];
    for (Entry& e : shard)
      if (e.id == id) {
        e.used = ++clock_;
        return false;
      }
    if (shard.size() < capacity_[s]) {
      shard.push_back({id, ++clock_});
      return true;
    }
    auto oldest = std::min_element(shard.begin(), shard.end(),
                                   [](const Entry& a, const Entry& b) { return a.used < b.used; });
    *oldest = {id, ++clock_};
    ++evictions_;
    return true;
  }
  int64_t evictions() const { return evictions_; }

 private:
  struct Entry {
    uint32_t id;
    uint64_t used;  // when it was last looked up: the smallest is the least recently used
  };
  std::vector<std::vector<Entry>> shards_;
  std::vector<size_t> capacity_;
  uint64_t clock_ = 0;
  int64_t evictions_ = 0;
};

// The MODELED figures of a gear set over the trace, as a geared run of it (--gear-compile
// eager, the given fallback and graph pool) charges them: the gears' up-front compiles, then
// every call on its exact gear, padded up to the covering gear with the fewest input elements
// (GearSet::padTarget's rule), or through the fallback path -- the dynamic fallback compiling
// its plan on the first such call, the eager one each op shape its kernel cache lacks. The
// terms are Session::modelCall's and Session::modelMemory's, so a geared run of the set reports
// the same totals (tests compare them, to 1e-9: a gear's calls are summed per shape here, per
// call there). What depends on the order of the calls is replayed in trace order: the device
// pool (misses, reserved bytes and the MODELED memory peak: weights + workspaces by the pool +
// the op-by-op pool + the call's inputs and outputs), the session's kernel cache
// (KernelCacheReplay, evictions and recompiles included) and the dynamic fallback's plans. A
// set whose calls touch none of them (no padded copies, no fallback) skips the replay.
GearCandidate evaluate(GearCoster& coster, const Histogram& h, std::string name,
                       std::vector<std::vector<int64_t>> gears, const EvalOptions& o) {
  const CostModel& cost = coster.cost();
  GearCandidate c;
  c.name = std::move(name);
  std::sort(gears.begin(), gears.end());
  gears.erase(std::unique(gears.begin(), gears.end()), gears.end());
  c.gears = gears;
  c.compiles = static_cast<int64_t>(gears.size());
  // Up front: every gear's graph compile and the kernels the cache lacks (the run compiles
  // the gears in parallel; here in gear order, which gives the same compiles unless a cache
  // shard overflows before the first call -- a note says so).
  KernelCacheReplay kernels;
  std::vector<const ShapeCost*> gearCost;
  double upFront = 0;
  for (const auto& gear : gears) {
    const ShapeCost& sc = coster.at(signatureFor(h, gear));
    gearCost.push_back(&sc);
    double compiled = 0;
    for (uint32_t k : sc.keyIds)
      if (kernels.get(k, coster.keyHash(k))) compiled += coster.keyCompileUs(k);
    upFront += coster.graphCompileUs() + compiled;
  }
  const int64_t upFrontEvictions = kernels.evictions();
  c.upFrontUs = upFront;
  ModeledTime total, fallback;
  total.compileUs += upFront;

  // MODELED memory: weights and every gear's workspace by the pool, resident from the start.
  int64_t resident = 0;
  std::vector<int64_t> gearIo(gears.size(), 0);
  if (o.memory) {
    int64_t workspace = 0;
    for (size_t g = 0; g < gears.size(); ++g) {
      const PlanMemory& m = coster.memoryAt(signatureFor(h, gears[g]));
      workspace = o.pool == GraphPool::kShared
                      ? std::max(workspace, m.workspaceBytes)
                      : addOrFail(workspace, m.workspaceBytes, "gear set workspace bytes");
      gearIo[g] = m.ioBytes;
    }
    resident = addOrFail(coster.weightBytes(), workspace, "gear set memory");
  }
  int64_t peak = resident;

  // Each distinct shape's route: its gear (exact or padded) or the fallback path.
  const GearFallback path = gearFallbackPath(o.fallback);
  // On a graph that refuses padding a padding fallback still gets its padded calls costed
  // (the row shows what padding would cost) but the set is not allowed.
  const bool pads = gearFallbackPads(o.fallback);
  const bool one = h.symbols.size() == 1;
  const size_t n = h.tuples.size();
  constexpr int32_t kFallback = -2, kNoRoute = -1;
  std::vector<int32_t> route(n, kNoRoute);
  std::vector<char> padded(n, 0);
  for (size_t t = 0; t < n; ++t) {
    const auto& tuple = h.tuples[t];
    int32_t r = kNoRoute;
    const auto exact = std::lower_bound(gears.begin(), gears.end(), tuple);
    if (exact != gears.end() && *exact == tuple) {
      r = static_cast<int32_t>(exact - gears.begin());
    } else if (pads) {
      std::optional<size_t> target;
      if (one) {
        if (exact != gears.end()) target = static_cast<size_t>(exact - gears.begin());
      } else {
        for (size_t g = 0; g < gears.size(); ++g) {
          bool covers = true;
          for (size_t k = 0; k < tuple.size() && covers; ++k) covers = gears[g][k] >= tuple[k];
          if (covers && (!target || gearCost[g]->elements < gearCost[*target]->elements))
            target = g;
        }
      }
      if (target) {
        r = static_cast<int32_t>(*target);
        padded[t] = 1;
        if (!o.padding && c.allowed) {
          c.allowed = false;
          c.note = "needs padding, which the graph refuses";
        }
      }
    }
    if (r == kNoRoute && (path == GearFallback::kDynamic || path == GearFallback::kEager))
      r = kFallback;
    if (r == kNoRoute && c.allowed) {
      c.allowed = false;
      c.note =
          o.fallback == GearFallback::kError
              ? fmt::format("size {} is not a gear (--gear-fallback error)", fmt::join(tuple, "x"))
              : fmt::format("size {} is above every gear", fmt::join(tuple, "x"));
    }
    route[t] = r;
  }

  // The calls on a gear, by shape: one whole-graph launch of the gear's plan and one sync
  // (padded: at the gear's shapes, the waste against the real ones). Order does not matter for
  // these terms; a padded call's copies go to the device pool below, in order.
  const int64_t steps = static_cast<int64_t>(coster.steps());
  std::vector<std::vector<PoolRequest>> padRequests(n);
  std::vector<int64_t> io(n, 0);  // each shape's call inputs and outputs, for the peak
  bool ordered = false;           // some call's terms depend on the calls before it
  for (size_t t = 0; t < n; ++t) {
    const int32_t r = route[t];
    if (r == kFallback) {
      ordered = true;
      continue;
    }
    if (r < 0) continue;
    const double calls = static_cast<double>(h.counts[t]);
    const ShapeCost& run = *gearCost[static_cast<size_t>(r)];
    total.computeUs += calls * run.computeUs;
    total.launchSyncUs += calls * launchSyncUs(cost, 1, steps, 1, 1, 0);
    io[t] = gearIo[static_cast<size_t>(r)];
    if (!padded[t]) continue;
    c.paddedCalls += h.counts[t];
    const ShapeCost& real = coster.at(signatureFor(h, h.tuples[t]));
    total.paddingWasteUs += calls * std::max(0.0, run.computeUs - real.computeUs);
    // GearedMode::run's zero-padded input copies: one request per input whose shape the pad
    // changes, in input order, released after the launch.
    const InputSignature from = signatureFor(h, h.tuples[t]), to = signatureFor(h, gears[r]);
    const Graph& graph = coster.graph();
    std::vector<PoolRequest>& rq = padRequests[t];
    for (size_t i = 0; i < from.size(); ++i) {
      if (from[i] == to[i]) continue;
      const int64_t bytes =
          checkedBytes(to[i], graph.values[graph.inputs[i]].type.dtype, "padded input");
      if (bytes > 0) rq.push_back({bytes, static_cast<int32_t>(rq.size())});
    }
    const size_t copies = rq.size();
    for (size_t i = 0; i < copies; ++i) rq.push_back({0, static_cast<int32_t>(i)});
    ordered = ordered || !rq.empty();
  }

  // The calls in trace order, for what depends on it: the device pool (padded copies and
  // op-by-op intermediates: pool misses, reserved bytes, the memory peak), the kernel cache
  // (the eager fallback's lookups), the dynamic fallback's plans as the calls compile them.
  // The dynamic fallback's plans in compile order (GearedMode::fallbackPlans_): a call runs
  // on the last one that accepts its shapes, else compiles the plan of its target.
  std::vector<size_t> fallbackPlans;
  std::vector<std::pair<size_t, size_t>> planMemo(n, {SIZE_MAX, 0});
  std::vector<const ShapeCost*> staticCost(n, nullptr);
  std::vector<const OpByOpCost*> opCost(n, nullptr);
  // The eager path's terms per shape, flat, with its kernels' ids, shards and compile costs in
  // one array: read on every eager call (a thrashing eager fallback makes millions of lookups),
  // without chasing pointers into the coster's maps.
  struct EagerTerms {
    double hostUs = 0, computeUs = 0;
    int64_t launches = 0, syncs = 0;
    uint32_t firstKey = 0, keys = 0;
    const std::vector<PoolRequest>* pool = nullptr;
  };
  struct EagerKey {
    uint32_t id;
    uint32_t shard;
    double compileUs;
  };
  std::vector<EagerTerms> eager(path == GearFallback::kEager ? n : 0);
  std::vector<EagerKey> eagerKeys;
  PoolReplay pool(n);
  int64_t padMisses = 0, maxIo = 0;
  for (size_t t = 0; t < n; ++t)
    if (route[t] >= 0) maxIo = std::max(maxIo, io[t]);
  bool fallsBack = false;
  for (size_t t = 0; t < n; ++t) fallsBack = fallsBack || route[t] == kFallback;
  if (!ordered) {
    // Nothing touches the device pool or the kernel cache after start-up.
    if (o.memory) peak = std::max(peak, addOrFail(resident, maxIo, "gear set memory"));
  } else if (!fallsBack) {
    // Padded copies only. In one allocator state a shape whose copies ran without a miss
    // runs without one again, so once every shape still to come has, nothing changes: the
    // rest of the trace adds no misses, and its peak is the pool now plus the largest inputs
    // and outputs still to come. `pending` counts the shapes with copies and calls still to
    // come that have not yet run clean in this state.
    auto pendingFrom = [&](int64_t after) {
      int64_t count = 0;
      for (size_t t = 0; t < n; ++t)
        if (!padRequests[t].empty() && static_cast<int64_t>(h.lastCall[t]) > after) ++count;
      return count;
    };
    int64_t pending = pendingFrom(-1);
    size_t i = 0;
    for (; i < h.sequence.size() && pending > 0; ++i) {
      const uint32_t t = h.sequence[i];
      if (route[t] == kNoRoute) continue;
      if (!padRequests[t].empty() && !pool.clean(t)) {
        const uint32_t before = pool.state();
        padMisses += pool.run(t, padRequests[t]);
        if (pool.state() != before)
          pending = pendingFrom(static_cast<int64_t>(i));
        else
          --pending;
      }
      if (o.memory) peak = std::max(peak, resident + pool.peakReserved() + io[t]);
    }
    if (o.memory)
      for (size_t t = 0; t < n; ++t)
        if (route[t] >= 0 && h.lastCall[t] >= i)
          peak = std::max(peak, resident + pool.peakReserved() + io[t]);
  } else {
    const std::vector<uint32_t>& sequence = h.sequence;
    for (size_t i = 0; i < sequence.size(); ++i) {
      const uint32_t t = sequence[i];
      // The eager path reads its shape's terms and kernel ids on every call, at random: fetch
      // a later call's ahead, two stages apart (its kernel ids need its terms).
      if (!eager.empty()) {
        if (i + 16 < sequence.size()) __builtin_prefetch(&eager[sequence[i + 16]]);
        if (i + 8 < sequence.size() && eager[sequence[i + 8]].pool)
          __builtin_prefetch(&eagerKeys[eager[sequence[i + 8]].firstKey]);
      }
      const int32_t r = route[t];
      if (r == kNoRoute) continue;
      if (r >= 0) {
        if (padded[t]) padMisses += pool.run(t, padRequests[t]);
        if (o.memory) peak = std::max(peak, resident + pool.peakReserved() + io[t]);
        continue;
      }
      ModeledTime m;
      if (path == GearFallback::kEager) {
        // Eager mode's path: op by op, each op's kernel from the cache (a new op shape, or one
        // the cache evicted, compiles), one sync.
        EagerTerms& e = eager[t];
        if (!e.pool) {
          const OpByOpCost& op = coster.opByOpAt(signatureFor(h, h.tuples[t]), -1);
          e = {op.hostUs,
               op.computeUs,
               op.launches,
               op.syncs,
               static_cast<uint32_t>(eagerKeys.size()),
               static_cast<uint32_t>(op.keyIds.size()),
               &op.pool};
          for (uint32_t k : op.keyIds)
            eagerKeys.push_back({k, static_cast<uint32_t>(kernels.shardOf(coster.keyHash(k))),
                                 coster.keyCompileUs(k)});
          io[t] = op.ioBytes;
        }
        for (uint32_t j = e.firstKey; j < e.firstKey + e.keys; ++j)
          if (kernels.getIn(eagerKeys[j].id, eagerKeys[j].shard))
            m.compileUs += eagerKeys[j].compileUs;
        const int64_t misses = pool.run(t, *e.pool);
        m.hostDynamicUs += e.hostUs;
        m.computeUs += e.computeUs;
        m.launchSyncUs += launchSyncUs(cost, 0, 0, e.launches, e.syncs, misses);
      } else {
        // Dynamic mode's path: the last fallback plan that accepts the shapes, else a new one.
        auto& [planCount, plan] = planMemo[t];
        if (planCount != fallbackPlans.size()) {
          const InputSignature sig = signatureFor(h, h.tuples[t]);
          std::optional<size_t> found;
          for (size_t p : fallbackPlans)
            if (signatureAccepts(coster.fallbackPlan(p).plan->signature, sig)) found = p;
          if (!found) {
            // The first call this plan serves compiles it: its kernels the cache lacks, then
            // the graph compile (SessionHost::compile's order).
            const size_t p = coster.fallbackPlanFor(sig);
            const Plan& fp = *coster.fallbackPlan(p).plan;
            KeySet memo;  // compilePlan looks each distinct op shape up once
            for (const PlanStep& s : fp.steps) {
              if (!memo.insert(s.kernel->key).second) continue;
              const uint32_t k = coster.keyId(s.kernel->key);
              if (kernels.get(k, coster.keyHash(k))) m.compileUs += coster.keyCompileUs(k);
            }
            m.compileUs += cost.graphCompile(fp.graph->nodes.size());
            c.compiles++;
            fallbackPlans.push_back(p);
            found = p;
          }
          planCount = fallbackPlans.size();
          plan = *found;
          const Plan& fp = *coster.fallbackPlan(plan).plan;
          if (fp.isStatic) {
            staticCost[t] = &coster.at(fp.signature);
            io[t] = coster.memoryAt(fp.signature).ioBytes;
          } else {
            opCost[t] = &coster.opByOpAt(sig, static_cast<int>(plan));
            io[t] = opCost[t]->ioBytes;
          }
        }
        const Plan& fp = *coster.fallbackPlan(plan).plan;
        if (fp.isStatic) {
          // Sizes 0 and 1, specialised: a static plan, one graph launch and one sync.
          m.computeUs += staticCost[t]->computeUs;
          m.launchSyncUs += launchSyncUs(cost, 1, static_cast<int64_t>(fp.steps.size()), 1, 1, 0);
        } else {
          const OpByOpCost& op = *opCost[t];
          const int64_t misses = pool.run(t, op.pool);
          m.hostDynamicUs += op.hostUs;
          m.computeUs += op.computeUs;
          m.launchSyncUs += launchSyncUs(cost, 0, 0, op.launches, op.syncs, misses);
        }
      }
      c.fallbackCalls++;
      fallback += m;
      total += m;
      if (o.memory) peak = std::max(peak, resident + pool.peakReserved() + io[t]);
    }
  }
  total.launchSyncUs += static_cast<double>(padMisses) * cost.allocUs;
  c.computeUs = total.computeUs;
  c.paddingWasteUs = total.paddingWasteUs;
  c.compileUs = total.compileUs;
  c.runUs = total.launchSyncUs + total.computeUs + total.hostDynamicUs;
  c.fallbackUs = fallback.total();
  c.memoryBytes = o.memory ? peak : 0;
  if (c.allowed && upFrontEvictions > 0)
    c.note = fmt::format(
        "its gears' kernels overflow a kernel-cache shard up front ({} evicted): a run compiles "
        "the gears in parallel, so which ones it evicts, and recompiles later, can differ",
        upFrontEvictions);
  return c;
}

// Reference modes run over the trace without executing kernels (--model-only): their counters
// and MODELED figures are exact (docs/cost-model.md).
GearCandidate referenceMode(const Graph& g, const std::vector<InputSignature>& trace,
                            const CostModel& cost, Mode mode, bool runPasses,
                            const std::vector<std::string>& disabledPasses) {
  SessionOptions o;
  o.mode = mode;
  o.cost = cost;
  o.modelOnly = true;
  o.runPasses = runPasses;
  o.disabledPasses = disabledPasses;
  o.historyLimit = 16;
  Session session(g, o);
  // Data is never read in model-only mode: per input, one zero buffer as large as the largest
  // shape the trace gives it, and every call's tensor is a view of it. It used to be one tensor
  // per distinct shape (up to 1024 of them: 2.1 GB for batches 1..1024 of a 1024-wide input)
  // and a fresh zeroed tensor per call after that (issue 22).
  std::vector<std::shared_ptr<std::byte>> buffers(g.inputs.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const DType dt = g.values[g.inputs[i]].type.dtype;
    Shape largest;
    int64_t most = -1;
    for (const InputSignature& sig : trace) {
      if (i >= sig.size()) continue;
      const int64_t bytes = checkedBytes(sig[i], dt, "trace input");
      if (bytes > most) {
        most = bytes;
        largest = sig[i];
      }
    }
    // A Tensor of the largest shape owns the buffer (zero pages, not resident until written).
    if (most >= 0) {
      auto owner = std::make_shared<Tensor>(dt, largest);
      buffers[i] = std::shared_ptr<std::byte>(owner, static_cast<std::byte*>(owner->data()));
    }
  }
  std::vector<Tensor> in(g.inputs.size());
  for (const InputSignature& sig : trace) {
    for (size_t i = 0; i < sig.size(); ++i)
      in[i] = Tensor::wrap(g.values[g.inputs[i]].type.dtype, sig[i], buffers[i]);
    session.run(in);
  }
  const SessionStats& st = session.stats();
  GearCandidate c;
  c.name = modeName(mode);
  c.reference = true;
  c.note = "mode, not a gear set";
  c.compiles = st.graphCompiles;
  c.computeUs = st.modeled.computeUs;
  c.compileUs = st.modeled.compileUs;
  c.runUs = st.modeled.total() - st.modeled.compileUs;
  c.memoryBytes = st.memory.peakBytes;
  return c;
}

std::string gearsJsonFor(const Graph& g, const std::vector<VaryingSymbol>& symbols,
                         const std::vector<std::vector<int64_t>>& gears, MergePolicy merge) {
  // zip: every varying dim lists its value in every gear (TorchAir's zip reads it as is);
  // product: the first dim of each symbol lists its distinct values once (the gears are their
  // product) and the symbol's other dims follow it (shared-symbol gears): listing them too
  // would multiply them against each other.
  std::map<std::string, std::map<int, std::vector<int64_t>>> byInput;
  for (size_t k = 0; k < symbols.size(); ++k)
    for (const InputDim& d : symbols[k].dims) {
      if (merge == MergePolicy::kProduct && !(d == symbols[k].dims[0])) continue;
      auto& list = byInput[g.values[g.inputs[d.input]].name][d.dim];
      for (const auto& gear : gears)
        if (merge == MergePolicy::kZip ||
            std::find(list.begin(), list.end(), gear[k]) == list.end())
          list.push_back(gear[k]);
    }
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [input, dims] : byInput) {
    nlohmann::ordered_json dj = nlohmann::ordered_json::object();
    for (const auto& [dim, values] : dims) dj[std::to_string(dim)] = values;
    j[input] = dj;
  }
  return j.dump();
}

// Per-symbol value lists -> gear tuples (their product, first symbol slowest).
std::vector<std::vector<int64_t>> productOf(const std::vector<std::vector<int64_t>>& lists) {
  std::vector<std::vector<int64_t>> out{{}};
  for (const auto& list : lists) {
    std::vector<std::vector<int64_t>> next;
    for (const auto& prefix : out)
      for (int64_t v : list) {
        auto t = prefix;
        t.push_back(v);
        next.push_back(std::move(t));
      }
    out = std::move(next);
  }
  return out;
}

// Smallest value of sorted `list` >= v (the list always holds the largest size).
int64_t coverOf(const std::vector<int64_t>& list, int64_t v) {
  return *std::lower_bound(list.begin(), list.end(), v);
}

// Several varying symbols: coordinate descent over per-symbol value lists whose product is the
// gear set. Each step re-chooses one symbol's list exactly (chooseGearsByRange) with the other
// lists fixed: a call's gear is then the product of per-symbol covers, so the cost of a value
// covering a run of that symbol's sizes is separable. The first sweep starts from every list
// = {largest size} and reserves room for 2 values per later symbol; sweeps repeat while the
// exact total (evaluate) improves, at most 8. Not exact in general: tests measure the gap to
// exhaustive search on small traces.
void multiSymbol(GearCoster& coster, const Histogram& h, size_t limit, GearSuggestion& s) {
  const size_t m = h.symbols.size();
  std::vector<std::vector<int64_t>> sizes(m);
  for (size_t k = 0; k < m; ++k) {
    for (const auto& t : h.tuples) sizes[k].push_back(t[k]);
    std::sort(sizes[k].begin(), sizes[k].end());
    sizes[k].erase(std::unique(sizes[k].begin(), sizes[k].end()), sizes[k].end());
    if (sizes[k].size() > 1000)
      fail(ErrorKind::kGear,
           "symbol {} takes {} distinct sizes; with several varying symbols suggest-gears "
           "handles at most 1000 per symbol",
           h.symbols[k].name, sizes[k].size());
  }
  if ((size_t{1} << std::min<size_t>(m, 16)) > limit)
    fail(ErrorKind::kGear,
         "{} symbols vary, so at least 2^{} gears are needed (2 per dim), above the limit of {}", m,
         m, limit);
  if (!s.padding) {
    if (h.tuples.size() > limit)
      fail(ErrorKind::kGear,
           "the trace takes {} distinct shapes and padding is refused, so every shape must be a "
           "gear, above the limit of {} gears; {}",
           h.tuples.size(), limit, s.notes.back());
    s.method = "exact gears: one per distinct shape (padding is refused)";
    s.gears = h.tuples;
    return;
  }
  std::vector<std::vector<int64_t>> lists(m);
  for (size_t k = 0; k < m; ++k) lists[k] = {sizes[k].back()};
  double best = std::numeric_limits<double>::infinity();
  std::vector<std::vector<int64_t>> bestLists;
  int sweeps = 0;
  for (; sweeps < 8; ++sweeps) {
    for (size_t k = 0; k < m; ++k) {
      size_t others = 1;
      for (size_t t = 0; t < m; ++t)
        if (t != k) others *= sweeps == 0 && t > k ? 2 : lists[t].size();
      const size_t maxHere = limit / others;
      const std::vector<int64_t>& dk = sizes[k];
      const size_t n = dk.size();
      std::vector<std::vector<int64_t>> rest = lists;
      rest[k] = {0};
      const auto combos = productOf(rest);  // other symbols' values; slot k is filled per j
      // compile[j]: every gear with value dk[j] for symbol k; run[j][t]: calls whose symbol-k
      // size index is <= t, run on the gear (dk[j], covers of their other sizes).
      std::vector<double> compile(n, 0.0);
      std::vector<std::vector<double>> run(n, std::vector<double>(n, 0.0));
      for (size_t j = 0; j < n; ++j) {
        for (auto c : combos) {
          c[k] = dk[j];
          const ShapeCost& sc = coster.at(signatureFor(h, c));
          compile[j] += coster.graphCompileUs();
          for (const KernelKey& key : sc.keys) compile[j] += coster.kernelCompileUs(key);
        }
        for (size_t t = 0; t < h.tuples.size(); ++t) {
          const auto& tuple = h.tuples[t];
          const size_t idx =
              static_cast<size_t>(std::lower_bound(dk.begin(), dk.end(), tuple[k]) - dk.begin());
          if (idx > j) continue;
          std::vector<int64_t> gear(m);
          for (size_t q = 0; q < m; ++q) gear[q] = q == k ? dk[j] : coverOf(lists[q], tuple[q]);
          run[j][idx] += static_cast<double>(h.counts[t]) * coster.at(signatureFor(h, gear)).callUs;
        }
        for (size_t t = 1; t < n; ++t) run[j][t] += run[j][t - 1];
      }
      const GearChoice choice =
          chooseGearsByRange(n, 2, std::max<size_t>(2, maxHere), [&](int64_t i, size_t j) {
            return compile[j] + run[j][j] - (i >= 0 ? run[j][static_cast<size_t>(i)] : 0.0);
          });
      lists[k].clear();
      for (size_t i : choice.gears) lists[k].push_back(dk[i]);
    }
    const GearCandidate c = evaluate(coster, h, "", productOf(lists), EvalOptions{.memory = false});
    if (c.totalUs() >= best) break;
    best = c.totalUs();
    bestLists = lists;
  }
  s.gears = productOf(bestLists);
  std::vector<std::string> names;
  for (const VaryingSymbol& sym : h.symbols) names.push_back(sym.name);
  s.method = fmt::format(
      "coordinate descent over per-symbol value lists of {} (product; exact DP per symbol with "
      "the others fixed, {} sweeps); not exact in general",
      fmt::join(names, ", "), sweeps + 1);
}

// The budgets: a row above one is not allowed. When the suggestion is above one, the best gear
// set within them becomes it. (Every row's memory was planned by evaluate, except for sets
// above TorchAir's 100 gears, which are not allowed anyway.)
void applyBudgets(const Graph& g, const Histogram& h, const SuggestOptions& options,
                  GearSuggestion& s) {
  if (options.maxMemoryBytes <= 0 && options.maxStartupUs <= 0) return;
  for (GearCandidate& c : s.candidates) {
    if (!c.allowed) continue;
    if (std::string why = overBudget(c, options); !why.empty()) {
      c.allowed = false;
      c.note = why;
    }
  }
  if (s.candidates.front().allowed) return;
  const GearCandidate* within = nullptr;
  for (const GearCandidate& c : s.candidates)
    if (c.allowed && !c.reference && (!within || c.totalUs() < within->totalUs())) within = &c;
  if (!within)
    fail(ErrorKind::kGear,
         "no gear set is within the budgets (MODELED memory {}, start-up {}): the suggestion {}; "
         "raise --max-memory / --max-startup, use --graph-pool shared, fewer gears{}",
         options.maxMemoryBytes > 0 ? humanBytes(options.maxMemoryBytes) : "unlimited",
         options.maxStartupUs > 0 ? fmt::format("{:.0f} us", options.maxStartupUs) : "unlimited",
         s.candidates.front().note,
         options.fallback == GearFallback::kPad || options.fallback == GearFallback::kError
             ? ", or leave large sizes to a fallback (--gear-fallback pad+dynamic or pad+eager)"
             : "");
  s.notes.push_back(
      fmt::format("the suggestion {}; taken instead: {}, the best gear set within "
                  "the budgets",
                  s.candidates.front().note, within->name));
  GearCandidate chosen = *within;
  chosen.name = "suggested";
  s.gears = chosen.gears;
  s.gearsJson = gearsJsonFor(g, h.symbols, s.gears, s.merge);
  s.candidates.front() = std::move(chosen);
}

// Marks the rows no other allowed row dominates in (MODELED total, memory, start-up).
void markPareto(std::vector<GearCandidate>& rows) {
  auto noWorse = [](const GearCandidate& a, const GearCandidate& b) {
    return a.totalUs() <= b.totalUs() && a.memoryBytes <= b.memoryBytes &&
           a.startupUs() <= b.startupUs();
  };
  auto better = [](const GearCandidate& a, const GearCandidate& b) {
    return a.totalUs() < b.totalUs() || a.memoryBytes < b.memoryBytes ||
           a.startupUs() < b.startupUs();
  };
  for (GearCandidate& r : rows) {
    if (!r.allowed) continue;
    r.pareto = true;
    for (const GearCandidate& o : rows)
      if (&o != &r && o.allowed && noWorse(o, r) && better(o, r)) {
        r.pareto = false;
        break;
      }
  }
}

EvalOptions evalOptionsFor(const SuggestOptions& options, const GearSuggestion& s,
                           size_t gearCount) {
  return EvalOptions{options.fallback, options.pool, s.padding, gearCount <= kMaxGears};
}

void addCandidates(const Graph& g, const std::vector<InputSignature>& trace, const CostModel& cost,
                   const SuggestOptions& options, GearCoster& coster, const Histogram& h,
                   size_t limit, const std::vector<std::vector<int64_t>>& covering,
                   GearSuggestion& s) {
  s.gearsJson = gearsJsonFor(g, h.symbols, s.gears, s.merge);
  const size_t m = h.symbols.size();
  std::vector<int64_t> smallest(m), largest(m);
  for (size_t k = 0; k < m; ++k) {
    smallest[k] = largest[k] = h.tuples[0][k];
    for (const auto& t : h.tuples) {
      smallest[k] = std::min(smallest[k], t[k]);
      largest[k] = std::max(largest[k], t[k]);
    }
  }
  auto rule = [&](GearCandidate& c) {
    if (c.gears.size() < 2 || c.gears.size() > limit) {
      c.allowed = false;
      c.note = fmt::format("{} gears, outside 2..{}", c.gears.size(), limit);
    }
  };
  using GearList = std::vector<std::vector<int64_t>>;
  auto add = [&](std::string name, std::optional<GearList> gears) {
    if (!gears) {
      GearCandidate c;
      c.name = std::move(name);
      c.allowed = false;
      c.note =
          fmt::format("more than {} gears, not costed (outside 2..{})", kMaxCostedGears, limit);
      s.candidates.push_back(std::move(c));
      return;
    }
    const EvalOptions eo = evalOptionsFor(options, s, gears->size());
    GearCandidate c = evaluate(coster, h, std::move(name), std::move(*gears), eo);
    if (c.allowed) rule(c);
    s.candidates.push_back(std::move(c));
  };
  // The product of per-symbol lists, or nullopt when it would hold more than kMaxCostedGears.
  auto perSymbol =
      [&](const std::function<std::vector<int64_t>(size_t)>& list) -> std::optional<GearList> {
    std::vector<std::vector<int64_t>> lists;
    size_t total = 1;
    for (size_t k = 0; k < m; ++k) {
      lists.push_back(list(k));
      if (lists.back().size() > kMaxCostedGears / total) return std::nullopt;
      total *= std::max<size_t>(1, lists.back().size());
    }
    return productOf(lists);
  };
  s.candidates.push_back(
      evaluate(coster, h, "suggested", s.gears, evalOptionsFor(options, s, s.gears.size())));
  // Under pad+dynamic or pad+eager: the best set that leaves nothing to the fallback (what
  // --gear-fallback pad would choose), so the table shows what leaving sizes to it gains.
  if (!covering.empty() && covering != s.gears) add("covering every size", covering);
  add("powers of two", perSymbol([&](size_t k) {
        std::vector<int64_t> pow2;
        for (int64_t v = 1;; v *= 2) {
          pow2.push_back(v);
          if (v >= largest[k]) break;
        }
        return pow2;
      }));
  add("vLLM capture sizes",
      perSymbol([&](size_t k) { return vllmCaptureSizes(largest[k], kMaxCostedGears + 1); }));
  // Uniform: as many values per symbol as the suggestion has.
  std::string stepName;
  add("uniform step", perSymbol([&](size_t k) {
        std::vector<int64_t> distinctValues;
        for (const auto& gear : s.gears) distinctValues.push_back(gear[k]);
        std::sort(distinctValues.begin(), distinctValues.end());
        distinctValues.erase(std::unique(distinctValues.begin(), distinctValues.end()),
                             distinctValues.end());
        const int64_t count = static_cast<int64_t>(distinctValues.size());
        const int64_t step = std::max<int64_t>(1, (largest[k] + count - 1) / count);
        stepName += (stepName.empty() ? "" : "x") + std::to_string(step);
        std::vector<int64_t> out;
        for (int64_t v = step;; v += step) {
          out.push_back(v);
          if (v >= largest[k]) break;
        }
        return out;
      }));
  s.candidates.back().name = "uniform step " + stepName;
  add("one per size (= static)", h.tuples);
  std::string range;
  for (size_t k = 0; k < m; ++k)
    range += fmt::format("{}[{}, {}]", k ? "x" : "", smallest[k], largest[k]);
  add(range, perSymbol([&](size_t k) {
        return smallest[k] == largest[k] ? std::vector<int64_t>{largest[k]}
                                         : std::vector<int64_t>{smallest[k], largest[k]};
      }));
  if (options.references) {
    s.candidates.push_back(
        referenceMode(g, trace, cost, Mode::kDynamic, options.runPasses, options.disabledPasses));
    s.candidates.push_back(
        referenceMode(g, trace, cost, Mode::kAuto, options.runPasses, options.disabledPasses));
  }
  applyBudgets(g, h, options, s);
  size_t best = 0;
  for (size_t i = 0; i < s.candidates.size(); ++i)
    if (s.candidates[i].allowed && s.candidates[i].totalUs() < s.candidates[best].totalUs())
      best = i;
  s.candidates[best].best = true;
  markPareto(s.candidates);
}

// The search's per-size terms (gears/gear_choice.h) for the distinct tuples of `h`: one size
// per tuple (with one varying symbol, its value; otherwise the tuple's index, for the kNotAGear
// selection, which needs no order). A gear's compile leaves out the kernels every size shares,
// which compile once whatever the set (with at least one gear); the fallback's terms are the
// same path's per-call cost, each size's own compiles on its first fallback call, and, for the
// dynamic fallback, its plan with dynamic dims compiled once. What depends on the order of the
// calls -- the device pool's misses, the kernel cache's evictions (an eager fallback over
// hundreds of sizes recompiles what its 64 LRU shards of 16 evicted) -- is left out:
// evaluate() replays it for the rows.
GearChoiceProblem choiceProblem(GearCoster& coster, const Histogram& h, GearFallback fallback,
                                bool padding) {
  const CostModel& cost = coster.cost();
  const size_t n = h.tuples.size();
  GearChoiceProblem p;
  for (size_t t = 0; t < n; ++t)
    p.sizes.push_back(h.symbols.size() == 1 ? h.tuples[t][0] : static_cast<int64_t>(t));
  p.counts = h.counts;
  std::vector<InputSignature> sigs;
  for (const auto& t : h.tuples) sigs.push_back(signatureFor(h, t));
  KeySet common;
  for (size_t t = 0; t < n; ++t) {
    const ShapeCost& sc = coster.at(sigs[t]);
    if (t == 0) {
      common.insert(sc.keys.begin(), sc.keys.end());
      continue;
    }
    KeySet here(sc.keys.begin(), sc.keys.end());
    for (auto it = common.begin(); it != common.end();)
      it = here.count(*it) ? std::next(it) : common.erase(it);
  }
  auto ownKernels = [&](const std::vector<KernelKey>& keys) {
    double us = 0;
    for (const KernelKey& k : keys)
      if (!common.count(k)) us += coster.kernelCompileUs(k);
    return us;
  };
  for (size_t t = 0; t < n; ++t) {
    const ShapeCost& sc = coster.at(sigs[t]);
    p.compileUs.push_back(coster.graphCompileUs() + ownKernels(sc.keys));
    p.callUs.push_back(sc.callUs);
  }
  const GearFallback path = gearFallbackPath(fallback);
  if (path != GearFallback::kDynamic && path != GearFallback::kEager) return p;
  p.fallback =
      gearFallbackPads(fallback) && padding ? SizeFallback::kAboveLargest : SizeFallback::kNotAGear;
  // The dynamic fallback's shared plan: the one the largest size compiles (sizes >= 2 leave
  // every declared-dynamic dim dynamic, so they all share it).
  const size_t shared = path == GearFallback::kDynamic ? coster.fallbackPlanFor(sigs.back())
                                                       : std::numeric_limits<size_t>::max();
  auto planCompile = [&](const Plan& plan) {
    std::vector<KernelKey> keys;
    KeySet seen;
    for (const PlanStep& s : plan.steps)
      if (seen.insert(s.kernel->key).second) keys.push_back(s.kernel->key);
    return cost.graphCompile(plan.graph->nodes.size()) + ownKernels(keys);
  };
  if (path == GearFallback::kDynamic)
    p.fallbackSharedUs = planCompile(*coster.fallbackPlan(shared).plan);
  for (size_t t = 0; t < n; ++t) {
    if (path == GearFallback::kEager) {
      const OpByOpCost& op = coster.opByOpAt(sigs[t], -1);
      p.fallbackCallUs.push_back(op.hostUs + op.computeUs +
                                 launchSyncUs(cost, 0, 0, op.launches, op.syncs, 0));
      p.fallbackFirstUs.push_back(ownKernels(coster.at(sigs[t]).keys));
      p.fallbackShared.push_back(0);
      continue;
    }
    const size_t plan = coster.fallbackPlanFor(sigs[t]);
    const FallbackPlan& fp = coster.fallbackPlan(plan);
    if (fp.plan->isStatic) {
      p.fallbackCallUs.push_back(coster.at(sigs[t]).callUs);
    } else {
      const OpByOpCost& op = coster.opByOpAt(sigs[t], static_cast<int>(plan));
      p.fallbackCallUs.push_back(op.hostUs + op.computeUs +
                                 launchSyncUs(cost, 0, 0, op.launches, op.syncs, 0));
    }
    p.fallbackShared.push_back(plan == shared ? 1 : 0);
    p.fallbackFirstUs.push_back(plan == shared ? 0.0 : planCompile(*fp.plan));
  }
  return p;
}

// The best gear set by the search (single symbol, or several under kNotAGear), within the
// budgets when there are any: the per-count bests in order of their search total, each
// evaluated exactly (evaluate), the first within both budgets taken. Under a fallback a memory
// budget first rules out gears that could not fit even alone (the weights, their workspace and
// their inputs and outputs), found by bisection over the sizes, so sizes above every gear that
// fits go to the fallback. Not proven optimal under a budget: the best k-gear set may not fit
// where another k-gear set would (docs/gears.md).
std::vector<std::vector<int64_t>> searchGears(GearCoster& coster, const Histogram& h,
                                              const SuggestOptions& options,
                                              const GearSuggestion& s, size_t limit,
                                              GearChoiceProblem& p, std::string& method) {
  const size_t n = h.tuples.size();
  auto setOf = [&](const GearChoice& c) {
    std::vector<std::vector<int64_t>> set;
    for (size_t i : c.gears) set.push_back(h.tuples[i]);
    return set;
  };
  const bool budgets = options.maxMemoryBytes > 0 || options.maxStartupUs > 0;
  if (budgets && options.maxMemoryBytes > 0 && p.fallback != SizeFallback::kNone) {
    auto fitsAlone = [&](size_t i) {
      const PlanMemory& m = coster.memoryAt(signatureFor(h, h.tuples[i]));
      return addOrFail(addOrFail(coster.weightBytes(), m.workspaceBytes, "gear memory"), m.ioBytes,
                       "gear memory") <= options.maxMemoryBytes;
    };
    if (h.symbols.size() == 1 && !fitsAlone(n - 1)) {
      size_t lo = 0, hi = n - 1;  // the first that does not fit is in (lo, hi]
      if (!fitsAlone(0)) hi = 0;
      while (hi > 0 && hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        (fitsAlone(mid) ? lo : hi) = mid;
      }
      if (hi > 0) {
        p.largestGearLimit = hi - 1;
        method += fmt::format(
            "; gears above {} cannot fit --max-memory alone, so larger sizes "
            "fall back",
            h.tuples[hi - 1][0]);
      }
    }
  }
  std::vector<GearChoice> perCount = chooseGearsPerCount(p, 2, limit);
  std::vector<const GearChoice*> order;
  for (const GearChoice& c : perCount)
    if (!c.gears.empty()) order.push_back(&c);
  if (order.empty()) fail(ErrorKind::kGear, "no gear set of 2..{} gears is possible", limit);
  std::stable_sort(order.begin(), order.end(), [](const GearChoice* a, const GearChoice* b) {
    return a->totalUs < b->totalUs;
  });
  if (!budgets) return setOf(*order.front());
  for (const GearChoice* c : order) {
    const auto set = setOf(*c);
    const GearCandidate e = evaluate(coster, h, "", set, evalOptionsFor(options, s, set.size()));
    if (!e.allowed || !overBudget(e, options).empty()) continue;
    if (c != order.front())
      method += fmt::format(
          "; within the budgets: the cheapest of the best k-gear sets (k = "
          "2..{}) that fits",
          std::min(limit, n));
    return set;
  }
  return setOf(*order.front());  // nothing fits: the rows say why, applyBudgets decides
}

}  // namespace

std::vector<int64_t> vllmCaptureSizes(int64_t largest, size_t maxCount) {
  std::vector<int64_t> out;
  int64_t v = 1;
  while (out.size() < maxCount) {
    out.push_back(v);
    if (v >= largest) break;
    v = v < 4 ? v * 2 : v < 8 ? 8 : v < 256 ? v + 8 : v + 16;
  }
  return out;
}

GearSuggestion suggestGears(const Graph& g, const std::vector<InputSignature>& trace,
                            const CostModel& cost, const SuggestOptions& options) {
  if (options.maxGears < 2)
    fail(ErrorKind::kGear,
         "--max-gears {} is below 2: TorchAir needs 2 to 100 gears per dim (for one shape, see "
         "--pad-to)",
         options.maxGears);
  const Histogram h = buildHistogram(g, trace);
  GearCoster coster(g, h.base, cost, options.runPasses, options.disabledPasses);
  GearSuggestion s;
  s.symbols = h.symbols;
  s.merge = options.merge;
  s.maxMemoryBytes = options.maxMemoryBytes;
  s.maxStartupUs = options.maxStartupUs;
  s.pool = options.pool;
  s.fallback = options.fallback;
  s.calls = h.calls;
  s.distinctShapes = h.tuples.size();
  const size_t limit = std::min(options.maxGears, kMaxGears);
  const GearFallback path = gearFallbackPath(options.fallback);
  const bool hasPath = path == GearFallback::kDynamic || path == GearFallback::kEager;
  const std::string fallbackName = gearFallbackName(options.fallback);

  // Padding legality over every varying dim.
  std::vector<InputDim> padded;
  for (const VaryingSymbol& sym : h.symbols)
    padded.insert(padded.end(), sym.dims.begin(), sym.dims.end());
  try {
    analyzePadding(coster.graph(), padded);
  } catch (const Error& e) {
    s.padding = false;
    s.notes.push_back(fmt::format("padding is refused, so only exact gears can run: {}", e.what()));
  }
  // pad+dynamic and pad+eager pad as pad does; geared mode refuses them on such a graph.
  if (!s.padding && hasPath && gearFallbackPads(options.fallback))
    fail(ErrorKind::kGear,
         "--gear-fallback {} pads calls up to a gear, but {}; use --gear-fallback {} (no "
         "padding: every size that is not a gear takes that path)",
         fallbackName, s.notes.back(), gearFallbackName(path));

  const size_t n = h.tuples.size();
  std::vector<std::vector<int64_t>> covering;  // pad+X: the best set that covers every size
  // Every size a gear: --gear-fallback error, or pad on a graph that refuses padding.
  const bool exactOnly = options.fallback == GearFallback::kError || (!hasPath && !s.padding);
  if (exactOnly) {
    if (n > limit)
      fail(ErrorKind::kGear,
           "the trace takes {} distinct shapes and every one must be a gear ({}), above the "
           "limit of {} gears",
           n,
           options.fallback == GearFallback::kError ? "--gear-fallback error runs only exact gears"
                                                    : s.notes.back(),
           limit);
    if (n < 2) fail(ErrorKind::kGear, "the trace takes one shape only; gears need 2");
    s.method = options.fallback == GearFallback::kError
                   ? "exact gears: one per distinct shape (--gear-fallback error)"
                   : "exact gears: one per distinct shape (padding is refused)";
    s.gears = h.tuples;
  } else if (h.symbols.size() != 1 && gearFallbackPads(options.fallback)) {
    multiSymbol(coster, h, limit, s);
    if (hasPath)
      s.method += fmt::format(
          "; with several varying symbols the search covers every shape, leaving none to the "
          "{} fallback",
          gearFallbackName(path));
  } else {
    if (h.symbols.size() != 1 && s.merge == MergePolicy::kProduct)
      fail(ErrorKind::kGear,
           "--gear-fallback {} with several varying symbols chooses exact gears one by one, "
           "which --merge product (a product of per-symbol lists) cannot write; use --merge zip",
           fallbackName);
    if (n < 2)
      fail(ErrorKind::kGear, "symbol {} takes one size only ({})", h.symbols[0].name,
           h.tuples[0][0]);
    GearChoiceProblem p = choiceProblem(coster, h, options.fallback, s.padding);
    std::vector<std::string> names;
    for (const VaryingSymbol& sym : h.symbols) names.push_back(sym.name);
    const std::string sizes = fmt::format("{}", fmt::join(names, ", "));
    switch (p.fallback) {
      case SizeFallback::kNone:
        s.method = fmt::format(
            "exact dynamic programme over the {} distinct sizes of {} (2..{} gears, the largest "
            "size a gear)",
            n, sizes, limit);
        break;
      case SizeFallback::kAboveLargest:
        s.method = fmt::format(
            "exact dynamic programme over the {} distinct sizes of {} (2..{} gears; sizes above "
            "the largest gear take the {} fallback)",
            n, sizes, limit, gearFallbackName(path));
        break;
      case SizeFallback::kNotAGear:
        s.method = fmt::format(
            "exact selection over the {} distinct {} of {} (2..{} gears, no padding; every other "
            "one takes the {} fallback)",
            n, h.symbols.size() == 1 ? "sizes" : "shapes", sizes, limit, gearFallbackName(path));
        break;
    }
    s.gears = searchGears(coster, h, options, s, limit, p, s.method);
    if (p.fallback == SizeFallback::kAboveLargest) {
      GearChoiceProblem cover = p;
      cover.fallback = SizeFallback::kNone;
      cover.largestGearLimit = std::numeric_limits<size_t>::max();
      for (size_t i : chooseGears(cover, 2, limit).gears) covering.push_back(h.tuples[i]);
    }
  }
  addCandidates(g, trace, cost, options, coster, h, limit, covering, s);
  return s;
}

std::vector<GearCandidate> evaluateGearSets(
    const Graph& g, const std::vector<InputSignature>& trace, const CostModel& cost,
    const std::vector<std::vector<std::vector<int64_t>>>& sets, bool runPasses,
    GearFallback fallback, GraphPool pool) {
  const Histogram h = buildHistogram(g, trace);
  GearCoster coster(g, h.base, cost, runPasses);
  std::vector<GearCandidate> out;
  for (const auto& set : sets)
    out.push_back(
        evaluate(coster, h, "", set, EvalOptions{fallback, pool, true, set.size() <= kMaxGears}));
  return out;
}

std::string formatSuggestion(const GearSuggestion& s, const std::string& profile) {
  std::string out;
  std::vector<std::string> names;
  for (const VaryingSymbol& sym : s.symbols) names.push_back(sym.name);
  out += fmt::format("{} calls, {} distinct sizes of {}; device profile {}; gear fallback {}\n",
                     s.calls, s.distinctShapes, fmt::join(names, ", "), profile,
                     gearFallbackName(s.fallback));
  out += fmt::format("method: {}\n", s.method);
  for (const std::string& n : s.notes) out += "note: " + n + "\n";
  if (s.maxMemoryBytes > 0 || s.maxStartupUs > 0)
    out += fmt::format("budgets: MODELED memory {} (graph pool {}), MODELED start-up {}\n",
                       s.maxMemoryBytes > 0 ? humanBytes(s.maxMemoryBytes) : "unlimited",
                       graphPoolName(s.pool),
                       s.maxStartupUs > 0 ? fmt::format("{:.0f} us", s.maxStartupUs) : "unlimited");
  constexpr const char* kRow =
      "{:<3}{:<26}{:>6}{:>9}{:>8}{:>9}{:>8}{:>11}{:>11}{:>11}{:>12}{:>12}{:>12}{:>12}";
  out += fmt::format(fmt::runtime(kRow), "", "candidate (MODELED us)", "gears", "compiles",
                     "padded", "fallback", "waste%", "waste", "compile", "start-up", "in fallback",
                     "run", "total", "memory");
  out += "\n";
  for (const GearCandidate& c : s.candidates) {
    const std::string mark = std::string(c.best ? "*" : "") + (c.pareto ? "P" : "");
    const std::string none = "-";
    out += fmt::format(
        fmt::runtime(kRow), mark, c.name, c.reference ? none : std::to_string(c.gears.size()),
        c.compiles, c.reference ? none : std::to_string(c.paddedCalls),
        c.reference ? none : std::to_string(c.fallbackCalls), fmt::format("{:.1f}%", c.wastePct()),
        fmt::format("{:.0f}", c.paddingWasteUs), fmt::format("{:.0f}", c.compileUs),
        fmt::format("{:.0f}", c.startupUs()),
        c.reference ? none : fmt::format("{:.0f}", c.fallbackUs), fmt::format("{:.0f}", c.runUs),
        fmt::format("{:.0f}", c.totalUs()), c.memoryBytes > 0 ? humanBytes(c.memoryBytes) : none);
    if (!c.allowed)
      out += "  (not allowed: " + c.note + ")";
    else if (!c.reference && !c.note.empty())
      out += "  (" + c.note + ")";
    out += "\n";
  }
  std::vector<std::string> g;
  for (const auto& gear : s.gears) g.push_back(fmt::format("{}", fmt::join(gear, "x")));
  out +=
      "* best MODELED total; P Pareto-optimal in MODELED total, memory and start-up (start-up: "
      "the gears' up-front compiles; 0 for modes); fallback: calls through the fallback path, "
      "in fallback: their MODELED us, compiles included\n";
  out += fmt::format("suggested gears: {}\n", fmt::join(g, ", "));
  // The run needs the fallback the gears were chosen for (its default is error).
  out +=
      fmt::format("--gears '{}' --gear-fallback {}\n", s.gearsJson, gearFallbackName(s.fallback));
  return out;
}

nlohmann::ordered_json suggestionJson(const GearSuggestion& s, const std::string& profile) {
  nlohmann::ordered_json j;
  j["device_profile"] = profile;
  j["calls"] = s.calls;
  j["distinct_shapes"] = s.distinctShapes;
  nlohmann::ordered_json syms = nlohmann::ordered_json::array();
  for (const VaryingSymbol& sym : s.symbols) syms.push_back(sym.name);
  j["symbols"] = syms;
  j["method"] = s.method;
  j["notes"] = s.notes;
  j["padding_legal"] = s.padding;
  j["gear_fallback"] = gearFallbackName(s.fallback);
  nlohmann::ordered_json b;
  b["max_memory_bytes"] = s.maxMemoryBytes;
  b["max_startup_us"] = s.maxStartupUs;
  b["graph_pool"] = graphPoolName(s.pool);
  j["budgets"] = b;
  j["gears"] = s.gears;
  j["gears_json"] = nlohmann::ordered_json::parse(s.gearsJson);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const GearCandidate& c : s.candidates) {
    nlohmann::ordered_json r;
    r["name"] = c.name;
    r["reference_mode"] = c.reference;
    r["allowed"] = c.allowed;
    r["note"] = c.note;
    r["best"] = c.best;
    r["pareto"] = c.pareto;
    r["gears"] = c.gears;
    r["graph_compiles"] = c.compiles;
    r["padded_calls"] = c.paddedCalls;
    r["fallback_calls"] = c.fallbackCalls;
    nlohmann::ordered_json m;
    m["compile_us"] = c.compileUs;
    m["run_us"] = c.runUs;
    m["compute_us"] = c.computeUs;
    m["padding_waste_us"] = c.paddingWasteUs;
    m["padding_waste_pct"] = c.wastePct();
    m["fallback_us"] = c.fallbackUs;
    m["total_us"] = c.totalUs();
    m["memory_bytes"] = c.memoryBytes;
    m["startup_us"] = c.startupUs();
    r["modeled"] = m;
    rows.push_back(r);
  }
  j["candidates"] = rows;
  return j;
}

}  // namespace gearbox::cli
