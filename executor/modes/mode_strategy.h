#pragma once
// Internal: the interface every execution mode implements (one file per mode in this folder,
// one row per mode in modes.def), and ModeHost, what a mode may use of its Session.
//
// The Session keeps what every mode shares: input checks, counters, the cost accounting, the
// kernel and plan caches and the device. A mode decides what one call does: which plan, what
// to compile, how to launch.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "executor/session.h"

namespace gearbox {

// A Session's services for its mode. Holds a reference; lives as long as the Session.
class ModeHost {
 public:
  explicit ModeHost(Session& s) : s_(s) {}

  const Graph& graph() const { return *s_.graph_; }
  const std::shared_ptr<const Graph>& sharedGraph() const { return s_.graph_; }
  const SessionOptions& options() const { return s_.options_; }
  SessionStats& stats() { return s_.stats_; }
  KernelCache& kernels() { return s_.kernels_; }
  PlanCache& plans() { return s_.plans_; }
  Device& device() { return *s_.device_; }
  // A measured span on the session's host track of the timeline; inert without one.
  TimelineSpan span(const char* name, const char* cat) const {
    return TimelineSpan(s_.options_.timeline, s_.timelinePid_, name, cat);
  }
  Timeline* timeline() const { return s_.options_.timeline; }
  int timelinePid() const { return s_.timelinePid_; }

  // Compiles a plan for `sig` (static, or with dynamic dims), recording it in `rec` and the
  // counters as one graph compile.
  std::shared_ptr<Plan> compile(const InputSignature& sig, const std::string& reason,
                                CallRecord& rec);
  // A static plan: one whole-graph launch and one sync.
  std::vector<Tensor> launchStatic(const Plan& plan, std::span<const Tensor> inputs,
                                   CallRecord& rec);
  // Where the op-by-op path takes each node's kernel from.
  enum class OpKernels {
    kPlan,          // the step kernels of `plan` (a plan with dynamic dims)
    kEagerCompile,  // the kernel cache, compiling a new op shape (eager)
    kUncached,      // a shape-generic kernel made on the spot (fallback after the limit)
  };
  // Runs `g` op by op on the device: runtime shape inference, pooled intermediates, one launch
  // per op, a sync per op when `syncPerOp`.
  std::vector<Tensor> runOpByOp(const Graph& g, const Plan* plan, std::span<const Tensor> inputs,
                                bool syncPerOp, OpKernels kernels, CallRecord& rec);
  // Records, for the MODELED device time (Session::modelCall), that this call ran `plan` as
  // one whole-graph launch; for a call padded up to a gear, `paddedFrom` is its real shapes.
  void recordStaticRun(const Plan& plan, const InputSignature* paddedFrom = nullptr);
  // The cost model's sync policy for the op-by-op path of dynamic plans and fallbacks.
  bool syncPerOp() const;

  // A plan-cache miss: describes it against `cached`, asks the recompile policy, and either
  // returns the description (the caller compiles; rec.guardFailures filled) or runs the call
  // through the fallback path into `fallbackOut` (rec.fallback set) and returns nullopt. Under
  // OnRecompileLimit::kError it throws. The same words for every mode.
  std::optional<MissDescription> onMiss(std::vector<GuardedPlan> cached, const InputSignature& sig,
                                        std::span<const Tensor> inputs, CallRecord& rec,
                                        std::vector<Tensor>& fallbackOut);

 private:
  Session& s_;
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
                                  CallRecord& rec) = 0;
  // Mode-specific lines for reports (geared: the GE options of its concrete graph).
  virtual std::vector<std::string> reportLines() const { return {}; }
};

// The factories named in modes.def, each defined in its mode's file.
#define GEARBOX_MODE(e, name, factory, needsGears, summary) \
  std::unique_ptr<ModeStrategy> factory(ModeHost& host);
#include "executor/modes/modes.def"
#undef GEARBOX_MODE

std::unique_ptr<ModeStrategy> makeModeStrategy(Mode mode, ModeHost& host);

}  // namespace gearbox
