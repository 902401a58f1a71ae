// The mode seam (executor/modes/mode_strategy.h), exercised by a throwaway mode defined in
// this file and handed to a Session through SessionOptions::strategy: no row, no change to
// Session or the tools. Its option, counter and per-call field reach the stats and the JSON
// report by name; its launches, syncs, compiles and MODELED cost are counted by the session
// from the device and the CallContext, as for every mode.
#include <gtest/gtest.h>

#include "driver/run_options.h"
#include "executor/modes/mode_strategy.h"
#include "graph/error.h"
#include "test_models.h"

namespace gearbox {
namespace {

using testing_models::seed001;
using testing_models::seed001Sig;

// Runs every call op by op with a per-op sync and the eager op's shape-generic kernels, and
// counts its calls; option `label` goes into each call's record.
class ThrowawayMode final : public ModeStrategy {
 public:
  explicit ThrowawayMode(ModeHost& host) : host_(host) {
    if (const std::string* l = host.modeOption("label")) label_ = *l;
  }
  std::vector<Tensor> run(std::span<const Tensor> inputs, const InputSignature&,
                          CallContext& call) override {
    ++calls_;
    call.rec.modeFields.emplace_back("label", label_);
    return host_.runOpByOp(host_.graph(), nullptr, inputs, /*syncPerOp=*/true,
                           ModeHost::OpKernels::kChooser, call,
                           [this](NodeId, const KernelKey& key, int* compiled) {
                             KernelKey generic = key;
                             for (TensorType& t : generic.inputs)
                               for (int d = 0; d < t.shape.rank(); ++d) t.shape[d] = kAnyDim;
                             return host_.kernels().get(generic, compiled);
                           },
                           {});
  }
  std::vector<ModeCounter> counters() const override { return {{"calls", calls_}}; }

 private:
  ModeHost& host_;
  std::string label_ = "none";
  int64_t calls_ = 0;
};

SessionOptions throwaway() {
  SessionOptions o;
  o.mode = Mode::kEager;  // names the session in reports; the strategy is the one below
  o.strategy = [](ModeHost& host) { return std::make_unique<ThrowawayMode>(host); };
  return o;
}

TEST(ModeSeam, AThrowawayModeIsCountedCostedAndReportedLikeEveryMode) {
  SessionOptions o = throwaway();
  o.modeOptions["label"] = "mine";
  Session s(seed001(), o);
  for (int64_t n : {2, 3, 2}) {
    const auto in = makeInputs(s.graph(), seed001Sig(n), static_cast<uint64_t>(n));
    EXPECT_TRUE(s.run(in).at(0).equals(referenceRun(s.graph(), in).at(0)));
  }
  const SessionStats& st = s.stats();
  // One Add per call: a launch and a sync each; one generic kernel for every size.
  EXPECT_EQ(st.launches, 3);
  EXPECT_EQ(st.syncs, 3);
  EXPECT_EQ(st.kernelCompiles, 1);
  EXPECT_EQ(s.history()[0].kernelsCompiled.size(), 1u);
  EXPECT_TRUE(s.history()[1].kernelsCompiled.empty());
  // MODELED from the CallContext: the kernel compile, then per call the op-by-op host work.
  const CostModel& c = s.options().cost;
  EXPECT_GT(s.history()[0].modeled.compileUs, 0);
  EXPECT_EQ(s.history()[1].modeled.compileUs, 0);
  EXPECT_DOUBLE_EQ(s.history()[1].modeled.hostDynamicUs, c.hostShapeInferenceUs + c.hostTilingUs);
  ASSERT_EQ(st.modeCounters.size(), 1u);
  EXPECT_EQ(st.modeCounters[0], (ModeCounter{"calls", 3}));
  EXPECT_EQ(s.history()[2].modeFields[0].value, "mine");
  // The report writer knows neither name.
  const auto j = cli::reportJson(s, "m.gbx", "t.jsonl");
  EXPECT_EQ(j["mode_counters"]["calls"], 3);
  EXPECT_EQ(j["per_iteration"][0]["mode_fields"]["label"], "mine");
  EXPECT_EQ(j["config"]["mode_options"]["label"], "mine");
}

TEST(ModeSeam, AnOptionTheModeDoesNotReadIsRefusedWhenTheSessionIsBuilt) {
  SessionOptions o = throwaway();
  o.modeOptions["colour"] = "red";
  EXPECT_THROW(Session(seed001(), o), Error);
}

}  // namespace
}  // namespace gearbox
