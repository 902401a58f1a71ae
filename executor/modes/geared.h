#pragma once
// Internal: geared mode (TorchAir set_dim_gears). Every gear is a static plan compiled up
// front; a call runs the gear its shapes match exactly (an O(1) hash lookup), or -- with the
// pad fallback -- the smallest gear that covers it, with inputs zero-padded and outputs sliced
// back. Declared here because Session forwards its set_dim_gears API to it.

#include <optional>

#include "executor/modes/mode_strategy.h"

namespace gearbox {

class GearedMode final : public ModeStrategy {
 public:
  explicit GearedMode(ModeHost& host);
  // Validates one input's gears now, as TorchAir's set_dim_gears does.
  void setDimGears(const std::string& input, const DimGearList& gears);
  // Builds the gear list and compiles every gear to a static plan, one oneTBB task per gear.
  void prepare(const InputSignature& firstSeen) override;
  std::vector<Tensor> run(std::span<const Tensor> inputs, const InputSignature& sig,
                          CallContext& call) override;
  // The GE options of the compiled gears; empty before prepare().
  std::vector<std::string> reportLines() const override;
  const GearSet* gearSet() const;

 private:
  // --gear-fallback pad, or the fixed-shape policy (--pad-to), which pads every call.
  bool padAllowed() const;
  ModeHost& host_;
  GearConfig config_;
  std::optional<GearSet> set_;
  std::vector<std::shared_ptr<Plan>> plans_;  // one per gear; null for an invalid gear
  std::vector<std::string> invalid_;          // per gear: why it could not compile
  std::optional<PaddingPlan> padding_;        // with the pad fallback
};

}  // namespace gearbox
