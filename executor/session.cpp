#include "executor/session.h"

#include <fmt/format.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstring>

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

// The thread cap's arena: everything the session runs with oneTBB (kernels split into tasks,
// geared mode's parallel gear compiles) runs inside it, on at most `threads` threads. An arena
// rather than a process-wide tbb::global_control, so two sessions of one process (Python) can
// run under different caps; the CLI adds a global_control for the whole command
// (driver/run_command.cpp).
struct Session::Arena {
  explicit Arena(int threads) : arena(threads) {}
  tbb::task_arena arena;
};

template <class F>
void Session::inArena(const F& f) {
  if (arena_) {
    arena_->arena.execute(f);  // rethrows what f throws
  } else {
    f();
  }
}

namespace {
int checkedThreads(int threads) {
  if (threads < 0 || threads > kMaxThreads)
    fail(ErrorKind::kConfig, "threads {}: expected 0 (no cap) to {}", threads, kMaxThreads);
  return threads;
}
}  // namespace

Session::Session(Graph graph, SessionOptions options)
    : options_(std::move(options)),
      device_(makeDevice(options_.device)),
      kernels_(options_.kernelCacheCapacity, checkedThreads(options_.threads)),
      plans_(options_.planCacheCapacity),
      recompilePolicy_(options_.recompileLimit, options_.onRecompileLimit,
                       options_.accumulatedRecompileLimit),
      outputs_(options_.outputPoolBytes) {
  verifyGraph(graph);
  if (options_.runPasses) {
    passReport_ = defaultPipeline(options_.disabledPasses).run(graph);
    stats_.passesFired = passReport_.fired();
  }
  graph_ = std::make_shared<const Graph>(std::move(graph));
  stats_.mode = options_.mode;
  {
    const int64_t capacity = options_.deviceMemoryBytes > 0 ? options_.deviceMemoryBytes
                                                            : options_.cost.memoryCapacityBytes;
    memory_ = DeviceMemoryModel(graphWeightBytes(*graph_), capacity, options_.graphPool);
    if (!memory_.fits(memory_.residentWith(0)))
      fail(ErrorKind::kMemory,
           "out of MODELED device memory: the weights of graph {} ({}) do not fit the device's "
           "capacity of {} ({})",
           graph_->name, formatBytes(memory_.residentWith(0)), formatBytes(capacity),
           memoryCapacitySource(options_));
  }
  if (options_.modelOnly) device_->setExecute(false);
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
  if (Timeline* tl = options_.timeline) {
    timelinePid_ = tl->addSession(options_.timelineLabel.empty() ? modeName(options_.mode)
                                                                 : options_.timelineLabel);
    const int pid = timelinePid_;
    // Kernel compiles nest inside the graph compile (or gear compile, or eager op) that asked
    // for them: the same thread and track, a time range inside theirs.
    kernels_.addCompileObserver([tl, pid](const KernelSpec& spec, Timeline::Clock::time_point start,
                                          Timeline::Clock::time_point end) {
      tl->complete(pid, Timeline::currentTid(), "kernel compile " + spec.name, "kernel_compile",
                   tl->sinceUs(start),
                   std::chrono::duration<double, std::micro>(end - start).count(),
                   {{"kernel", spec.name}});
    });
  }
  host_ = makeSessionHost(SessionParts{graph_, options_, *device_, kernels_, plans_,
                                       recompilePolicy_, stats_, memory_, outputs_, timelinePid_});
  mode_ = makeModeStrategy(options_.mode, *host_);
  if (options_.threads > 0) arena_ = std::make_unique<Arena>(options_.threads);
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
  stats_.outputPool = outputs_.stats();
  stats_.modeCounters = mode_->counters();
  stats_.memory = memory_.snapshot();
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
  rec.shapes = sig;
  CallContext call(rec);
  const DeviceCounters before = device_->counters();
  // Start-up is its own (StartupStats), not part of the first call's measured time.
  if (!prepared_) prepare(sig);
  TimelineSpan span(options_.timeline, timelinePid_, "call (failed)", "call");
  const auto start = Clock::now();
  std::vector<Tensor> out;
  inArena([&] { out = mode_->run(inputs, sig, call); });
  const double total = secondsSince(start);
  if (options_.timeline) {
    span.setName(fmt::format("iter {}", rec.iteration));
    span.arg("shapes", rec.signature);
    if (rec.planId) span.arg("plan", std::to_string(rec.planId));
    for (const ModeField& f : rec.modeFields)
      if (f.place == ModeReportPlace::kTimeline) span.arg(f.name, f.value);
    if (rec.fallback) span.arg("fallback", rec.reason);
    span.end();
  }
  const DeviceCounters& after = device_->counters();
  rec.launches += after.launches - before.launches;
  rec.syncs += after.syncs - before.syncs;
  rec.allocations += after.allocations - before.allocations;
  rec.kernelsCompiled = std::move(call.kernelsCompiled);
  rec.runSeconds = std::max(0.0, total - rec.compileSeconds);

  modelCall(rec, call, before, after);
  modelMemory(rec, call, inputs, out);
  if (options_.timeline)
    traceModeled(fmt::format("iter {}", rec.iteration), rec.signature, rec.modeled);

  if (stats_.iterations == 0) {
    stats_.startup.firstCallSeconds = rec.compileSeconds + rec.runSeconds;
    stats_.startup.firstCallModeledUs = rec.modeledDeviceUs;
  }
  stats_.iterations++;
  // The most segment memory the caching allocator held at once (it releases cached segments
  // only to stay under its capacity).
  stats_.peakBytes = std::max(stats_.peakBytes, after.peakBytesReserved);
  stats_.launches += rec.launches;
  stats_.syncs += rec.syncs;
  stats_.allocations += rec.allocations;
  stats_.compileSeconds += rec.compileSeconds;
  stats_.runSeconds += rec.runSeconds;
  stats_.modeledDeviceUs += rec.modeledDeviceUs;
  stats_.modeledCompileUs += rec.modeledCompileUs;
  stats_.modeled += rec.modeled;
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

// MODELED device time of the call that just ran (docs/cost-model.md). Runs after the call is
// timed, so modeling never shows up in measured times.
void Session::modelCall(CallRecord& rec, const CallContext& call, const DeviceCounters& before,
                        const DeviceCounters& after) {
  const CostModel& c = options_.cost;
  ModeledTime m = call.modeled;
  if (call.staticPlan) {
    // A static plan runs every step's kernel at the plan's shapes: the gear's (padded) shapes
    // for a padded call.
    const Plan& plan = *call.staticPlan;
    double run = 0;
    for (const PlanStep& step : plan.steps) run += c.kernelRun(step.kernel->key, false);
    m.computeUs += run;
    if (call.paddedFrom) {
      // The same kernels at the real shapes: what the call would cost with no padding.
      const std::vector<TensorType> types = specializeTypes(*plan.graph, *call.paddedFrom);
      KernelKey key;
      double real = 0;
      for (const PlanStep& step : plan.steps) {
        makeKernelKeyInto(key, *plan.graph, types, step.node);
        real += c.kernelRun(key, false);
      }
      m.paddingWasteUs += std::max(0.0, run - real);
    }
  }
  const int64_t graphLaunches = after.graphLaunches - before.graphLaunches;
  m.launchSyncUs += static_cast<double>(graphLaunches) * c.graphLaunchBaseUs +
                    static_cast<double>(call.graphLaunchKernels) * c.graphLaunchPerNodeUs +
                    static_cast<double>(rec.launches - graphLaunches) * c.launchUs +
                    static_cast<double>(rec.syncs) * c.syncUs +
                    static_cast<double>(after.poolMisses - before.poolMisses) * c.allocUs;
  rec.modeled = m;
  rec.modeledCompileUs = m.compileUs;
  rec.modeledDeviceUs = m.total();
  // The profile's ranges keep every figure finite for any shape a trace can hold; should one
  // still overflow, the run stops here naming the profile, instead of writing null into the
  // report and inf into the HTML axes.
  if (!std::isfinite(rec.modeledDeviceUs))
    fail(ErrorKind::kConfig,
         "device profile '{}': the MODELED time of call {} is not finite; the profile's values "
         "or the call's shapes are too large to model",
         c.name, rec.iteration);
}

// MODELED device memory at the end of the call (executor/device_memory.h): the op-by-op pool
// is the caching allocator's reserved bytes; the call's inputs and outputs count in the peak
// (at the plan's shapes for a static plan: a padded call's padded ones). A call whose peak does
// not fit the capacity fails naming its shapes, after running, as a real device's allocation
// fails mid-call.
void Session::modelMemory(const CallRecord& rec, const CallContext& call,
                          std::span<const Tensor> inputs, std::span<const Tensor> out) {
  int64_t io = 0;
  if (call.staticPlan) {
    io = planIoBytes(*call.staticPlan);
  } else {
    for (const Tensor& t : inputs) io = addOrFail(io, t.bytes(), "call inputs and outputs");
    for (const Tensor& t : out) io = addOrFail(io, t.bytes(), "call inputs and outputs");
  }
  const CachingAllocatorStats& pool = device_->memoryStats();
  // The most the pool held during the call (it only releases segments past its capacity), then
  // what it holds after.
  memory_.setOpByOpBytes(pool.peakBytesReserved);
  const int64_t peak = addOrFail(memory_.residentWith(0), io, "modeled device memory");
  memory_.notePeak(io);
  if (!memory_.fits(peak)) {
    const ModeledMemory m = memory_.snapshot();
    fail(ErrorKind::kMemory,
         "out of MODELED device memory: call {} ({}) needs {} at its peak -- weights {} + "
         "workspace {} (graph pool {}) + op-by-op pool {} + the call's inputs and outputs {} -- "
         "above the device's capacity of {} ({})",
         rec.iteration, rec.signature, formatBytes(peak), formatBytes(m.weightsBytes),
         formatBytes(m.workspaceBytes), graphPoolName(m.pool), formatBytes(m.opByOpBytes),
         formatBytes(io), formatBytes(m.capacityBytes), memoryCapacitySource(options_));
  }
  memory_.setOpByOpBytes(pool.bytesReserved);
}

// The MODELED device track: one event per call, its parts laid out inside it in order, on a
// clock of its own (modeled microseconds from 0), so it is never read as measured time.
void Session::traceModeled(const std::string& name, const std::string& detail,
                           const ModeledTime& m) {
  Timeline& tl = *options_.timeline;
  const int pid = timelinePid_ + 1;
  const std::string source = "MODELED by device profile " + options_.cost.name;
  tl.complete(
      pid, Timeline::kDeviceTid, name, "modeled", modeledClockUs_, m.total(),
      {{"shapes", detail}, {"modeled_us", fmt::format("{:.3f}", m.total())}, {"source", source}});
  double at = modeledClockUs_;
  auto part = [&](const char* label, double us) {
    if (us <= 0) return;
    tl.complete(pid, Timeline::kDeviceTid, label, "modeled_part", at, us,
                {{"modeled_us", fmt::format("{:.3f}", us)}});
    at += us;
  };
  part("compile", m.compileUs);
  part("host dynamic-shape work", m.hostDynamicUs);
  part("launch+sync+alloc", m.launchSyncUs);
  const double computeStart = at;
  part("compute", m.computeUs);
  // Padding waste is the tail of the compute time spent on padded elements.
  if (m.paddingWasteUs > 0)
    tl.complete(pid, Timeline::kDeviceTid, "padding waste", "modeled_part",
                computeStart + m.computeUs - m.paddingWasteUs, m.paddingWasteUs,
                {{"modeled_us", fmt::format("{:.3f}", m.paddingWasteUs)}});
  modeledClockUs_ += m.total();
}

void Session::prepare(const InputSignature& firstSeen) {
  if (prepared_) return;
  const double compileBefore = stats_.modeled.compileUs;
  const int64_t compilesBefore = stats_.graphCompiles;
  const auto start = Clock::now();
  inArena([&] { mode_->prepare(firstSeen); });
  stats_.startup.seconds = secondsSince(start);
  stats_.startup.graphCompiles = stats_.graphCompiles - compilesBefore;
  stats_.startup.modeledCompileUs = stats_.modeled.compileUs - compileBefore;
  prepared_ = true;
  // Up-front compiles (geared mode's gears) belong to no call: their own event on the track.
  if (options_.timeline && stats_.modeled.compileUs > compileBefore) {
    ModeledTime upFront;
    upFront.compileUs = stats_.modeled.compileUs - compileBefore;
    traceModeled("up-front compiles", mode_->upFrontSummary(), upFront);
  }
}

std::vector<std::string> Session::modeReportLines() const {
  return mode_->reportLines();
}

int64_t SessionStats::modeCounter(std::string_view name) const {
  for (const ModeCounter& c : modeCounters)
    if (c.name == name) return c.value;
  return 0;
}

const ModeField* findModeField(const std::vector<ModeField>& fields, std::string_view name) {
  for (const ModeField& f : fields)
    if (f.name == name) return &f;
  return nullptr;
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
        if (n.kind == OpKind::kGather && n.inputs[1] == v) {
          // Gather (an embedding's ids): the size of the gathered dim of the table.
          const Shape& s = sg.values[n.inputs[0]].type.shape;
          bound = std::min(
              bound, std::max<int64_t>(s[s.wrapDim(n.attrs.i(attr::Gather::axis), "axis")], 1));
          continue;
        }
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
