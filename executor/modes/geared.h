#pragma once
// Geared mode (TorchAir set_dim_gears). Every gear is a static plan compiled up front; a call
// runs the gear its shapes match exactly (an O(1) hash lookup), or -- with the pad fallback --
// the smallest gear that covers it, with inputs zero-padded and outputs sliced back.
//
// Everything about gears is the mode's own, here: its options (gear_options.h, carried in
// SessionOptions::modeConfig), its counters (SessionStats::modeCounters: gears, padded_calls,
// real_elements, padded_elements), its per-call fields (CallRecord::modeFields) and the
// set_dim_gears API, free functions over Session::modeStrategy(). The Session has no gear
// members and no gear methods.

#include <optional>

#include "executor/modes/gear_options.h"
#include "executor/modes/mode_strategy.h"

namespace gearbox {

// TorchAir's spelling: set_dim_gears(session, "x1", {{0, {2, 4}}}). Validates one input's
// gears now, as TorchAir does; Error(kConfig) when the session's mode is not geared.
void set_dim_gears(Session& s, const std::string& input, const DimGearList& gears);
// Session::prepare() of a geared session: builds the gear list and compiles every gear to a
// static plan up front, in parallel (one oneTBB task per gear). Error(kConfig) in another mode.
void compileGears(Session& s, const InputSignature& firstSeen = {});
// The session's gears; null before they are compiled and outside geared mode.
const GearSet* gearSet(const Session& s);
// The option strings TorchAir's concrete-graph log prints, in its order; empty before the gears
// are compiled and outside geared mode.
std::vector<std::string> gearOptionLines(const Session& s);

// One geared call, read back from its record's mode fields.
struct GearedCall {
  int gear = -1;                                 // the gear that ran; -1 for a call of another mode
  bool padded = false;                           // inputs were padded up to the gear
  int64_t realElements = 0, paddedElements = 0;  // input elements before/after padding
};
GearedCall gearedCall(const CallRecord& r);

// The geared mode's counters, read back from SessionStats::modeCounters (0 in another mode).
struct GearedCounters {
  int64_t gears = 0;                             // gears compiled up front
  int64_t paddedCalls = 0;                       // calls padded up to a gear
  int64_t realElements = 0, paddedElements = 0;  // over the padded calls
  // Padding waste over the padded calls: (padded - real) / real elements, 0 without any.
  double paddingWaste() const {
    return realElements ? static_cast<double>(paddedElements - realElements) /
                              static_cast<double>(realElements)
                        : 0.0;
  }
};
GearedCounters gearedCounters(const SessionStats& st);

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
  std::vector<ModeCounter> counters() const override;
  std::string upFrontSummary() const override;
  const GearSet* gearSet() const;

 private:
  // --gear-fallback pad, or the fixed-shape policy (--pad-to), which pads every call.
  bool padAllowed() const;
  // Writes the call's gear fields into its record (report, run log and timeline).
  void recordCall(CallContext& call, size_t gear, bool padded, int64_t real, int64_t paddedElems);
  ModeHost& host_;
  GearOptions options_;  // SessionOptions::modeConfig, or the defaults
  GearConfig config_;
  std::optional<GearSet> set_;
  std::vector<std::shared_ptr<Plan>> plans_;  // one per gear; null for an invalid gear
  std::vector<std::string> invalid_;          // per gear: why it could not compile
  std::optional<PaddingPlan> padding_;        // with the pad fallback
  // The counters (counters()).
  int64_t gears_ = 0, paddedCalls_ = 0, realElements_ = 0, paddedElements_ = 0;
};

}  // namespace gearbox
