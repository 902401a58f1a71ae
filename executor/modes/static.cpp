// Static mode (torch.compile dynamic=False, a GE static graph): a plan per input signature in
// the plan cache; a miss compiles one (within the recompile limit), a call is one whole-graph
// launch and one sync.
#include "executor/modes/mode_strategy.h"

namespace gearbox {

namespace {

class StaticMode final : public ModeStrategy {
 public:
  explicit StaticMode(ModeHost& host) : host_(host) {}

  std::vector<Tensor> run(std::span<const Tensor> inputs, const InputSignature& sig,
                          CallContext& call) override {
    TimelineSpan lookup = host_.span("plan lookup", "lookup");
    auto hit = host_.plans().get(sig);
    lookup.arg("result", hit ? "hit" : "miss");
    lookup.end();
    if (hit) {
      host_.stats().planCacheHits++;
      return host_.launchStatic(**hit, inputs, call);
    }
    host_.stats().planCacheMisses++;
    std::vector<GuardedPlan> cached;
    host_.plans().forEach([&](const InputSignature& k, const std::shared_ptr<Plan>& p) {
      cached.push_back({p->id, k});
    });
    std::vector<Tensor> out;
    const auto miss = host_.onMiss(std::move(cached), sig, inputs, call, out);
    if (!miss) return out;  // ran through the fallback path
    auto plan = host_.compile(sig, miss->reason, call);
    host_.cachePlan(sig, plan, call);
    return host_.launchStatic(*plan, inputs, call);
  }

 private:
  ModeHost& host_;
};

}  // namespace

std::unique_ptr<ModeStrategy> makeStaticMode(ModeHost& host) {
  return std::make_unique<StaticMode>(host);
}

}  // namespace gearbox
