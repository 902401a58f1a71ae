#pragma once
// Session: one graph, one execution mode, its caches and counters.
//
//   Session s(graph, options);
//   std::vector<Tensor> out = s.run(inputs);   // inputs in graph input order
//   const SessionStats& st = s.stats();         // exact, deterministic counters
//
// Modes (docs/modes.md; the table is executor/modes/modes.def, one file per mode beside it):
//   static  - a plan per input signature (torch.compile dynamic=False, a GE static graph);
//             a call is one whole-graph launch + one sync;
//   eager   - no graph: every op is dispatched on its own, its kernel compiled the first time
//             each (op, dtype, shapes, attrs) is seen (seed 000); one launch per op;
//   dynamic - one compile with dynamic dims symbolic and shape-generic kernels; every call
//             infers shapes, allocates intermediates from a pool, launches each op and syncs
//             per the cost model's policy (seed 001);
//   auto    - automatic dynamic: static first; a miss caused by changed dims recompiles with
//             those dims dynamic (torch.compile's default);
//   geared  - set_dim_gears: every gear a static plan compiled up front (gears/); its options,
//             counters and set_dim_gears are its own (executor/modes/geared.h);
//   reduce-overhead - the first call of each signature runs op by op and is captured; later
//             calls replay the capture as one launch (aclgraph / CUDA graphs, seed 003).

#include <any>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/compiler.h"
#include "compiler/passes.h"
#include "compiler/recompile_policy.h"
#include "executor/cost_model.h"
#include "executor/device.h"
#include "executor/device_memory.h"
#include "executor/modes/mode_table.h"
#include "executor/output_pool.h"
#include "executor/timeline.h"

namespace gearbox {

class ModeHost;
struct CallContext;
class ModeStrategy;

struct CallRecord;

// Where the reports print a counter or per-call field of a mode's own.
enum class ModeReportPlace {
  kModeSection,  // under "mode_counters" / "mode_fields": where a new mode's belong
  kTopLevel,     // as a key of its own in the report or the iteration: geared mode's, whose
                 // keys predate the mode sections (docs/report-schema.json keeps them). The
                 // report writes only the counters the schema names, so a new mode must not use it
  kRunLog,       // fields only: the run log's words for what the call ran ("gear 1 (plan #2)")
  kTimeline,     // fields only: an argument of the call's timeline event, not in the report
};

// A counter of a mode's own (ModeStrategy::counters), by name.
struct ModeCounter {
  std::string name;
  int64_t value = 0;
  ModeReportPlace place = ModeReportPlace::kModeSection;
  bool operator==(const ModeCounter&) const = default;
};

// A field of a mode's own in one CallRecord, by name. The value is kept as text, with its kind,
// so a report can write it with its JSON type ("gear": 1, "padded": true).
struct ModeField {
  enum class Kind { kText, kInt, kBool };
  ModeField() = default;
  ModeField(std::string n, std::string v, Kind k = Kind::kText,
            ModeReportPlace p = ModeReportPlace::kModeSection)
      : name(std::move(n)), value(std::move(v)), kind(k), place(p) {}
  std::string name;
  std::string value;
  Kind kind = Kind::kText;
  ModeReportPlace place = ModeReportPlace::kModeSection;
};
// The field `name` of a record, or null.
const ModeField* findModeField(const std::vector<ModeField>& fields, std::string_view name);

struct SessionOptions {
  Mode mode = Mode::kStatic;
  DeviceKind device = DeviceKind::kInline;
  CostModel cost;
  size_t kernelCacheCapacity = 1024;  // as oneDNN's primitive cache
  size_t planCacheCapacity = 64;
  int recompileLimit = 8;  // as Dynamo's recompile_limit
  OnRecompileLimit onRecompileLimit = OnRecompileLimit::kFallback;
  // Dynamo's accumulated_recompile_limit, fitted to one graph: every compile of the session
  // (plans + kernels); 0 = none (compiler/recompile_policy.h says why).
  int64_t accumulatedRecompileLimit = 0;
  DimMarks dynamicDims;  // mark_dynamic
  DimMarks staticDims;   // mark_static
  // Persistent kernel_meta directories and precompiled bundles consulted before compiling,
  // and observers of every kernel compile (--record-op-info).
  std::vector<std::shared_ptr<KernelStore>> kernelStores;
  std::vector<KernelCompileHook> compileHooks;
  // Runs the default pass pipeline (compiler/passes.h) once on the graph before any mode
  // compiles it, so every mode sees the optimized graph; false keeps the graph as given.
  bool runPasses = true;
  // Passes of the default pipeline left out by name (--disable-pass; every occurrence of a
  // name); an unknown name is Error(kConfig) when the session is built.
  std::vector<std::string> disabledPasses;
  // Options of the mode itself, by name (reduce-overhead: capture_limit). The mode reads the
  // ones it takes when the session is built; one it does not take is an Error(kConfig).
  std::map<std::string, std::string> modeOptions;
  // The mode's own structured options, for options that are not name=value strings (geared:
  // GearOptions, set through gearOptions() in executor/modes/gear_options.h). The mode reads
  // and checks them when the session is built; a mode that takes none refuses them, as it
  // refuses an unknown modeOptions name, so options meant for another mode never go unnoticed.
  std::any modeConfig;
  // A strategy made by the caller instead of the table's factory for `mode` (a test's
  // throwaway mode, docs/adding-a-mode.md); `mode` then only names the session in reports.
  std::function<std::unique_ptr<ModeStrategy>(ModeHost&)> strategy;
  // MODELED device memory (executor/device_memory.h): how compiled shapes' workspaces share
  // memory, the capacity (0: the device profile's, CostModel::memoryCapacityBytes) and what a
  // compiled shape that does not fit does: Error(kMemory), or evict least-recently-used cached
  // plans (static, auto; gears and captures are never evicted).
  GraphPool graphPool = GraphPool::kShared;
  int64_t deviceMemoryBytes = 0;
  OnOom onOom = OnOom::kError;
  // Model only: launches are counted but kernels are not executed, so a long trace can be
  // costed quickly. Counters and MODELED figures are exact (they do not depend on data);
  // outputs are meaningless and measured times are not kernel times.
  bool modelOnly = false;
  // Flat memory over long runs: keep only the last `historyLimit` CallRecords in history()
  // (0 = keep every call, the default). Trimming drops the oldest half at once, so a run
  // holds between historyLimit and 2 x historyLimit records and each call stays O(1)
  // amortised. `onCall`, when set, sees every record as it is made (streaming reports).
  size_t historyLimit = 0;
  std::function<void(const CallRecord&)> onCall;
  // Records measured host events and the MODELED device track of every call into this
  // timeline (executor/timeline.h), under processes named after `timelineLabel` (default: the
  // mode's name). Owned by the caller; must outlive the session. Null: nothing is recorded
  // and each traced point costs one pointer check.
  Timeline* timeline = nullptr;
  std::string timelineLabel;
  // Thread cap (--threads): at most this many threads run the session's work -- its calls, its
  // compiles and geared mode's up-front compiles run in a oneTBB arena of this concurrency --
  // and every kernel is compiled for it (KernelKey::threads: a kernel's thread split never
  // exceeds it, and its name says so). 0 (the default) is no cap: oneTBB's default arena, every
  // core, as before. In [0, kMaxThreads]. The peers are compared at equal caps with it
  // (bench/peers/, docs/performance.md).
  int threads = 0;
  // Host memory of the outputs static plans return (static, auto and geared calls), kept
  // between calls up to this many bytes of free buffers (executor/output_pool.h: exact rounded
  // sizes, least recently freed evicted first); 0 allocates every call's outputs afresh.
  size_t outputPoolBytes = OutputPool::kDefaultCapacity;
};

// What one call did.
struct CallRecord {
  int iteration = 0;
  std::string signature;  // "x1=[2, 2], x2=[2, 2]"
  bool graphCompiled = false;
  uint64_t planId = 0;                     // 0 when no plan (eager, fallback)
  std::string reason;                      // plan compile reason ("first call", guard failures)
  std::vector<std::string> guardFailures;  // every failed guard against every cached plan
  std::vector<PlanGuardFailure> guardFailureDetails;  // the same, structured
  InputSignature shapes;                              // the call's input shapes
  std::vector<std::string> kernelsCompiled;           // kernel names compiled during this call
  bool fallback = false;  // ran through the dynamic path after the recompile limit
  int64_t launches = 0, syncs = 0, allocations = 0;
  // The mode's own fields of this call, in the mode's order, as the reports print them
  // (reduce-overhead: "capture" = captured, replayed or eager; geared: the gear that ran and
  // its padding, executor/modes/geared.h).
  std::vector<ModeField> modeFields;
  double compileSeconds = 0;    // measured host time spent compiling
  double runSeconds = 0;        // measured host time of the call minus compiling
  double modeledDeviceUs = 0;   // MODELED device time (cost model) = modeled.total()
  double modeledCompileUs = 0;  // MODELED: kernel and graph compiles (= modeled.compileUs)
  ModeledTime modeled;          // MODELED, split by kind (docs/cost-model.md)
};

// Start-up against the first call: what prepare() did before any call (geared mode's gears
// compiled up front; nothing in the other modes) and what the first call then cost, so a user
// sees the trade of compiling up front or on first use (--gear-compile, docs/gears.md).
struct StartupStats {
  int64_t graphCompiles = 0;      // plans compiled up front
  double seconds = 0;             // measured wall time of prepare()
  double modeledCompileUs = 0;    // MODELED compile cost of the plans compiled up front
  double firstCallSeconds = 0;    // measured compile + run time of the first call
  double firstCallModeledUs = 0;  // MODELED device time of the first call
};

struct SessionStats {
  Mode mode = Mode::kStatic;
  int64_t iterations = 0;
  int64_t graphCompiles = 0;
  int64_t kernelCompiles = 0;
  int64_t kernelStoreHits = 0;  // loaded from kernel_meta / a bundle instead of compiled
  int64_t planCacheHits = 0;
  int64_t planCacheMisses = 0;
  int64_t kernelCacheHits = 0;
  int64_t kernelCacheMisses = 0;
  int64_t launches = 0;
  int64_t syncs = 0;
  int64_t allocations = 0;
  int64_t fallbackRuns = 0;
  // Largest plan arena (static/geared, plus a padded call's buffers) or the most device memory
  // the caching allocator held at once (eager, dynamic, fallback runs: whole segments, so a
  // multiple of 2 MiB; executor/caching_allocator.h). What the simulated device held; the
  // MODELED device memory of every term is `memory`.
  int64_t peakBytes = 0;
  ModeledMemory memory;         // MODELED (executor/device_memory.h)
  double compileSeconds = 0;    // measured
  double runSeconds = 0;        // measured, every call's run (history() may hold only the last)
  double modeledDeviceUs = 0;   // MODELED, compile + run
  double modeledCompileUs = 0;  // MODELED, the compile part
  ModeledTime modeled;          // MODELED, split by kind; includes geared up-front compiles
  StartupStats startup;         // prepare() and the first call (both also counted above)
  CacheStats kernelCache, planCache;
  OutputPoolStats outputPool;  // host buffers of static plans' outputs (measured side only)
  std::vector<std::string> passesFired;  // passes that changed the graph, in run order
  // The mode's own counters (ModeStrategy::counters), in the mode's order (reduce-overhead's
  // captures, geared's gears and padded calls).
  std::vector<ModeCounter> modeCounters;
  // The mode's counter `name`; 0 when the mode keeps none of that name.
  int64_t modeCounter(std::string_view name) const;
};

class Session {
 public:
  Session(Graph graph, SessionOptions options = {});
  ~Session();

  // Runs one call. Throws Error for inputs that do not fit the graph (naming input and dim),
  // for a shape outside the gears, and for the recompile limit under kError.
  std::vector<Tensor> run(std::span<const Tensor> inputs);

  const SessionStats& stats() const;
  // The calls so far, oldest first; with SessionOptions::historyLimit only the most recent
  // ones (historyDropped() says how many older ones were let go).
  const std::vector<CallRecord>& history() const { return history_; }
  int64_t historyDropped() const { return historyDropped_; }
  // The graph every mode runs: the optimized one when options.runPasses is set.
  const Graph& graph() const { return *graph_; }
  const PassReport& passReport() const { return passReport_; }
  const SessionOptions& options() const { return options_; }
  KernelCache& kernelCache() { return kernels_; }
  Device& device() { return *device_; }

  // Up-front work of the mode before the first call: geared compiles every gear (non-geared
  // dynamic dims take their sizes from `firstSeen`, in graph input order); the other modes
  // have none. run() calls it on the first call when nobody did.
  void prepare(const InputSignature& firstSeen = {});

  // The mode itself (executor/modes/mode_strategy.h), for a mode's own API: the geared
  // mode's set_dim_gears and gear set are free functions in executor/modes/geared.h over it.
  ModeStrategy& modeStrategy() { return *mode_; }
  const ModeStrategy& modeStrategy() const { return *mode_; }
  // Lines of the mode's own for reports, in its order (geared: the GE options of its
  // concrete graph); empty for a mode that has none.
  std::vector<std::string> modeReportLines() const;

 private:
  // Shared with every plan compiled from it, so a plan never copies the graph.
  std::shared_ptr<const Graph> graph_;
  SessionOptions options_;
  PassReport passReport_;
  std::unique_ptr<Device> device_;
  KernelCache kernels_;
  PlanCache plans_;
  RecompilePolicy recompilePolicy_;
  DeviceMemoryModel memory_;  // MODELED device memory, fed by the host (mode_host.cpp)
  OutputPool outputs_;        // host memory of static plans' outputs
  // The MODELED device time of the call that just ran, from what the mode recorded in its
  // CallContext (executor/modes/mode_strategy.h); computed in run(), after the timing.
  void modelCall(CallRecord& rec, const CallContext& call, const DeviceCounters& before,
                 const DeviceCounters& after);
  void modelMemory(const CallRecord& rec, const CallContext& call, std::span<const Tensor> inputs,
                   std::span<const Tensor> out);
  // The timeline's host pid for this session (0 without a timeline; the device pid is +1) and
  // the MODELED device clock the calls are laid end to end on.
  int timelinePid_ = 0;
  double modeledClockUs_ = 0;
  void traceModeled(const std::string& name, const std::string& detail, const ModeledTime& m);
  std::vector<CallRecord> history_;
  int64_t historyDropped_ = 0;
  mutable SessionStats stats_;
  // The mode reaches the parts above through host_ (made from them when the session is built).
  std::unique_ptr<ModeHost> host_;
  std::unique_ptr<ModeStrategy> mode_;  // executor/modes/<mode>.cpp
  bool prepared_ = false;
  // The oneTBB arena of options.threads (null without a cap); defined in session.cpp, so this
  // header pulls in no oneTBB header.
  struct Arena;
  std::unique_ptr<Arena> arena_;
  template <class F>
  void inArena(const F& f);
};

// Reference executor: runs the graph with the reference kernels, inferring shapes per call.
// The oracle of every differential test.
std::vector<Tensor> referenceRun(const Graph& g, std::span<const Tensor> inputs);

// Deterministic pseudo-random inputs for a signature (the CLI's trace data). Index-typed
// graph inputs get values in range for the graph where possible (docs/trace.md).
std::vector<Tensor> makeInputs(const Graph& g, const InputSignature& sig, uint64_t seed);

}  // namespace gearbox
