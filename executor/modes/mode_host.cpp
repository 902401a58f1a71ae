// The services a Session gives its mode (executor/modes/mode_strategy.h): compiling plans,
// up front or on a miss, launching them, the op-by-op path and the recompile policy on a miss.
// Everything counted or costed here goes into the call's CallContext or, for up-front work,
// the session's counters.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "compiler/compile_log.h"
#include "compiler/parallel_for.h"
#include "executor/kernels.h"
#include "executor/modes/mode_strategy.h"
#include "executor/plan_runner.h"
#include "graph/checked.h"
#include "graph/error.h"

namespace gearbox {

using Clock = std::chrono::steady_clock;
static double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

static std::unique_ptr<ModeStrategy> makeStrategyOf(Mode mode, ModeHost& host) {
  switch (mode) {
#define GEARBOX_MODE(e, name, factory, needsGears, summary) \
  case Mode::k##e:                                          \
    return factory(host);
#include "executor/modes/modes.def"
#undef GEARBOX_MODE
  }
  fail(ErrorKind::kConfig, "unknown mode {}", static_cast<int>(mode));
}

std::unique_ptr<ModeStrategy> makeModeStrategy(Mode mode, ModeHost& host) {
  auto strategy =
      host.options().strategy ? host.options().strategy(host) : makeStrategyOf(mode, host);
  // A mode reads its own options when it is made; one it did not read is a mistake to report
  // now, not an option silently ignored.
  for (const auto& [name, value] : host.options().modeOptions)
    if (!host.takenModeOptions().contains(name))
      fail(ErrorKind::kConfig, "mode {} takes no option '{}' (given {}={})", modeName(mode), name,
           name, value);
  if (host.options().modeConfig.has_value() && !host.modeConfigTaken())
    fail(ErrorKind::kConfig,
         "mode {} does not take the structured mode options it was given (gear options are for "
         "the modes that need gears)",
         modeName(mode));
  return strategy;
}

namespace {

// ModeHost over a Session's parts.
class SessionHost final : public ModeHost {
 public:
  explicit SessionHost(SessionParts p) : p_(p) {}

  const Graph& graph() const override { return *p_.graph; }
  const std::shared_ptr<const Graph>& sharedGraph() const override { return p_.graph; }
  const SessionOptions& options() const override { return p_.options; }
  SessionStats& stats() override { return p_.stats; }
  void notePeakBytes(int64_t bytes) override {
    p_.stats.peakBytes = std::max(p_.stats.peakBytes, bytes);
  }
  KernelCache& kernels() override { return p_.kernels; }
  Tensor outputTensor(DType dtype, const Shape& shape) override {
    return p_.outputs.take(dtype, shape);
  }
  PlanCache& plans() override { return p_.plans; }
  Device& device() override { return p_.device; }
  TimelineSpan span(const char* name, const char* cat) const override {
    return TimelineSpan(p_.options.timeline, p_.timelinePid, name, cat);
  }

  std::shared_ptr<Plan> compile(const InputSignature& sig, const std::string& reason,
                                CallContext& call) override;
  UpFrontResult compileUpFront(const std::vector<UpFrontCompile>& jobs, const char* what) override;
  void bindSharedArena(std::span<const std::shared_ptr<Plan>> plans) override;
  void holdGear(const Plan& plan, size_t gear) override;
  void cachePlan(const InputSignature& key, std::shared_ptr<Plan> plan, CallContext& call) override;
  std::shared_ptr<std::byte> holdWorkspace(uint64_t id, const InputSignature& sig, int64_t bytes,
                                           int64_t ioBytes, CallContext& call) override;
  std::vector<Tensor> launchStatic(const Plan& plan, std::span<const Tensor> inputs,
                                   CallContext& call) override;
  void launchStaticViews(const Plan& plan, std::span<const TensorView> in,
                         std::span<const TensorView> out, const InputSignature* paddedFrom,
                         const std::string& label, CallContext& call) override;
  void launchGraph(int64_t kernels, std::function<void()> body,
                   const std::function<std::string()>& label, CallContext& call) override;
  void chargeKernel(const KernelKey& key, bool generic, CallContext& call) override {
    call.modeled.computeUs += p_.options.cost.kernelRun(key, generic);
  }
  uint64_t recordGraphCompile(const std::string& reason, double modeledUs, double seconds,
                              CallContext& call) override {
    call.modeled.compileUs += modeledUs;
    call.rec.compileSeconds += seconds;
    call.rec.graphCompiled = true;
    call.rec.planId = nextPlanId_++;
    call.rec.reason = reason;
    p_.stats.graphCompiles++;
    return call.rec.planId;
  }
  std::vector<Tensor> runOpByOp(const Graph& g, const Plan* plan, std::span<const Tensor> inputs,
                                bool syncPerOp, OpKernels kernels, CallContext& call,
                                const KernelChooser& choose, const OpObserver& observe) override;
  bool syncPerOp() const override { return p_.options.cost.syncPolicy == SyncPolicy::kPerOp; }
  std::optional<MissDescription> onMiss(std::vector<GuardedPlan> cached, const InputSignature& sig,
                                        std::span<const Tensor> inputs, CallContext& call,
                                        std::vector<Tensor>& fallbackOut) override;

 private:
  // Frees the MODELED workspace of cached plans the plan cache no longer holds (evicted past its
  // capacity).
  void releaseEvictedPlans();
  // Error(kMemory): the compiled shape `sig` needs `workspace` bytes, which with what is
  // resident makes `needed`, above the capacity. `hint` says what would make it fit.
  [[noreturn]] void outOfMemory(const InputSignature& sig, const std::string& what,
                                int64_t workspace, int64_t io, int64_t needed,
                                const char* hint) const;
  // What the device holds with a compiled shape of `workspace` bytes resident while it runs on
  // `io` bytes of inputs and outputs (its admission check).
  int64_t neededWith(int64_t workspace, int64_t io, bool pooled = true) const {
    return addOrFail(p_.memory.residentWith(workspace, pooled), io, "modeled device memory");
  }
  SessionParts p_;
  uint64_t nextPlanId_ = 1;  // plans are numbered per session (PlanCompileOptions::id)
};

}  // namespace

std::unique_ptr<ModeHost> makeSessionHost(SessionParts parts) {
  return std::make_unique<SessionHost>(parts);
}

std::shared_ptr<Plan> SessionHost::compile(const InputSignature& sig, const std::string& reason,
                                           CallContext& call) {
  CallRecord& rec = call.rec;
  TimelineSpan span = this->span("graph compile", "graph_compile");
  const auto start = Clock::now();
  PlanCompileOptions options{reason};
  options.id = nextPlanId_++;
  // Model only: no kernel runs, so the arena is counted but not materialised.
  options.allocateArena = !p_.options.modelOnly;
  auto plan = compilePlan(p_.graph, sig, p_.kernels, options);
  rec.compileSeconds += secondsSince(start);
  if (span.on()) {
    span.setName(fmt::format("compile plan #{}", plan->id));
    span.arg("reason", reason);
    span.arg("kernels_compiled", std::to_string(plan->kernelsCompiled));
    span.end();
  }
  for (const PlanStep& step : plan->steps) {
    if (!step.compiled) continue;
    call.kernelsCompiled.push_back(step.kernel->name);
    call.modeled.compileUs += p_.options.cost.kernelCompile(step.kernel->key);
  }
  call.modeled.compileUs += p_.options.cost.graphCompile(plan->graph->nodes.size());
  rec.graphCompiled = true;
  rec.planId = plan->id;
  rec.reason = reason;
  p_.stats.graphCompiles++;
  if (plan->isStatic) {
    // A static plan's arena is one device allocation made at compile time.
    if (plan->arenaBytes > 0) rec.allocations++;
    p_.stats.peakBytes = std::max(p_.stats.peakBytes, plan->arenaBytes);
  }
  return plan;
}

UpFrontResult SessionHost::compileUpFront(const std::vector<UpFrontCompile>& jobs,
                                          const char* what) {
  Timeline* tl = p_.options.timeline;
  const int pid = p_.timelinePid;
  // Timeline: the whole batch on the host track, each job on a track of its own.
  if (tl)
    for (size_t i = 0; i < jobs.size(); ++i)
      tl->nameThread(pid, Timeline::kGearTidBase + static_cast<int>(i), jobs[i].track);
  TimelineSpan batch = this->span(what, "prepare");
  const auto start = Clock::now();
  UpFrontResult r;
  // Plans compiled later (a gear fallback's) are numbered after these.
  for (const UpFrontCompile& job : jobs) nextPlanId_ = std::max(nextPlanId_, job.id + 1);
  r.plans.assign(jobs.size(), nullptr);
  r.errors.assign(jobs.size(), "");
  // MODELED device compile cost of each job's kernels, summed in its own task.
  std::vector<double> modeledKernels(jobs.size(), 0.0);
  // One task per job; the kernel cache makes sure a shared op shape compiles once.
  parallelFor(jobs.size(), [&](size_t i) {
    const UpFrontCompile& job = jobs[i];
    Timeline::ScopedTid track(Timeline::kGearTidBase + static_cast<int>(i));
    TimelineSpan span = this->span("up-front compile", "graph_compile");
    if (span.on()) span.setName(job.track);
    try {
      auto plan = compilePlan(p_.graph, job.signature, p_.kernels,
                              PlanCompileOptions{job.reason, /*allocateArena=*/false, job.id});
      for (const PlanStep& step : plan->steps)
        if (step.compiled) modeledKernels[i] += p_.options.cost.kernelCompile(step.kernel->key);
      r.plans[i] = std::move(plan);
    } catch (const Error& e) {
      // A product can combine values the graph rejects (seed 001: (2,2) + (4,2) for an Add).
      r.errors[i] = e.what();
      // Not a counted graph compile: a category of its own.
      span.setCat("gear_compile_failed");
      span.arg("error", e.what());
    }
  });
  // MODELED device cost of the up-front compile (serial, as a device compiles): the same terms
  // as a run-time compile, for the plans that compiled.
  double modeled = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!r.plans[i]) continue;
    ++r.compiled;
    modeled += p_.options.cost.graphCompile(p_.graph->nodes.size()) + modeledKernels[i];
  }
  const double secs = secondsSince(start);
  batch.end();
  if (!std::isfinite(modeled))
    fail(ErrorKind::kConfig,
         "device profile '{}': the MODELED compile time of the gears is not finite; the "
         "profile's compile figures are too large to model",
         p_.options.cost.name);
  p_.stats.graphCompiles += static_cast<int64_t>(r.compiled);
  p_.stats.compileSeconds += secs;
  p_.stats.modeledDeviceUs += modeled;
  p_.stats.modeledCompileUs += modeled;
  p_.stats.modeled.compileUs += modeled;
  return r;
}

void SessionHost::outOfMemory(const InputSignature& sig, const std::string& what, int64_t workspace,
                              int64_t io, int64_t needed, const char* hint) const {
  const ModeledMemory now = p_.memory.snapshot();
  fail(ErrorKind::kMemory,
       "out of MODELED device memory: {} [{}] does not fit: it needs {} of workspace and {} of "
       "inputs and outputs; with the weights ({}), the {} workspaces already resident ({}, "
       "graph pool {}) and the op-by-op pool ({}) the device would hold {}, above its capacity "
       "of {} ({}). {}",
       what, signatureToString(*p_.graph, sig), formatBytes(workspace), formatBytes(io),
       formatBytes(now.weightsBytes), now.residentPlans, formatBytes(now.workspaceBytes),
       graphPoolName(now.pool), formatBytes(now.opByOpBytes), formatBytes(needed),
       formatBytes(now.capacityBytes), memoryCapacitySource(p_.options), hint);
}

void SessionHost::holdGear(const Plan& plan, size_t gear) {
  const int64_t io = planIoBytes(plan), needed = neededWith(plan.arenaBytes, io);
  if (!p_.memory.fits(needed))
    outOfMemory(plan.signature, fmt::format("gear {}", gear), plan.arenaBytes, io, needed,
                "Gears are never evicted (--on-oom evict does not apply): use fewer gears, "
                "--graph-pool shared, or a larger --device-memory");
  p_.memory.hold(plan.id, plan.arenaBytes, /*evictable=*/false);
}

void SessionHost::bindSharedArena(std::span<const std::shared_ptr<Plan>> plans) {
  // MODELED: every gear's workspace is resident from now on, checked in gear order, so the
  // error names the first gear that does not fit.
  for (size_t i = 0; i < plans.size(); ++i)
    if (plans[i]) holdGear(*plans[i], i);
  if (p_.options.graphPool == GraphPool::kSeparate) {
    // A pool per gear: an arena each, one allocation each; the device holds their sum.
    int64_t total = 0;
    for (const auto& p : plans) {
      if (!p) continue;
      total = addOrFail(total, p->arenaBytes, "gear arena bytes");
      if (!p_.options.modelOnly) bindArena(*p, allocateArena(p->hostArenaBytes));
      if (p->arenaBytes > 0) p_.stats.allocations++;
    }
    p_.stats.peakBytes = std::max(p_.stats.peakBytes, total);
    return;
  }
  int64_t arenaBytes = 0, hostBytes = 0;  // the modeled pool; what the host allocates
  for (const auto& p : plans) {
    if (!p) continue;
    arenaBytes = std::max(arenaBytes, p->arenaBytes);
    hostBytes = std::max(hostBytes, p->hostArenaBytes);
  }
  // Model only: no kernel runs, so the arena is counted but not materialised.
  if (!p_.options.modelOnly) {
    auto arena = allocateArena(hostBytes);
    for (const auto& p : plans)
      if (p) bindArena(*p, arena);
  }
  p_.stats.peakBytes = std::max(p_.stats.peakBytes, arenaBytes);
  if (arenaBytes > 0) p_.stats.allocations++;
}

// Model only, no kernel writes the outputs: every call's outputs alias one zeroed buffer per
// thread, as large as the largest output so far. Allocating them (mmap and munmap for each
// large one) was most of a model-only static call (gearbox sweep, issue 25).
Tensor unwrittenTensor(DType dtype, const Shape& shape) {
  thread_local std::shared_ptr<std::byte> buffer;
  thread_local size_t capacity = 0;
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtypeSize(dtype);
  if (bytes > capacity || !buffer) {
    auto* p = static_cast<std::byte*>(std::calloc(std::max<size_t>(bytes, 1), 1));
    if (!p) throw std::bad_alloc();
    buffer = std::shared_ptr<std::byte>(p, [](std::byte* q) { std::free(q); });
    capacity = bytes;
  }
  return Tensor::wrap(dtype, shape, buffer);
}

namespace {
std::vector<Tensor> unwrittenOutputs(const Plan& plan) {
  std::vector<Tensor> out;
  out.reserve(plan.graph->outputs.size());
  for (ValueId v : plan.graph->outputs)
    out.push_back(unwrittenTensor(plan.types[v].dtype, plan.types[v].shape));
  return out;
}
}  // namespace
void SessionHost::releaseEvictedPlans() {
  std::set<uint64_t> cached;
  p_.plans.forEach(
      [&](const InputSignature&, const std::shared_ptr<Plan>& p) { cached.insert(p->id); });
  for (uint64_t id : p_.memory.evictableIds())
    if (!cached.contains(id)) p_.memory.release(id);
}

void SessionHost::cachePlan(const InputSignature& key, std::shared_ptr<Plan> plan,
                            CallContext& call) {
  (void)call;
  if (plan->isStatic) {
    releaseEvictedPlans();
    const int64_t bytes = plan->arenaBytes, io = planIoBytes(*plan);
    for (;;) {
      const int64_t needed = neededWith(bytes, io, /*pooled=*/false);
      if (p_.memory.fits(needed)) break;
      std::optional<std::shared_ptr<Plan>> victim;
      if (p_.options.onOom == OnOom::kEvict) victim = p_.plans.evictLeastRecent();
      if (!victim)
        outOfMemory(key, "the plan compiled for", bytes, io, needed,
                    p_.options.onOom == OnOom::kEvict
                        ? "Every other cached plan was evicted and it still does not fit: use a "
                          "larger --device-memory"
                        : "--on-oom evict would evict least-recently-used cached plans to make "
                          "room");
      p_.memory.release((*victim)->id);
      p_.memory.countEviction();
    }
  }
  const uint64_t id = plan->id;
  const int64_t bytes = plan->arenaBytes;
  const bool isStatic = plan->isStatic;
  p_.plans.put(key, std::move(plan));
  if (!isStatic) return;
  releaseEvictedPlans();  // what the cache evicted past its capacity
  p_.memory.hold(id, bytes, /*evictable=*/true);
}

std::shared_ptr<std::byte> SessionHost::holdWorkspace(uint64_t id, const InputSignature& sig,
                                                      int64_t bytes, int64_t ioBytes,
                                                      CallContext& call) {
  const int64_t needed = neededWith(bytes, ioBytes);
  if (!p_.memory.fits(needed))
    outOfMemory(sig, "the capture of", bytes, ioBytes, needed,
                "Captures are never evicted (--on-oom evict does not apply): lower "
                "reduce-overhead.capture_limit, use --graph-pool shared, or a larger "
                "--device-memory");
  p_.memory.hold(id, bytes, /*evictable=*/false);
  if (bytes == 0) return nullptr;
  // One device allocation of the call, as a static plan's arena is one of its compile.
  call.rec.allocations++;
  p_.stats.peakBytes = std::max(p_.stats.peakBytes, bytes);
  return p_.options.modelOnly ? nullptr : allocateArena(bytes);
}

std::vector<Tensor> SessionHost::launchStatic(const Plan& plan, std::span<const Tensor> inputs,
                                              CallContext& call) {
  call.rec.planId = plan.id;
  std::vector<Tensor> out =
      p_.options.modelOnly ? unwrittenOutputs(plan) : allocateOutputs(plan, p_.outputs);
  std::vector<TensorView> in(inputs.size()), ov(out.size());
  for (size_t i = 0; i < inputs.size(); ++i) in[i] = inputs[i].view();
  for (size_t i = 0; i < out.size(); ++i) ov[i] = out[i].view();
  launchStaticViews(plan, in, ov, nullptr, {}, call);
  return out;
}

void SessionHost::launchStaticViews(const Plan& plan, std::span<const TensorView> in,
                                    std::span<const TensorView> out,
                                    const InputSignature* paddedFrom, const std::string& label,
                                    CallContext& call) {
  // MODELED (Session::run): the plan's kernels at its shapes; a padded call's waste vs real.
  call.staticPlan = &plan;
  if (paddedFrom) call.paddedFrom = *paddedFrom;
  call.graphLaunchKernels += static_cast<int64_t>(plan.steps.size());
  TimelineSpan span = this->span("run", "run");
  if (span.on())
    span.setName(label.empty() ? fmt::format("run plan #{} (one graph launch + sync)", plan.id)
                               : label);
  // One whole-graph launch and one sync: the static plan is issued to the device at once.
  p_.device.launch([&] { runStaticPlan(plan, in, out); }, /*graph=*/true);
  p_.device.sync();
}

void SessionHost::launchGraph(int64_t kernels, std::function<void()> body,
                              const std::function<std::string()>& label, CallContext& call) {
  call.graphLaunchKernels += kernels;
  TimelineSpan span = this->span("run", "run");
  if (span.on()) span.setName(label());
  p_.device.launch(std::move(body), /*graph=*/true);
  p_.device.sync();
}

std::optional<MissDescription> SessionHost::onMiss(std::vector<GuardedPlan> cached,
                                                   const InputSignature& sig,
                                                   std::span<const Tensor> inputs,
                                                   CallContext& call,
                                                   std::vector<Tensor>& fallbackOut) {
  CallRecord& rec = call.rec;
  MissDescription miss =
      describeMiss(*p_.graph, std::move(cached), sig, p_.stats.graphCompiles == 0);
  rec.guardFailures = miss.guardFailures;
  rec.guardFailureDetails = miss.failures;
  // Every compile so far, plans and kernels, for the accumulated limit (the kernel cache's
  // stats sum its shards: read only when the limit is on).
  const int64_t allCompiles = p_.recompilePolicy.accumulatedLimit() > 0
                                  ? p_.stats.graphCompiles + p_.kernels.stats().compiles
                                  : 0;
  const MissDecision d = p_.recompilePolicy.onMiss(p_.stats.graphCompiles, miss, allCompiles);
  if (d.action == MissAction::kCompile) return miss;
  if (!d.warning.empty()) compileLogger()->warn("{}", d.warning);
  rec.fallback = true;
  rec.reason = miss.reason;
  fallbackOut =
      runOpByOp(*p_.graph, nullptr, inputs, syncPerOp(), OpKernels::kUncached, call, {}, {});
  return std::nullopt;
}

std::vector<Tensor> SessionHost::runOpByOp(const Graph& g, const Plan* plan,
                                           std::span<const Tensor> inputs, bool syncPerOp,
                                           OpKernels kernels, CallContext& call,
                                           const KernelChooser& choose, const OpObserver& observe) {
  TimelineSpan span =
      this->span(kernels == OpKernels::kUncached ? "fallback run op by op" : "run op by op", "run");
  Device& device = p_.device;
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
  // The call's input shapes: a reshape or expand target may name a graph input's symbol.
  std::vector<Shape> inputShapes(g.inputs.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) inputShapes[i] = inputs[i].shape();
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
          inferNode(InferContext{node.kind, types, node.attrs, &g, n, {}, &node, inputShapes});
      TensorView ov{nullptr, outType.dtype, outType.shape};
      const int oi = outputIndex[node.output];
      if (oi >= 0) {
        out[oi] = p_.options.modelOnly ? unwrittenTensor(outType.dtype, outType.shape)
                                       : Tensor(outType.dtype, outType.shape);
        ov.data = out[oi].data();
      } else {
        bytes[node.output] = static_cast<size_t>(outType.shape.numel()) * dtypeSize(outType.dtype);
        ov.data = device.allocate(bytes[node.output]);
      }
      views[node.output] = ov;
      std::shared_ptr<const KernelSpec> spec;
      // MODELED: every op on this path pays host shape inference; a shape-generic kernel
      // also pays host tiling and runs at the generic efficiency, at the runtime shapes.
      KernelKey runKey = makeKernelKey(node.kind, types, node.attrs, p_.kernels.threads());
      // Reshape: the target as inferred against the graph (it may name dims by symbol).
      if (node.attrs.shape) resolveReshapeTarget(runKey, outType.shape);
      if (kernels == OpKernels::kPlan) {
        spec = plan->steps[step].kernel;
      } else if (kernels == OpKernels::kEagerCompile) {
        int compiled = 0;
        spec = p_.kernels.get(runKey, &compiled);
        if (compiled) {
          call.kernelsCompiled.push_back(spec->name);
          call.modeled.compileUs += p_.options.cost.kernelCompile(spec->key);
        }
      } else if (kernels == OpKernels::kChooser) {
        int compiled = 0;
        spec = choose(n, runKey, &compiled);
        if (compiled) {
          call.kernelsCompiled.push_back(spec->name);
          call.modeled.compileUs += p_.options.cost.kernelCompile(spec->key);
        }
      } else {
        // Fallback after the recompile limit: a shape-generic kernel made on the spot, not
        // cached and not counted as a compile (Dynamo's run-only mode runs unspecialised).
        std::vector<TensorType> generic = types;
        for (auto& t : generic)
          for (int d = 0; d < t.shape.rank(); ++d) t.shape[d] = kAnyDim;
        spec =
            compileKernelSpec(makeKernelKey(node.kind, generic, node.attrs, p_.kernels.threads()));
      }
      const CostModel& cost = p_.options.cost;
      call.modeled.hostDynamicUs +=
          cost.hostShapeInferenceUs + (spec->generic ? cost.hostTilingUs : 0.0);
      call.modeled.computeUs += cost.kernelRun(runKey, spec->generic);
      ++step;
      if (observe) observe(n, spec, runKey, args, ov);
      // Measured: the launch (on the inline device, the kernel itself) and the per-op sync.
      TimelineSpan launch = this->span("launch", "launch");
      if (launch.on()) launch.setName("launch " + spec->name);
      // The task names its node itself: on a stream the error surfaces at a later sync.
      device.launch([spec, args = std::move(args), ov, &g, n] {
        try {
          kernels::runViews(*spec, args, ov);
        } catch (const std::exception& e) {
          rethrowForNode(g, n, e);
        }
      });
      if (syncPerOp) device.sync();
      launch.end();
      for (ValueId v : node.inputs) {
        if (--remaining[v] == 0 && bytes[v] > 0) {
          // In-order stream: a block released now is only reused by later launches.
          device.release(views[v].data, bytes[v]);
          bytes[v] = 0;
        }
      }
    }
    if (!syncPerOp) device.sync();
  } catch (...) {
    // Drain what was launched before reporting; the first error is the one to report.
    try {
      device.sync();
    } catch (...) {
    }
    throw;
  }
  for (ValueId v = 0; v < static_cast<ValueId>(nv); ++v)
    if (bytes[v] > 0) device.release(views[v].data, bytes[v]);
  // Returned inputs/consts and repeated outputs are copies.
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    if (!out[i].empty()) continue;
    const TensorView& v = views[g.outputs[i]];
    out[i] = Tensor(v.dtype, v.shape);
    std::memcpy(out[i].data(), v.data, out[i].bytes());
  }
  return out;
}

}  // namespace gearbox
