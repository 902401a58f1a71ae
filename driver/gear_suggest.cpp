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
#include <unordered_map>
#include <unordered_set>

#include "compiler/kernel_cache.h"
#include "compiler/passes.h"
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
  std::vector<KernelKey> keys;  // distinct kernel keys of the plan (each compiles once)
  double computeUs = 0;         // the plan's kernels at this shape
  double callUs = 0;            // graph launch + one sync + compute
  int64_t elements = 0;         // input elements (padTarget's tie-break)
};

class GearCoster {
 public:
  GearCoster(const Graph& g, const InputSignature& first, const CostModel& cost, bool runPasses)
      : cost_(cost) {
    Graph copy = g;
    verifyGraph(copy);
    if (runPasses) defaultPipeline().run(copy);  // what Session does before any mode
    graph_ = std::make_shared<const Graph>(std::move(copy));
    // One plan gives the steps (the nodes that launch a kernel); every other shape reuses the
    // step list with its own specialised types, as a padded call's model does.
    KernelCache kernels(64);
    auto plan = compilePlan(graph_, first, kernels, PlanCompileOptions{"suggest-gears", false});
    for (const PlanStep& s : plan->steps) steps_.push_back(s.node);
  }

  const Graph& graph() const { return *graph_; }
  double graphCompileUs() const { return cost_.graphCompile(graph_->nodes.size()); }

  const ShapeCost& at(const InputSignature& sig) {
    auto it = cache_.find(sig);
    if (it != cache_.end()) return it->second;
    std::vector<TensorType> types;
    try {
      types = specializeTypes(*graph_, sig);
    } catch (const Error& e) {
      fail(ErrorKind::kGear, "gear shapes [{}] are rejected by the graph: {}",
           signatureToString(*graph_, sig), e.what());
    }
    ShapeCost c;
    KeySet seen;
    KernelKey key;
    for (NodeId n : steps_) {
      makeKernelKeyInto(key, *graph_, types, n);
      c.computeUs += cost_.kernelRun(key, false);
      if (seen.insert(key).second) c.keys.push_back(key);
    }
    c.callUs = c.computeUs + cost_.graphLaunch(steps_.size()) + cost_.syncUs;
    for (const Shape& s : sig) c.elements += s.numel();
    return cache_.emplace(sig, std::move(c)).first->second;
  }
  double kernelCompileUs(const KernelKey& k) const { return cost_.kernelCompile(k); }
  size_t cached() const { return cache_.size(); }

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

 private:
  const CostModel& cost_;
  std::shared_ptr<const Graph> graph_;
  std::vector<NodeId> steps_;
  std::unordered_map<InputSignature, ShapeCost, SignatureHash> cache_;
  std::unordered_map<InputSignature, PlanMemory, SignatureHash> memory_;
  int64_t weights_ = -1;
};

// The trace as distinct tuples of varying-symbol values, with call counts.
struct Histogram {
  std::vector<VaryingSymbol> symbols;
  InputSignature base;                       // the first call; non-varying dims keep its sizes
  std::vector<std::vector<int64_t>> tuples;  // ascending (lexicographic)
  std::vector<int64_t> counts;
  int64_t calls = 0;
};

Histogram buildHistogram(const Graph& g, const std::vector<InputSignature>& trace) {
  if (trace.empty()) fail(ErrorKind::kGear, "the trace has no calls to choose gears for");
  Histogram h;
  h.base = trace.front();
  std::unordered_map<InputSignature, int64_t, SignatureHash> distinct;
  for (const InputSignature& sig : trace) distinct[sig]++;
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
  for (const auto& [sig, count] : distinct) {
    std::vector<int64_t> t;
    for (const VaryingSymbol& s : h.symbols) t.push_back(sig[s.dims[0].input][s.dims[0].dim]);
    tuples[t] += count;
  }
  for (const auto& [t, c] : tuples) {
    h.tuples.push_back(t);
    h.counts.push_back(c);
    h.calls += c;
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
int64_t gearSetMemory(GearCoster& coster, const Histogram& h,
                      const std::vector<std::vector<int64_t>>& gears, GraphPool pool, bool pads) {
  int64_t workspace = 0, io = 0;
  for (const auto& gear : gears) {
    const PlanMemory& m = coster.memoryAt(signatureFor(h, gear));
    workspace = pool == GraphPool::kShared
                    ? std::max(workspace, m.workspaceBytes)
                    : addOrFail(workspace, m.workspaceBytes, "gear set workspace bytes");
    io = std::max(io, m.ioBytes);
  }
  int64_t copies = 0;
  if (pads && !gears.empty()) {
    std::set<int> varying;
    for (const VaryingSymbol& sym : h.symbols)
      for (const InputDim& d : sym.dims) varying.insert(d.input);
    const InputSignature largest = signatureFor(h, *std::max_element(gears.begin(), gears.end()));
    CachingAllocatorModel allocator;
    for (int input : varying) {
      const Graph& g = coster.graph();
      const int64_t bytes =
          checkedBytes(largest[input], g.values[g.inputs[input]].type.dtype, "padded input");
      if (bytes > 0) allocator.allocate(static_cast<size_t>(bytes));
    }
    copies = allocator.stats().peakBytesReserved;
  }
  return addOrFail(addOrFail(addOrFail(coster.weightBytes(), workspace, "gear set memory"), io,
                             "gear set memory"),
                   copies, "gear set memory");
}

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

// The MODELED figures of a gear set over the histogram: each call runs on the exact gear, or
// on the covering gear with the fewest input elements (GearSet::padTarget's rule).
GearCandidate evaluate(GearCoster& coster, const Histogram& h, std::string name,
                       std::vector<std::vector<int64_t>> gears, bool padding) {
  GearCandidate c;
  c.name = std::move(name);
  std::sort(gears.begin(), gears.end());
  gears.erase(std::unique(gears.begin(), gears.end()), gears.end());
  c.gears = gears;
  c.compiles = static_cast<int64_t>(gears.size());
  KeySet keys;
  std::vector<const ShapeCost*> gearCost;
  for (const auto& gear : gears) {
    const ShapeCost& sc = coster.at(signatureFor(h, gear));
    gearCost.push_back(&sc);
    c.compileUs += coster.graphCompileUs();
    for (const KernelKey& k : sc.keys)
      if (keys.insert(k).second) c.compileUs += coster.kernelCompileUs(k);
  }
  const bool one = h.symbols.size() == 1;
  for (size_t t = 0; t < h.tuples.size(); ++t) {
    const auto& tuple = h.tuples[t];
    const double calls = static_cast<double>(h.counts[t]);
    std::optional<size_t> target;
    if (one) {
      auto it = std::lower_bound(gears.begin(), gears.end(), tuple);
      if (it != gears.end()) target = static_cast<size_t>(it - gears.begin());
    } else {
      for (size_t g = 0; g < gears.size(); ++g) {
        bool covers = true;
        for (size_t k = 0; k < tuple.size() && covers; ++k) covers = gears[g][k] >= tuple[k];
        if (gears[g] == tuple) {
          target = g;
          break;
        }
        if (covers && (!target || gearCost[g]->elements < gearCost[*target]->elements)) target = g;
      }
    }
    if (!target) {
      c.allowed = false;
      c.note = fmt::format("size {} is above every gear", fmt::join(tuple, "x"));
      continue;
    }
    const ShapeCost& run = *gearCost[*target];
    c.runUs += calls * run.callUs;
    c.computeUs += calls * run.computeUs;
    if (gears[*target] != tuple) {
      if (!padding) {
        c.allowed = false;
        c.note = "needs padding, which the graph refuses";
      }
      c.paddedCalls += h.counts[t];
      const ShapeCost& real = coster.at(signatureFor(h, tuple));
      c.paddingWasteUs += calls * std::max(0.0, run.computeUs - real.computeUs);
    }
  }
  return c;
}

// Reference modes run over the trace without executing kernels (--model-only): their counters
// and MODELED figures are exact (docs/cost-model.md).
GearCandidate referenceMode(const Graph& g, const std::vector<InputSignature>& trace,
                            const CostModel& cost, Mode mode, bool runPasses) {
  SessionOptions o;
  o.mode = mode;
  o.cost = cost;
  o.modelOnly = true;
  o.runPasses = runPasses;
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

std::vector<std::vector<int64_t>> asTuples(const std::vector<int64_t>& values) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t v : values) out.push_back({v});
  return out;
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
    const GearCandidate c = evaluate(coster, h, "", productOf(lists), true);
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

// The suggestion's JSON and the candidate table (per-symbol lists, merged by product).
// Memory of every costed gear set (sets above TorchAir's 100 gears are not allowed anyway and
// are not planned: that would compile a plan per gear), then the budgets: a row above one is
// not allowed. When the suggestion is above one, the best gear set within them becomes it.
void applyBudgets(const Graph& g, GearCoster& coster, const Histogram& h,
                  const SuggestOptions& options, GearSuggestion& s) {
  for (GearCandidate& c : s.candidates) {
    if (c.reference || c.gears.empty() || c.gears.size() > kMaxGears) continue;
    c.memoryBytes = gearSetMemory(coster, h, c.gears, options.pool, c.paddedCalls > 0);
  }
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
         "raise --max-memory / --max-startup, use --graph-pool shared, or fewer gears",
         options.maxMemoryBytes > 0 ? humanBytes(options.maxMemoryBytes) : "unlimited",
         options.maxStartupUs > 0 ? fmt::format("{:.0f} us", options.maxStartupUs) : "unlimited",
         s.candidates.front().note);
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

void addCandidates(const Graph& g, const std::vector<InputSignature>& trace, const CostModel& cost,
                   const SuggestOptions& options, GearCoster& coster, const Histogram& h,
                   size_t limit, GearSuggestion& s) {
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
    GearCandidate c = evaluate(coster, h, std::move(name), std::move(*gears), s.padding);
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
  s.candidates.push_back(evaluate(coster, h, "suggested", s.gears, s.padding));
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
    s.candidates.push_back(referenceMode(g, trace, cost, Mode::kDynamic, options.runPasses));
    s.candidates.push_back(referenceMode(g, trace, cost, Mode::kAuto, options.runPasses));
  }
  applyBudgets(g, coster, h, options, s);
  size_t best = 0;
  for (size_t i = 0; i < s.candidates.size(); ++i)
    if (s.candidates[i].allowed && s.candidates[i].totalUs() < s.candidates[best].totalUs())
      best = i;
  s.candidates[best].best = true;
  markPareto(s.candidates);
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
  GearCoster coster(g, h.base, cost, options.runPasses);
  GearSuggestion s;
  s.symbols = h.symbols;
  s.merge = options.merge;
  s.maxMemoryBytes = options.maxMemoryBytes;
  s.maxStartupUs = options.maxStartupUs;
  s.pool = options.pool;
  s.calls = h.calls;
  s.distinctShapes = h.tuples.size();
  const size_t limit = std::min(options.maxGears, kMaxGears);

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

  if (h.symbols.size() != 1) {
    multiSymbol(coster, h, limit, s);
    addCandidates(g, trace, cost, options, coster, h, limit, s);
    return s;
  }
  std::vector<int64_t> sizes;
  for (const auto& t : h.tuples) sizes.push_back(t[0]);
  const std::string& sym = h.symbols[0].name;
  const size_t n = sizes.size();

  if (!s.padding) {
    if (n > limit)
      fail(ErrorKind::kGear,
           "symbol {} takes {} distinct sizes and padding is refused, so every size must be a "
           "gear, above the limit of {} gears; {}",
           sym, n, limit, s.notes.back());
    s.method = "exact gears: one per distinct size (padding is refused)";
    s.gears = asTuples(sizes);
  } else {
    // Exact DP: compile and call cost of every distinct size as a gear. Kernels common to every
    // size compile once whatever the set; they are left out of the per-gear term (their sum
    // is the same for every set), so the per-gear terms add up.
    GearChoiceProblem p;
    p.sizes = sizes;
    p.counts = h.counts;
    KeySet common;
    bool firstSize = true;
    for (int64_t v : sizes) {
      const ShapeCost& sc = coster.at(signatureFor(h, {v}));
      if (firstSize) {
        common.insert(sc.keys.begin(), sc.keys.end());
        firstSize = false;
      } else {
        KeySet here(sc.keys.begin(), sc.keys.end());
        for (auto it = common.begin(); it != common.end();)
          it = here.count(*it) ? std::next(it) : common.erase(it);
      }
    }
    for (int64_t v : sizes) {
      const ShapeCost& sc = coster.at(signatureFor(h, {v}));
      double compile = coster.graphCompileUs();
      for (const KernelKey& k : sc.keys)
        if (!common.count(k)) compile += coster.kernelCompileUs(k);
      p.compileUs.push_back(compile);
      p.callUs.push_back(sc.callUs);
    }
    if (n < 2) fail(ErrorKind::kGear, "symbol {} takes one size only ({})", sym, sizes[0]);
    const GearChoice choice = chooseGears(p, 2, limit);
    std::vector<int64_t> chosen;
    for (size_t i : choice.gears) chosen.push_back(sizes[i]);
    s.gears = asTuples(chosen);
    s.method = fmt::format(
        "exact dynamic programme over the {} distinct sizes of {} (2..{} gears, the largest size "
        "a gear)",
        n, sym, limit);
    if (options.maxMemoryBytes > 0 || options.maxStartupUs > 0) {
      // Under budgets: the best set of each gear count k (the same programme, exactly k gears),
      // and of those the cheapest within both budgets. Memory and start-up grow with k, so this
      // finds the budgeted optimum whenever it is the best k-gear set for its k (not proven in
      // general: a k-gear set other than the cheapest might fit where the cheapest does not).
      std::optional<GearCandidate> best;
      for (size_t k = 2; k <= std::min(limit, n); ++k) {
        std::vector<int64_t> set;
        for (size_t i : chooseGears(p, k, k).gears) set.push_back(sizes[i]);
        GearCandidate c = evaluate(coster, h, "", asTuples(set), true);
        c.memoryBytes = gearSetMemory(coster, h, c.gears, options.pool, c.paddedCalls > 0);
        if (!overBudget(c, options).empty()) continue;
        if (!best || c.totalUs() < best->totalUs()) best = std::move(c);
      }
      if (best && best->gears != s.gears) {
        s.gears = best->gears;
        s.method += fmt::format(
            "; within the budgets: the cheapest of the best k-gear sets (k = "
            "2..{})",
            std::min(limit, n));
      }
    }
  }
  addCandidates(g, trace, cost, options, coster, h, limit, s);
  return s;
}

std::vector<GearCandidate> evaluateGearSets(
    const Graph& g, const std::vector<InputSignature>& trace, const CostModel& cost,
    const std::vector<std::vector<std::vector<int64_t>>>& sets, bool runPasses) {
  const Histogram h = buildHistogram(g, trace);
  GearCoster coster(g, h.base, cost, runPasses);
  std::vector<GearCandidate> out;
  for (const auto& set : sets) {
    out.push_back(evaluate(coster, h, "", set, true));
    if (set.size() <= kMaxGears)
      out.back().memoryBytes = gearSetMemory(coster, h, out.back().gears, GraphPool::kShared,
                                             out.back().paddedCalls > 0);
  }
  return out;
}

std::string formatSuggestion(const GearSuggestion& s, const std::string& profile) {
  std::string out;
  std::vector<std::string> names;
  for (const VaryingSymbol& sym : s.symbols) names.push_back(sym.name);
  out += fmt::format("{} calls, {} distinct sizes of {}; device profile {}\n", s.calls,
                     s.distinctShapes, fmt::join(names, ", "), profile);
  out += fmt::format("method: {}\n", s.method);
  for (const std::string& n : s.notes) out += "note: " + n + "\n";
  if (s.maxMemoryBytes > 0 || s.maxStartupUs > 0)
    out += fmt::format("budgets: MODELED memory {} (graph pool {}), MODELED start-up {}\n",
                       s.maxMemoryBytes > 0 ? humanBytes(s.maxMemoryBytes) : "unlimited",
                       graphPoolName(s.pool),
                       s.maxStartupUs > 0 ? fmt::format("{:.0f} us", s.maxStartupUs) : "unlimited");
  out += fmt::format("{:<3}{:<26}{:>6}{:>9}{:>8}{:>9}{:>9}{:>13}{:>13}{:>13}{:>13}{:>12}\n", "",
                     "candidate (MODELED us)", "gears", "compiles", "padded", "calls", "waste%",
                     "waste", "compile", "run", "total", "memory");
  for (const GearCandidate& c : s.candidates) {
    const std::string mark = std::string(c.best ? "*" : "") + (c.pareto ? "P" : "");
    out += fmt::format(
        "{:<3}{:<26}{:>6}{:>9}{:>8}{:>9}{:>8.1f}%{:>13.0f}{:>13.0f}{:>13.0f}{:>13.0f}{:>12}", mark,
        c.name, c.reference ? std::string("-") : std::to_string(c.gears.size()), c.compiles,
        c.reference ? std::string("-") : std::to_string(c.paddedCalls), s.calls, c.wastePct(),
        c.paddingWasteUs, c.compileUs, c.runUs, c.totalUs(),
        c.memoryBytes > 0 ? humanBytes(c.memoryBytes) : std::string("-"));
    if (!c.allowed) out += "  (not allowed: " + c.note + ")";
    out += "\n";
  }
  std::vector<std::string> g;
  for (const auto& gear : s.gears) g.push_back(fmt::format("{}", fmt::join(gear, "x")));
  out +=
      "* best MODELED total; P Pareto-optimal in MODELED total, memory and start-up (start-up "
      "= the compile column for gear sets, 0 for modes)\n";
  out += fmt::format("suggested gears: {}\n", fmt::join(g, ", "));
  out += fmt::format("--gears '{}'\n", s.gearsJson);
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
    nlohmann::ordered_json m;
    m["compile_us"] = c.compileUs;
    m["run_us"] = c.runUs;
    m["compute_us"] = c.computeUs;
    m["padding_waste_us"] = c.paddingWasteUs;
    m["padding_waste_pct"] = c.wastePct();
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
