#pragma once
// Internal: the interface every execution mode implements (one file per mode in this folder,
// one row per mode in modes.def), ModeHost, what a mode may use of its Session, and
// CallContext, what one call records for the Session's counters and cost model.
//
// The Session keeps what every mode shares: input checks, counters, the cost accounting, the
// kernel and plan caches and the device. A mode decides what one call does: which plan, what
// to compile, how to launch. Everything a mode does that the Session counts or costs goes
// through ModeHost, which writes it into the call's CallContext (or, for up-front work, the
// session's counters); the Session reads the context back when the call is done. Nothing is
// written into the Session behind its back.

#include <any>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "executor/session.h"

namespace gearbox {

// What one call did, as the Session counts and costs it. Made by Session::run for each call,
// passed to the mode and through it to every ModeHost service, read back after the call.
struct CallContext {
  explicit CallContext(CallRecord& r) : rec(r) {}
  CallRecord& rec;                           // the record the reports see
  std::vector<std::string> kernelsCompiled;  // names of the kernels this call compiled
  // MODELED so far: compiles and the op-by-op path's host work and compute. The launches,
  // syncs and allocations are added from the device's counters after the call.
  ModeledTime modeled;
  // The kernels issued inside whole-graph launches (each costs graphLaunchPerNodeUs).
  int64_t graphLaunchKernels = 0;
  // A static plan this call ran as one launch (its kernels are costed at the plan's shapes);
  // for a call padded up to a gear, `paddedFrom` holds its real shapes (padding waste).
  const Plan* staticPlan = nullptr;
  std::optional<InputSignature> paddedFrom;
};

// One plan compiled up front (before any call): a gear, a capture.
struct UpFrontCompile {
  InputSignature signature;
  std::string reason;  // as PlanCompileOptions::reason
  uint64_t id = 0;     // the plan's id
  std::string track;   // the timeline track its compile is recorded on ("gear 0 compile")
};
struct UpFrontResult {
  std::vector<std::shared_ptr<Plan>> plans;  // per job; null where the compile failed
  std::vector<std::string> errors;           // per job: why it failed, empty when it did not
  size_t compiled = 0;                       // plans that compiled (counted as graph compiles)
};

// A Session's services for its mode. Lives as long as the Session. An interface: the Session
// implements it (executor/modes/mode_host.cpp) over its own state, and a test can implement it
// over anything.
class ModeHost {
 public:
  virtual ~ModeHost() = default;

  virtual const Graph& graph() const = 0;
  virtual const std::shared_ptr<const Graph>& sharedGraph() const = 0;
  virtual const SessionOptions& options() const = 0;
  // The counters every mode shares; a mode writes only its plan-cache hits and misses here
  // (memory goes through notePeakBytes, everything else through the host's own calls).
  virtual SessionStats& stats() = 0;
  // Device memory a mode holds itself at once (a padded call's buffers over its plan's arena):
  // raises peak_bytes, as the host's launches and arenas do for theirs.
  virtual void notePeakBytes(int64_t bytes) = 0;
  virtual KernelCache& kernels() = 0;
  virtual PlanCache& plans() = 0;
  // For pooled buffers a mode allocates itself (counted by the device as every allocation).
  virtual Device& device() = 0;
  // A measured span on the session's host track of the timeline; inert without one.
  virtual TimelineSpan span(const char* name, const char* cat) const = 0;

  // Compiles a plan for `sig` (static, or with dynamic dims), recording it in the call and the
  // counters as one graph compile.
  virtual std::shared_ptr<Plan> compile(const InputSignature& sig, const std::string& reason,
                                        CallContext& call) = 0;
  // Compiles `jobs` before any call, in parallel (one oneTBB task each), without arenas. Each
  // plan that compiles is one graph compile, costed (MODELED) as a run-time compile is; the
  // measured time of the whole batch is compile time. `what` names the batch on the timeline.
  virtual UpFrontResult compileUpFront(const std::vector<UpFrontCompile>& jobs,
                                       const char* what) = 0;
  // Arenas for plans of which one call runs one (the gears), by the session's graph pool
  // (SessionOptions::graphPool): shared -- one arena sized for the largest, one device
  // allocation; separate -- one arena per plan, one allocation each. Each plan's workspace
  // becomes resident in the MODELED device memory, in order; the first that, with its inputs
  // and outputs, does not fit the capacity is an Error(kMemory) naming its shapes (gears are
  // never evicted).
  virtual void bindSharedArena(std::span<const std::shared_ptr<Plan>> plans) = 0;
  // A gear compiled on first use (--gear-compile lazy; compile() gave it its own arena): its
  // workspace becomes resident in the MODELED device memory by the graph pool, as
  // bindSharedArena makes the up-front gears'; Error(kMemory) naming gear `gear` when it does
  // not fit.
  virtual void holdGear(const Plan& plan, size_t gear) = 0;
  // Puts a plan a call just compiled into the plan cache (static and auto mode). A static
  // plan's workspace becomes resident in the MODELED device memory, and what the cache evicts
  // past its capacity is freed; when it (with its inputs and outputs, which must exist while it
  // runs) does not fit the capacity, --on-oom evict first drops
  // least-recently-used cached plans, else (or when even that is not enough) Error(kMemory)
  // names `key`'s shapes, the bytes needed and the capacity.
  virtual void cachePlan(const InputSignature& key, std::shared_ptr<Plan> plan,
                         CallContext& call) = 0;
  // A workspace of `bytes` the mode holds for a compiled shape of its own (a capture's block
  // of intermediates), under plan id `id`: resident in the MODELED device memory by the graph
  // pool, never evicted; Error(kMemory) naming `sig` when it and the shape's `ioBytes` of inputs
  // and outputs do not fit. Returns the memory (null when `bytes` is 0 or the session is
  // model-only), one device allocation of the call.
  virtual std::shared_ptr<std::byte> holdWorkspace(uint64_t id, const InputSignature& sig,
                                                   int64_t bytes, int64_t ioBytes,
                                                   CallContext& call) = 0;
  // Host memory for a tensor a static plan writes whole (its outputs, or a padded call's
  // slice of one): from the session's output pool (executor/output_pool.h), contents
  // unspecified.
  virtual Tensor outputTensor(DType dtype, const Shape& shape) = 0;
  // A static plan: one whole-graph launch and one sync.
  virtual std::vector<Tensor> launchStatic(const Plan& plan, std::span<const Tensor> inputs,
                                           CallContext& call) = 0;
  // A static plan over views the mode prepared (a padded call: `paddedFrom` = the call's real
  // shapes): one whole-graph launch and one sync. `label` names it on the timeline (empty:
  // "run plan #N (one graph launch + sync)", formatted only when a timeline records it).
  virtual void launchStaticViews(const Plan& plan, std::span<const TensorView> in,
                                 std::span<const TensorView> out, const InputSignature* paddedFrom,
                                 const std::string& label, CallContext& call) = 0;
  // A whole-graph launch of `kernels` kernels that `body` runs on the device, and one sync
  // (a replayed capture). The mode charges the kernels' compute itself (chargeKernel). `label`
  // is called for the timeline's name only when a timeline records the launch.
  virtual void launchGraph(int64_t kernels, std::function<void()> body,
                           const std::function<std::string()>& label, CallContext& call) = 0;
  // MODELED: one kernel run at `key` (generic: the shape-generic efficiency).
  virtual void chargeKernel(const KernelKey& key, bool generic, CallContext& call) = 0;
  // Counts a graph the mode built itself (a capture) as one graph compile, as compile() counts
  // a plan: in the call's record (graphCompiled, planId, reason, `seconds` measured) and the
  // session's graphCompiles, with `modeledUs` of MODELED compile time. Returns its plan id.
  virtual uint64_t recordGraphCompile(const std::string& reason, double modeledUs, double seconds,
                                      CallContext& call) = 0;
  // Where the op-by-op path takes each node's kernel from.
  enum class OpKernels {
    kPlan,          // the step kernels of `plan` (a plan with dynamic dims)
    kEagerCompile,  // the kernel cache, compiling a new op shape (eager)
    kUncached,      // a shape-generic kernel made on the spot (fallback after the limit)
    kChooser,       // `choose` picks each node's kernel (a mode's own policy)
  };
  // Picks one node's kernel on the op-by-op path; `key` is the node's kernel key at its runtime
  // shapes. May compile (through kernels()); the host logs and costs what it compiled.
  using KernelChooser =
      std::function<std::shared_ptr<const KernelSpec>(NodeId, const KernelKey& key, int* compiled)>;
  // Observes every node the op-by-op path ran: its id, kernel, runtime key, argument views and
  // output view (a capture records them).
  using OpObserver =
      std::function<void(NodeId, const std::shared_ptr<const KernelSpec>&, const KernelKey&,
                         std::span<const TensorView>, const TensorView&)>;
  // Runs `g` op by op on the device: runtime shape inference, pooled intermediates, one launch
  // per op, a sync per op when `syncPerOp`.
  virtual std::vector<Tensor> runOpByOp(const Graph& g, const Plan* plan,
                                        std::span<const Tensor> inputs, bool syncPerOp,
                                        OpKernels kernels, CallContext& call,
                                        const KernelChooser& choose = {},
                                        const OpObserver& observe = {}) = 0;
  // The cost model's sync policy for the op-by-op path of dynamic plans and fallbacks.
  virtual bool syncPerOp() const = 0;

  // An option of the mode itself (SessionOptions::modeOptions), null when not given. A mode
  // reads its options in its constructor, so they are checked when the Session is built; the
  // session refuses an option its mode did not read (makeModeStrategy).
  const std::string* modeOption(const std::string& name) {
    const auto& all = options().modeOptions;
    const auto it = all.find(name);
    if (it == all.end()) return nullptr;
    taken_.insert(name);
    return &it->second;
  }
  const std::set<std::string>& takenModeOptions() const { return taken_; }
  // The mode's structured options (SessionOptions::modeConfig) when they are a T, else null;
  // like modeOption, reading them marks them taken. Options of another type are left untaken,
  // so the session refuses them (makeModeStrategy).
  template <typename T>
  const T* modeConfig() {
    const T* config = std::any_cast<T>(&options().modeConfig);
    if (config) configTaken_ = true;
    return config;
  }
  bool modeConfigTaken() const { return configTaken_; }

  // A plan-cache miss: describes it against `cached`, asks the recompile policy, and either
  // returns the description (the caller compiles; rec.guardFailures filled) or runs the call
  // through the fallback path into `fallbackOut` (rec.fallback set) and returns nullopt. Under
  // OnRecompileLimit::kError it throws. The same words for every mode.
  virtual std::optional<MissDescription> onMiss(std::vector<GuardedPlan> cached,
                                                const InputSignature& sig,
                                                std::span<const Tensor> inputs, CallContext& call,
                                                std::vector<Tensor>& fallbackOut) = 0;

 private:
  std::set<std::string> taken_;
  bool configTaken_ = false;
};

// One execution mode.
class ModeStrategy {
 public:
  virtual ~ModeStrategy() = default;
  // Up-front work before the first call (geared compiles every gear). `firstSeen` gives the
  // sizes of dims nothing else fixes; may be empty. run() calls it when nobody did.
  virtual void prepare(const InputSignature& firstSeen) { (void)firstSeen; }
  // Runs one call whose inputs the Session has checked (`sig` = their shapes).
  virtual std::vector<Tensor> run(std::span<const Tensor> inputs, const InputSignature& sig,
                                  CallContext& call) = 0;
  // Mode-specific lines for reports (geared: the GE options of its concrete graph).
  virtual std::vector<std::string> reportLines() const { return {}; }
  // The mode's own counters, by name, for SessionStats::modeCounters and the reports.
  virtual std::vector<ModeCounter> counters() const { return {}; }
  // What prepare() compiled up front, in words, for the timeline's "up-front compiles" event
  // (geared: "4 gears"); asked only when it compiled something.
  virtual std::string upFrontSummary() const { return {}; }
};

// A tensor of `dtype` and `shape` for a model-only call to return where no kernel writes: it
// aliases one zeroed buffer per thread (as large as the largest asked for so far), so a
// model-only call allocates nothing per call. Its contents are zeros until the next call.
Tensor unwrittenTensor(DType dtype, const Shape& shape);

// The factories named in modes.def, each defined in its mode's file.
#define GEARBOX_MODE(e, name, factory, needsGears, summary) \
  std::unique_ptr<ModeStrategy> factory(ModeHost& host);
#include "executor/modes/modes.def"
#undef GEARBOX_MODE

std::unique_ptr<ModeStrategy> makeModeStrategy(Mode mode, ModeHost& host);

// The parts of a Session its ModeHost serves from; the Session hands them over when it is
// built, so the host needs no access to the Session's privates.
struct SessionParts {
  const std::shared_ptr<const Graph>& graph;
  const SessionOptions& options;
  Device& device;
  KernelCache& kernels;
  PlanCache& plans;
  RecompilePolicy& recompilePolicy;
  SessionStats& stats;
  DeviceMemoryModel& memory;
  OutputPool& outputs;
  const int& timelinePid;
};
std::unique_ptr<ModeHost> makeSessionHost(SessionParts parts);

}  // namespace gearbox
