// The services a Session gives its mode (executor/modes/mode_strategy.h): compiling plans,
// launching them, the op-by-op path and the recompile policy on a miss.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "compiler/compile_log.h"
#include "executor/kernels.h"
#include "executor/modes/mode_strategy.h"
#include "executor/plan_runner.h"
#include "graph/error.h"

namespace gearbox {

using Clock = std::chrono::steady_clock;
static double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::unique_ptr<ModeStrategy> makeModeStrategy(Mode mode, ModeHost& host) {
  switch (mode) {
#define GEARBOX_MODE(e, name, factory, needsGears, summary) \
  case Mode::k##e:                                          \
    return factory(host);
#include "executor/modes/modes.def"
#undef GEARBOX_MODE
  }
  fail(ErrorKind::kConfig, "unknown mode {}", static_cast<int>(mode));
}

std::shared_ptr<Plan> ModeHost::compile(const InputSignature& sig, const std::string& reason,
                                        CallRecord& rec) {
  TimelineSpan span = this->span("graph compile", "graph_compile");
  const auto start = Clock::now();
  PlanCompileOptions options{reason};
  options.id = s_.nextPlanId_++;
  // Model only: no kernel runs, so the arena is counted but not materialised.
  options.allocateArena = !s_.options_.modelOnly;
  auto plan = compilePlan(s_.graph_, sig, s_.kernels_, options);
  rec.compileSeconds += secondsSince(start);
  if (span.on()) {
    span.setName(fmt::format("compile plan #{}", plan->id));
    span.arg("reason", reason);
    span.arg("kernels_compiled", std::to_string(plan->kernelsCompiled));
    span.end();
  }
  for (const PlanStep& step : plan->steps) {
    if (!step.compiled) continue;
    s_.kernelLog_.push_back(step.kernel->name);
    s_.callModel_.compileUs += s_.options_.cost.kernelCompile(step.kernel->key);
  }
  s_.callModel_.compileUs += s_.options_.cost.graphCompile(plan->graph->nodes.size());
  rec.graphCompiled = true;
  rec.planId = plan->id;
  rec.reason = reason;
  s_.stats_.graphCompiles++;
  if (plan->isStatic) {
    // A static plan's arena is one device allocation made at compile time.
    if (plan->arenaBytes > 0) rec.allocations++;
    s_.stats_.peakBytes = std::max(s_.stats_.peakBytes, plan->arenaBytes);
  }
  return plan;
}

std::vector<Tensor> ModeHost::launchStatic(const Plan& plan, std::span<const Tensor> inputs,
                                           CallRecord& rec) {
  rec.planId = plan.id;
  recordStaticRun(plan);
  std::vector<Tensor> out = allocateOutputs(plan);
  std::vector<TensorView> in(inputs.size()), ov(out.size());
  for (size_t i = 0; i < inputs.size(); ++i) in[i] = inputs[i].view();
  for (size_t i = 0; i < out.size(); ++i) ov[i] = out[i].view();
  TimelineSpan span = this->span("run", "run");
  if (span.on()) span.setName(fmt::format("run plan #{} (one graph launch + sync)", plan.id));
  // One whole-graph launch and one sync: the static plan is issued to the device at once.
  s_.device_->launch([&] { runStaticPlan(plan, in, ov); }, /*graph=*/true);
  s_.device_->sync();
  return out;
}

void ModeHost::recordStaticRun(const Plan& plan, const InputSignature* paddedFrom) {
  s_.staticPlanRun_ = &plan;
  if (paddedFrom) s_.paddedFrom_ = *paddedFrom;
  s_.graphLaunchKernels_ += static_cast<int64_t>(plan.steps.size());
}

bool ModeHost::syncPerOp() const {
  return s_.options_.cost.syncPolicy == SyncPolicy::kPerOp;
}

std::optional<MissDescription> ModeHost::onMiss(std::vector<GuardedPlan> cached,
                                                const InputSignature& sig,
                                                std::span<const Tensor> inputs, CallRecord& rec,
                                                std::vector<Tensor>& fallbackOut) {
  MissDescription miss =
      describeMiss(*s_.graph_, std::move(cached), sig, s_.stats_.graphCompiles == 0);
  rec.guardFailures = miss.guardFailures;
  rec.guardFailureDetails = miss.failures;
  const MissDecision d = s_.recompilePolicy_.onMiss(s_.stats_.graphCompiles, miss);
  if (d.action == MissAction::kCompile) return miss;
  if (!d.warning.empty()) compileLogger()->warn("{}", d.warning);
  rec.fallback = true;
  rec.reason = miss.reason;
  fallbackOut = runOpByOp(*s_.graph_, nullptr, inputs, syncPerOp(), OpKernels::kUncached, rec);
  return std::nullopt;
}

std::vector<Tensor> ModeHost::runOpByOp(const Graph& g, const Plan* plan,
                                        std::span<const Tensor> inputs, bool syncPerOp,
                                        OpKernels kernels, CallRecord& rec) {
  (void)rec;  // counters come from the device; the kernels compiled go to the session's log
  TimelineSpan span =
      this->span(kernels == OpKernels::kUncached ? "fallback run op by op" : "run op by op", "run");
  Device& device = *s_.device_;
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
        ov.data = device.allocate(bytes[node.output]);
      }
      views[node.output] = ov;
      std::shared_ptr<const KernelSpec> spec;
      // MODELED: every op on this path pays host shape inference; a shape-generic kernel
      // also pays host tiling and runs at the generic efficiency, at the runtime shapes.
      KernelKey runKey = makeKernelKey(node.kind, types, node.attrs);
      // Reshape: the target as inferred against the graph (it may name dims by symbol).
      if (node.kind == OpKind::kReshape) resolveReshapeTarget(runKey, outType.shape);
      if (kernels == OpKernels::kPlan) {
        spec = plan->steps[step].kernel;
      } else if (kernels == OpKernels::kEagerCompile) {
        int compiled = 0;
        spec = s_.kernels_.get(runKey, &compiled);
        if (compiled) {
          s_.kernelLog_.push_back(spec->name);
          s_.callModel_.compileUs += s_.options_.cost.kernelCompile(spec->key);
        }
      } else {
        // Fallback after the recompile limit: a shape-generic kernel made on the spot, not
        // cached and not counted as a compile (Dynamo's run-only mode runs unspecialised).
        std::vector<TensorType> generic = types;
        for (auto& t : generic)
          for (int d = 0; d < t.shape.rank(); ++d) t.shape[d] = kAnyDim;
        spec = compileKernelSpec(makeKernelKey(node.kind, generic, node.attrs));
      }
      const CostModel& cost = s_.options_.cost;
      s_.callModel_.hostDynamicUs +=
          cost.hostShapeInferenceUs + (spec->generic ? cost.hostTilingUs : 0.0);
      s_.callModel_.computeUs += cost.kernelRun(runKey, spec->generic);
      ++step;
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
