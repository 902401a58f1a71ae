#include "executor/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "compiler/compile_log.h"
#include "executor/gear_state.h"
#include "executor/kernels.h"
#include "executor/plan_runner.h"
#include "graph/error.h"

namespace gearbox {

using Clock = std::chrono::steady_clock;
static double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

const char* modeName(Mode m) {
  switch (m) {
    case Mode::kStatic: return "static";
    case Mode::kEager: return "eager";
    case Mode::kDynamic: return "dynamic";
    case Mode::kAuto: return "auto";
    case Mode::kGeared: return "geared";
  }
  return "?";
}

std::optional<Mode> parseMode(std::string_view s) {
  for (Mode m : {Mode::kStatic, Mode::kEager, Mode::kDynamic, Mode::kAuto, Mode::kGeared})
    if (s == modeName(m)) return m;
  return std::nullopt;
}

DimMarks parseDimMarks(const std::string& spec) {
  DimMarks out;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(pos, comma - pos);
    const size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size())
      fail(ErrorKind::kConfig, "expected input:dim in '{}', got '{}'", spec, item);
    int dim = 0;
    try {
      size_t used = 0;
      dim = std::stoi(item.substr(colon + 1), &used);
      if (used != item.size() - colon - 1) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      fail(ErrorKind::kConfig, "dim in '{}' is not an integer", item);
    }
    out.emplace(item.substr(0, colon), dim);
    pos = comma + 1;
  }
  return out;
}

Session::Session(Graph graph, SessionOptions options)
    : options_(std::move(options)),
      device_(makeDevice(options_.device)),
      kernels_(options_.kernelCacheCapacity),
      plans_(options_.planCacheCapacity) {
  verifyGraph(graph);
  if (options_.runPasses) {
    passReport_ = defaultPipeline().run(graph);
    stats_.passesFired = passReport_.fired();
  }
  graph_ = std::make_shared<const Graph>(std::move(graph));
  stats_.mode = options_.mode;
  for (auto& hook : options_.compileHooks) kernels_.addCompileHook(hook);
  for (auto& store : options_.kernelStores) kernels_.addStore(store);
  for (const auto& marks : {options_.dynamicDims, options_.staticDims}) {
    for (const auto& [name, dim] : marks) {
      const int i = graph_->findInput(name);
      if (i < 0)
        fail(ErrorKind::kConfig, "dim mark {}:{}: graph has no input '{}'", name, dim, name);
      const int rank = graph_->values[graph_->inputs[i]].type.shape.rank();
      if (dim < 0 || dim >= rank)
        fail(ErrorKind::kConfig, "dim mark {}:{}: dim out of range [0, {}]", name, dim, rank - 1);
    }
  }
}

Session::~Session() = default;

const SessionStats& Session::stats() const {
  const KernelCacheStats k = kernels_.stats();
  stats_.kernelCompiles = k.compiles;
  stats_.kernelStoreHits = k.storeHits;
  stats_.kernelCacheHits = k.cache.hits;
  stats_.kernelCacheMisses = k.cache.misses;
  stats_.kernelCache = k.cache;
  stats_.planCache = plans_.stats();
  return stats_;
}

std::vector<Tensor> Session::run(std::span<const Tensor> inputs) {
  if (inputs.size() != graph_->inputs.size())
    fail(ErrorKind::kShape, "graph {} takes {} inputs, got {}", graph_->name, graph_->inputs.size(),
         inputs.size());
  InputSignature sig;
  sig.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = graph_->values[graph_->inputs[i]];
    if (inputs[i].dtype() != v.type.dtype)
      fail(ErrorKind::kShape, "input '{}': expected dtype {}, got {}", v.name,
           dtypeName(v.type.dtype), dtypeName(inputs[i].dtype()));
    sig.push_back(inputs[i].shape());
  }
  checkSignature(*graph_, sig);

  CallRecord rec;
  rec.iteration = static_cast<int>(stats_.iterations);
  rec.signature = signatureToString(*graph_, sig);
  kernelLog_.clear();
  const DeviceCounters before = device_->counters();
  const auto start = Clock::now();
  std::vector<Tensor> out;
  switch (options_.mode) {
    case Mode::kStatic: out = runStatic(inputs, sig, rec); break;
    case Mode::kEager: out = runEager(inputs, rec); break;
    case Mode::kDynamic:
    case Mode::kAuto: out = runCompiled(inputs, sig, rec); break;
    case Mode::kGeared: out = runGeared(inputs, sig, rec); break;
  }
  const double total = secondsSince(start);
  const DeviceCounters& after = device_->counters();
  rec.launches += after.launches - before.launches;
  rec.syncs += after.syncs - before.syncs;
  rec.allocations += after.allocations - before.allocations;
  rec.kernelsCompiled = kernelLog_;
  rec.runSeconds = std::max(0.0, total - rec.compileSeconds);

  // MODELED device time of this call from the cost model.
  const CostModel& c = options_.cost;
  double modeled = 0;
  for (const std::string& k : rec.kernelsCompiled)
    modeled += c.kernelCompile(k.substr(0, k.find('_')));
  if (rec.graphCompiled) modeled += c.graphCompileUs;
  rec.modeledCompileUs = modeled;
  const int64_t graphLaunches = after.graphLaunches - before.graphLaunches;
  modeled += static_cast<double>(graphLaunches) * c.graphLaunchUs +
             static_cast<double>(rec.launches - graphLaunches) * c.launchUs +
             static_cast<double>(rec.syncs) * c.syncUs +
             static_cast<double>(after.poolMisses - before.poolMisses) * c.allocUs;
  rec.modeledDeviceUs = modeled;

  stats_.iterations++;
  stats_.launches += rec.launches;
  stats_.syncs += rec.syncs;
  stats_.allocations += rec.allocations;
  stats_.compileSeconds += rec.compileSeconds;
  stats_.modeledDeviceUs += modeled;
  stats_.modeledCompileUs += rec.modeledCompileUs;
  if (rec.fallback) stats_.fallbackRuns++;
  if (options_.onCall) options_.onCall(rec);
  history_.push_back(std::move(rec));
  if (options_.historyLimit > 0 && history_.size() >= 2 * options_.historyLimit) {
    const size_t drop = history_.size() - options_.historyLimit;
    history_.erase(history_.begin(), history_.begin() + static_cast<std::ptrdiff_t>(drop));
    historyDropped_ += static_cast<int64_t>(drop);
  }
  return out;
}

std::shared_ptr<Plan> Session::compile(const InputSignature& sig, const std::string& reason,
                                       CallRecord& rec) {
  const auto start = Clock::now();
  auto plan = compilePlan(graph_, sig, kernels_, PlanCompileOptions{reason});
  rec.compileSeconds += secondsSince(start);
  for (const PlanStep& step : plan->steps)
    if (step.compiled) kernelLog_.push_back(step.kernel->name);
  rec.graphCompiled = true;
  rec.planId = plan->id;
  rec.reason = reason;
  stats_.graphCompiles++;
  if (plan->isStatic) {
    // A static plan's arena is one device allocation made at compile time.
    if (plan->arenaBytes > 0) rec.allocations++;
    stats_.peakBytes = std::max(stats_.peakBytes, plan->arenaBytes);
  }
  return plan;
}

// Every guard of every cached plan that fails for `sig` (TORCH_LOGS=recompiles lists them
// per cache entry); returns the first as the short reason.
std::string Session::describeMiss(const InputSignature& sig, CallRecord& rec) const {
  std::vector<std::pair<uint64_t, InputSignature>> cached;
  plans_.forEach([&](const InputSignature& k, const std::shared_ptr<Plan>& p) {
    cached.emplace_back(p->id, k);
  });
  for (const auto& p : dynamicPlans_) cached.emplace_back(p->id, p->signature);
  std::sort(cached.begin(), cached.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::string first;
  for (const auto& [id, csig] : cached) {
    for (const GuardFailure& f : guardFailures(*graph_, csig, sig)) {
      rec.guardFailures.push_back(fmt::format("plan #{}: {}", id, f.text));
      if (first.empty()) first = f.text;
    }
  }
  return first;
}

std::vector<Tensor> Session::runStatic(std::span<const Tensor> inputs, const InputSignature& sig,
                                       CallRecord& rec) {
  std::shared_ptr<Plan> plan;
  if (auto hit = plans_.get(sig)) {
    plan = *hit;
    stats_.planCacheHits++;
  } else {
    stats_.planCacheMisses++;
    const std::string why = history_.empty() && stats_.graphCompiles == 0
                                ? std::string("first call")
                                : describeMiss(sig, rec);
    if (stats_.graphCompiles >= options_.recompileLimit &&
        options_.onRecompileLimit != OnRecompileLimit::kUnlimited) {
      if (options_.onRecompileLimit == OnRecompileLimit::kError)
        fail(ErrorKind::kLimit, "hit recompile_limit ({}); last reason: {}",
             options_.recompileLimit, why.empty() ? "cache entry evicted" : why);
      rec.fallback = true;
      rec.reason = why;
      compileLogger()->warn("hit recompile_limit ({}): running [{}] through the dynamic path",
                            options_.recompileLimit, rec.signature);
      return runDynamicPath(*graph_, nullptr, inputs, /*syncPerOp=*/
                            options_.cost.syncPolicy == SyncPolicy::kPerOp, rec, false);
    }
    plan = compile(sig, why.empty() ? std::string("plan evicted from the plan cache") : why, rec);
    plans_.put(sig, plan);
  }
  return launchStatic(*plan, inputs, rec);
}

std::vector<Tensor> Session::launchStatic(const Plan& plan, std::span<const Tensor> inputs,
                                          CallRecord& rec) {
  rec.planId = plan.id;
  std::vector<Tensor> out = allocateOutputs(plan);
  std::vector<TensorView> in(inputs.size()), ov(out.size());
  for (size_t i = 0; i < inputs.size(); ++i) in[i] = inputs[i].view();
  for (size_t i = 0; i < out.size(); ++i) ov[i] = out[i].view();
  // One whole-graph launch and one sync: the static plan is issued to the device at once.
  device_->launch([&] { runStaticPlan(plan, in, ov); }, /*graph=*/true);
  device_->sync();
  return out;
}

std::vector<Tensor> Session::runEager(std::span<const Tensor> inputs, CallRecord& rec) {
  return runDynamicPath(*graph_, nullptr, inputs, /*syncPerOp=*/false, rec, /*eagerCompile=*/true);
}

std::vector<Tensor> Session::runDynamicPath(const Graph& g, const Plan* plan,
                                            std::span<const Tensor> inputs, bool syncPerOp,
                                            CallRecord& rec, bool eagerCompile) {
  const size_t nv = g.values.size();
  std::vector<TensorView> views(nv);
  std::vector<size_t> bytes(nv, 0);
  std::vector<int> remaining(nv, 0);  // uses left, to release pooled buffers early
  for (const Node& n : g.nodes)
    for (ValueId v : n.inputs) remaining[v]++;
  std::vector<int> outputIndex(nv, -1);
  for (size_t i = 0; i < g.outputs.size(); ++i)
    if (outputIndex[g.outputs[i]] < 0) outputIndex[g.outputs[i]] = static_cast<int>(i);
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    views[g.inputs[i]] = TensorView{const_cast<void*>(t.data()), t.dtype(), t.shape()};
  }
  std::vector<Tensor> out(g.outputs.size());
  size_t step = 0;
  try {
    for (NodeId n = 0; n < static_cast<NodeId>(g.nodes.size()); ++n) {
      const Node& node = g.nodes[n];
      if (node.kind == OpKind::kConst) {
        views[node.output] = node.constant->view();
        continue;
      }
      // Runtime shape inference: the per-call host work a dynamic graph cannot avoid.
      std::vector<TensorType> types(node.inputs.size());
      std::vector<TensorView> args(node.inputs.size());
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        args[k] = views[node.inputs[k]];
        types[k] = TensorType{args[k].dtype, args[k].shape};
      }
      const TensorType outType =
          inferNode(InferContext{node.kind, types, node.attrs, &g, n, {}, &node});
      TensorView ov{nullptr, outType.dtype, outType.shape};
      const int oi = outputIndex[node.output];
      if (oi >= 0) {
        out[oi] = Tensor(outType.dtype, outType.shape);
        ov.data = out[oi].data();
      } else {
        bytes[node.output] = static_cast<size_t>(outType.shape.numel()) * dtypeSize(outType.dtype);
        ov.data = device_->allocate(bytes[node.output]);
      }
      views[node.output] = ov;
      std::shared_ptr<const KernelSpec> spec;
      if (plan) {
        spec = plan->steps[step].kernel;
      } else if (eagerCompile) {
        int compiled = 0;
        spec = kernels_.get(makeKernelKey(node.kind, types, node.attrs), &compiled);
        if (compiled) kernelLog_.push_back(spec->name);
      } else {
        // Fallback after the recompile limit: a shape-generic kernel made on the spot, not
        // cached and not counted as a compile (Dynamo's run-only mode runs unspecialised).
        std::vector<TensorType> generic = types;
        for (auto& t : generic)
          for (int d = 0; d < t.shape.rank(); ++d) t.shape[d] = kAnyDim;
        spec = compileKernelSpec(makeKernelKey(node.kind, generic, node.attrs));
      }
      ++step;
      // The task names its node itself: on a stream the error surfaces at a later sync.
      device_->launch([spec, args = std::move(args), ov, &g, n] {
        try {
          kernels::runViews(*spec, args, ov);
        } catch (const std::exception& e) {
          rethrowForNode(g, n, e);
        }
      });
      if (syncPerOp) device_->sync();
      for (ValueId v : node.inputs) {
        if (--remaining[v] == 0 && bytes[v] > 0) {
          // In-order stream: a block released now is only reused by later launches.
          device_->release(views[v].data, bytes[v]);
          bytes[v] = 0;
        }
      }
    }
    if (!syncPerOp) device_->sync();
  } catch (...) {
    // Drain what was launched before reporting; the first error is the one to report.
    try {
      device_->sync();
    } catch (...) {
    }
    throw;
  }
  for (ValueId v = 0; v < static_cast<ValueId>(nv); ++v)
    if (bytes[v] > 0) device_->release(views[v].data, bytes[v]);
  // Returned inputs/consts and repeated outputs are copies.
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    if (!out[i].empty()) continue;
    const TensorView& v = views[g.outputs[i]];
    out[i] = Tensor(v.dtype, v.shape);
    std::memcpy(out[i].data(), v.data, out[i].bytes());
  }
  return out;
}

InputSignature Session::autoSignature(const InputSignature& actual) const {
  InputSignature sig = actual;
  for (size_t i = 0; i < sig.size(); ++i) {
    const std::string& name = graph_->values[graph_->inputs[i]].name;
    for (int d = 0; d < sig[i].rank(); ++d) {
      if (options_.staticDims.count({name, d})) continue;
      bool dynamic = options_.dynamicDims.count({name, d}) > 0;
      if (options_.mode == Mode::kDynamic) {
        // Dynamic mode keeps every dim the model declares dynamic symbolic.
        dynamic = dynamic || !isStaticDim(graph_->values[graph_->inputs[i]].type.shape[d]);
      } else if (autoDynamic_.count({static_cast<int>(i), d})) {
        dynamic = true;
      }
      // Sizes 0 and 1 are specialised even when dynamic, as Dynamo does.
      if (dynamic && actual[i][d] >= 2) sig[i][d] = kAnyDim;
    }
  }
  return sig;
}

std::vector<Tensor> Session::runCompiled(std::span<const Tensor> inputs, const InputSignature& sig,
                                         CallRecord& rec) {
  const bool perOp = options_.cost.syncPolicy == SyncPolicy::kPerOp;
  // Exact static plans first (hash lookup), then plans with dynamic dims.
  if (auto hit = plans_.get(sig)) {
    stats_.planCacheHits++;
    return launchStatic(**hit, inputs, rec);
  }
  for (const auto& p : dynamicPlans_) {
    if (signatureAccepts(p->signature, sig)) {
      stats_.planCacheHits++;
      rec.planId = p->id;
      return runDynamicPath(*p->graph, p.get(), inputs, perOp, rec, false);
    }
  }
  stats_.planCacheMisses++;
  const bool first = stats_.graphCompiles == 0;
  std::string why = first ? std::string("first call") : describeMiss(sig, rec);
  if (!first && options_.mode == Mode::kAuto && firstSeen_) {
    // Automatic dynamic: every dim whose size differs from the first call becomes dynamic.
    for (size_t i = 0; i < sig.size(); ++i)
      for (int d = 0; d < sig[i].rank() && d < (*firstSeen_)[i].rank(); ++d)
        if (sig[i][d] != (*firstSeen_)[i][d]) autoDynamic_.insert({static_cast<int>(i), d});
  }
  if (!firstSeen_) firstSeen_ = sig;
  if (stats_.graphCompiles >= options_.recompileLimit &&
      options_.onRecompileLimit != OnRecompileLimit::kUnlimited) {
    if (options_.onRecompileLimit == OnRecompileLimit::kError)
      fail(ErrorKind::kLimit, "hit recompile_limit ({}); last reason: {}", options_.recompileLimit,
           why);
    rec.fallback = true;
    rec.reason = why;
    return runDynamicPath(*graph_, nullptr, inputs, perOp, rec, false);
  }
  const InputSignature target = autoSignature(sig);
  bool isStatic = true;
  for (const Shape& s : target) isStatic = isStatic && s.isStatic();
  if (!first && !isStatic && options_.mode == Mode::kAuto)
    why += " (dims that changed are now dynamic)";
  auto plan = compile(target, why, rec);
  if (isStatic) {
    plans_.put(target, plan);
    return launchStatic(*plan, inputs, rec);
  }
  dynamicPlans_.push_back(plan);
  return runDynamicPath(*plan->graph, plan.get(), inputs, perOp, rec, false);
}

std::vector<Tensor> referenceRun(const Graph& g, std::span<const Tensor> inputs) {
  if (inputs.size() != g.inputs.size())
    fail(ErrorKind::kShape, "graph {} takes {} inputs, got {}", g.name, g.inputs.size(),
         inputs.size());
  InputSignature sig;
  for (const Tensor& t : inputs) sig.push_back(t.shape());
  const Graph sg = specializeGraph(g, sig);
  std::vector<Tensor> values(sg.values.size());
  for (size_t i = 0; i < sg.inputs.size(); ++i) values[sg.inputs[i]] = inputs[i];
  for (NodeId n = 0; n < static_cast<NodeId>(sg.nodes.size()); ++n) {
    const Node& node = sg.nodes[n];
    if (node.kind == OpKind::kConst) {
      values[node.output] = *node.constant;
      continue;
    }
    const TensorType& t = sg.values[node.output].type;
    values[node.output] = Tensor(t.dtype, t.shape);
    std::vector<TensorView> args;
    for (ValueId v : node.inputs) args.push_back(values[v].view());
    Attrs attrs = node.attrs;
    if (attrs.dim) attrs.dim = sg.values[node.inputs[0]].type.shape.wrapDim(*attrs.dim, "dim");
    try {
      kernels::ref::runOp(node.kind, attrs, args, values[node.output].view());
    } catch (const std::exception& e) {
      rethrowForNode(sg, n, e);
    }
  }
  std::vector<Tensor> out;
  for (ValueId v : sg.outputs) {
    // Copies, so callers never alias graph inputs or constants.
    Tensor c(values[v].dtype(), values[v].shape());
    if (c.bytes()) std::memcpy(c.data(), values[v].data(), c.bytes());
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<Tensor> makeInputs(const Graph& g, const InputSignature& sig, uint64_t seed) {
  const Graph sg = specializeGraph(g, sig);
  std::vector<Tensor> out;
  for (size_t i = 0; i < sg.inputs.size(); ++i) {
    const ValueId v = sg.inputs[i];
    const TensorType& t = sg.values[v].type;
    Tensor x = randomTensor(t.dtype, t.shape, seed * 1000003 + i);
    if (t.dtype != DType::kF32) {
      // Integer inputs used as gather indices must be in range for every op they index.
      int64_t bound = 100;
      for (const Node& n : sg.nodes) {
        if ((n.kind == OpKind::kIndexSelect || n.kind == OpKind::kCatGather) &&
            n.inputs.back() == v) {
          const Shape& s = sg.values[n.inputs[0]].type.shape;
          int64_t size = s[s.wrapDim(*n.attrs.dim, "dim")];
          if (n.kind == OpKind::kCatGather) {
            size = 0;
            for (size_t k = 0; k + 1 < n.inputs.size(); ++k) {
              const Shape& sk = sg.values[n.inputs[k]].type.shape;
              size += sk[sk.wrapDim(*n.attrs.dim, "dim")];
            }
          }
          bound = std::min(bound, std::max<int64_t>(size, 1));
        }
      }
      dispatchDType(t.dtype, [&](auto tag) {
        using T = decltype(tag);
        T* p = x.as<T>();
        if constexpr (!std::is_same_v<T, float>)
          for (int64_t k = 0; k < x.numel(); ++k) p[k] = static_cast<T>(p[k] % bound);
      });
    }
    out.push_back(std::move(x));
  }
  return out;
}

}  // namespace gearbox
