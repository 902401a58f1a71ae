#include "executor/modes/compiled_mode.h"

namespace gearbox {

CompiledMode::CompiledMode(ModeHost& host, DynamicDimPolicy::Start start)
    : host_(host), dims_(start, host.options().dynamicDims, host.options().staticDims) {}

std::vector<Tensor> CompiledMode::run(std::span<const Tensor> inputs, const InputSignature& sig,
                                      CallContext& call) {
  SessionStats& stats = host_.stats();
  TimelineSpan lookup = host_.span("plan lookup", "lookup");
  auto hit = host_.plans().get(sig);
  if (hit) {
    lookup.arg("result", "hit (static plan)");
    lookup.end();
    stats.planCacheHits++;
    return host_.launchStatic(**hit, inputs, call);
  }
  for (const auto& p : dynamicPlans_) {
    if (signatureAccepts(p->signature, sig)) {
      lookup.arg("result", "hit (dynamic plan)");
      lookup.end();
      stats.planCacheHits++;
      call.rec.planId = p->id;
      return host_.runOpByOp(*p->graph, p.get(), inputs, host_.syncPerOp(),
                             ModeHost::OpKernels::kPlan, call);
    }
  }
  lookup.arg("result", "miss");
  lookup.end();
  stats.planCacheMisses++;
  const bool first = stats.graphCompiles == 0;
  std::vector<GuardedPlan> cached;
  host_.plans().forEach([&](const InputSignature& k, const std::shared_ptr<Plan>& p) {
    cached.push_back({p->id, k});
  });
  for (const auto& p : dynamicPlans_) cached.push_back({p->id, p->signature});
  // The policy sees every miss, also those the limit then sends to the fallback path.
  dims_.observeMiss(sig);
  std::vector<Tensor> out;
  const auto miss = host_.onMiss(std::move(cached), sig, inputs, call, out);
  if (!miss) return out;
  const InputSignature target = dims_.target(host_.graph(), sig);
  auto plan = host_.compile(target, dims_.compileReason(miss->reason, first, target), call);
  if (plan->isStatic) {
    host_.cachePlan(target, plan, call);
    return host_.launchStatic(*plan, inputs, call);
  }
  dynamicPlans_.push_back(plan);
  return host_.runOpByOp(*plan->graph, plan.get(), inputs, host_.syncPerOp(),
                         ModeHost::OpKernels::kPlan, call);
}

}  // namespace gearbox
