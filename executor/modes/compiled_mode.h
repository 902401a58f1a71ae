#pragma once
// Internal: what dynamic and auto mode share. Exact static plans are looked up first (by
// hash), then the plans with dynamic dims; a miss compiles a plan for the signature the
// DynamicDimPolicy chooses. A static plan runs as one launch; a plan with dynamic dims runs op
// by op with shape-generic kernels, syncing per the cost model's policy.

#include "executor/modes/mode_strategy.h"

namespace gearbox {

class CompiledMode : public ModeStrategy {
 public:
  CompiledMode(ModeHost& host, DynamicDimPolicy::Start start);
  std::vector<Tensor> run(std::span<const Tensor> inputs, const InputSignature& sig,
                          CallContext& call) override;

 private:
  ModeHost& host_;
  DynamicDimPolicy dims_;
  std::vector<std::shared_ptr<Plan>> dynamicPlans_;  // plans with dynamic dims, oldest first
};

}  // namespace gearbox
