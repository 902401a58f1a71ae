// Every mode (static, eager, dynamic, auto, geared exact and padded) on every bundled model
// (transformer_block runs issue 24's ops: gather, softmax, layer_norm, gelu, trilu, ...),
// on both simulated devices, over the model's own trace plus random batch sizes (1, odd and
// repeated sizes included), against the reference executor on the unoptimised graph.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "driver/trace.h"
#include "executor/modes/geared.h"
#include "executor/session.h"
#include "graph/text.h"

namespace gearbox {
namespace {

struct Case {
  std::string model;
  Mode mode;
  DeviceKind device;
  bool pad = false;
};

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  std::string n = info.param.model + "_" + modeName(info.param.mode) +
                  (info.param.pad ? "_pad" : "") + "_" + deviceKindName(info.param.device);
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (const char* m :
       {"seed001_add", "four_ops", "shufflenet_unit", "shufflenet_stage", "shufflenet_body",
        "shufflenet_view", "seed002_masked_loss", "transformer_block"})
    for (DeviceKind d : {DeviceKind::kInline, DeviceKind::kStream}) {
      for (Mode mode : modes(ModeSet::kAll)) {
        cases.push_back({m, mode, d, false});
        // Modes with gears run once with exact gears and once with the pad fallback.
        if (modeInfo(mode).needsGears) cases.push_back({m, mode, d, true});
      }
    }
  return cases;
}

class EveryModeEveryModel : public ::testing::TestWithParam<Case> {};

// Replaces dim 0 of every input whose declared dim 0 is dynamic: the bundled models share their
// batch dim across inputs.
InputSignature withBatch(const Graph& g, InputSignature sig, int64_t batch) {
  for (size_t i = 0; i < sig.size(); ++i)
    if (sig[i].rank() > 0 && !isStaticDim(g.values[g.inputs[i]].type.shape[0])) sig[i][0] = batch;
  return sig;
}

TEST_P(EveryModeEveryModel, MatchesTheReferenceExecutor) {
  const Case& c = GetParam();
  const std::string base = std::string(GEARBOX_SOURCE_DIR) + "/examples/" + c.model;
  const Graph g = loadGraph(base + ".gbx");
  auto trace = cli::loadTrace(base + ".trace.jsonl", g);
  const InputSignature templ = trace.front();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int64_t> pick(1, 16);
  for (int k = 0; k < 8; ++k) trace.push_back(withBatch(g, templ, pick(rng)));

  SessionOptions o;
  o.mode = c.mode;
  o.device = c.device;
  if (modeInfo(c.mode).needsGears)
    gearOptions(o).fallback = c.pad ? GearFallback::kPad : GearFallback::kError;
  Session s(g, o);
  if (modeInfo(c.mode).needsGears) {
    // Gears on the batch dim: every size the trace uses when exact, a coarse ladder with pad.
    std::vector<int64_t> values;
    if (c.pad) {
      values = {2, 4, 8, 16};
    } else {
      for (const InputSignature& sig : trace)
        if (std::find(values.begin(), values.end(), sig[0][0]) == values.end())
          values.push_back(sig[0][0]);
    }
    for (ValueId v : g.inputs)
      if (!isStaticDim(g.values[v].type.shape[0]))
        set_dim_gears(s, g.values[v].name, {{0, values}});
    compileGears(s, templ);
  }
  for (size_t i = 0; i < trace.size(); ++i) {
    auto in = makeInputs(g, trace[i], 50 + i);
    auto out = s.run(in);
    auto ref = referenceRun(g, in);
    ASSERT_EQ(out.size(), ref.size());
    for (size_t k = 0; k < out.size(); ++k) {
      ASSERT_EQ(out[k].shape(), ref[k].shape()) << "iteration " << i;
      EXPECT_LE(maxAbsDiff(out[k], ref[k]), 1e-4) << "iteration " << i << " output " << k;
    }
  }
  EXPECT_EQ(s.stats().iterations, static_cast<int64_t>(trace.size()));
  if (c.pad) {
    EXPECT_GT(gearedCounters(s.stats()).paddedCalls, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Bundled, EveryModeEveryModel, ::testing::ValuesIn(allCases()), caseName);

}  // namespace
}  // namespace gearbox
