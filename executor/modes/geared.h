#pragma once
// Geared mode (TorchAir set_dim_gears). Every gear is a static plan compiled up front (or, with
// --gear-compile lazy, on its first use); a call runs the gear its shapes match exactly (an
// O(1) hash lookup). A call that is not a gear fails, or -- by --gear-fallback -- pads up to
// the smallest gear that covers it (inputs zero-padded, outputs sliced back), runs op by op
// with one plan with dynamic dims compiled on the first such call (dynamic), or runs op by op
// through the kernel cache (eager).
//
// Everything about gears is the mode's own, here: its options (gear_options.h, carried in
// SessionOptions::modeConfig), its counters (SessionStats::modeCounters: gears, padded_calls,
// real_elements, padded_elements; fallback_calls with a dynamic or eager fallback,
// gears_compiled_on_first_use with lazy gears), its per-call fields (CallRecord::modeFields) and
// the set_dim_gears API, free functions over Session::modeStrategy(). The Session has no gear
// members and no gear methods.

#include <optional>
#include <string>

#include "executor/modes/gear_options.h"
#include "executor/modes/mode_strategy.h"

namespace gearbox {

// TorchAir's spelling: set_dim_gears(session, "x1", {{0, {2, 4}}}). Validates one input's
// gears now, as TorchAir does; Error(kConfig) when the session's mode is not geared.
void set_dim_gears(Session& s, const std::string& input, const DimGearList& gears);
// Session::prepare() of a geared session: builds the gear list and compiles every gear to a
// static plan up front, in parallel (one oneTBB task per gear; lazy gears: none). Error(kConfig)
// in another mode.
void compileGears(Session& s, const InputSignature& firstSeen = {});
// The session's gears; null before they are compiled and outside geared mode.
const GearSet* gearSet(const Session& s);
// The option strings TorchAir's concrete-graph log prints, in its order; empty before the gears
// are compiled and outside geared mode.
std::vector<std::string> gearOptionLines(const Session& s);

// One geared call, read back from its record's mode fields.
struct GearedCall {
  int gear = -1;        // the gear that ran; -1 for a fallback call and a call of another mode
  bool padded = false;  // inputs were padded up to the gear
  int64_t realElements = 0, paddedElements = 0;  // input elements before/after padding
  std::string fallback;  // "dynamic" or "eager" for a call that took that fallback, else ""
};
GearedCall gearedCall(const CallRecord& r);

// The geared mode's counters, read back from SessionStats::modeCounters (0 in another mode).
struct GearedCounters {
  // Gears that can run: compiled up front, or every gear of the set with lazy gears.
  int64_t gears = 0;
  int64_t paddedCalls = 0;                       // calls padded up to a gear
  int64_t realElements = 0, paddedElements = 0;  // over the padded calls
  int64_t fallbackCalls = 0;                     // calls that took the dynamic or eager fallback
  int64_t gearsCompiledOnFirstUse = 0;  // lazy gears compiled so far, each in its first call
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
  // Builds the gear list and compiles every gear to a static plan, one oneTBB task per gear
  // (lazy gears: builds the list, and the padding analysis of the pad fallback, only).
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
  // Gear `gear`'s plan; a lazy gear compiles in this call (one graph compile, through the
  // host). Error(kGear) `verb` naming the shapes when the gear cannot be compiled.
  const Plan& gearPlan(size_t gear, const InputSignature& sig, const char* verb, CallContext& call);
  // A call that is not a gear, under --gear-fallback dynamic or eager.
  std::vector<Tensor> runFallback(std::span<const Tensor> inputs, const InputSignature& sig,
                                  CallContext& call);
  // Writes the call's gear fields into its record (report, run log and timeline); gear -1 with
  // `fallback` for a fallback call.
  void recordCall(CallContext& call, int gear, bool padded, int64_t real, int64_t paddedElems,
                  const char* fallback = nullptr);
  ModeHost& host_;
  GearOptions options_;  // SessionOptions::modeConfig, or the defaults
  GearConfig config_;
  std::optional<GearSet> set_;
  std::vector<std::shared_ptr<Plan>> plans_;  // one per gear; null for an invalid gear
  std::vector<std::string> invalid_;          // per gear: why it could not compile
  std::optional<PaddingPlan> padding_;        // with the pad fallback
  // The dynamic fallback: its plans, oldest first (one, unless a call's dynamic dims are 0 or
  // 1, which are specialised as dynamic mode specialises them), and the dims it leaves dynamic
  // (every dim the model declares dynamic, as dynamic mode).
  std::vector<std::shared_ptr<Plan>> fallbackPlans_;
  DynamicDimPolicy fallbackDims_;
  // The counters (counters()).
  int64_t gears_ = 0, paddedCalls_ = 0, realElements_ = 0, paddedElements_ = 0;
  int64_t fallbackCalls_ = 0, lazyCompiles_ = 0;
};

}  // namespace gearbox
