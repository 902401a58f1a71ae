// suggest-gears under a fallback (issue 25, item 4): with --gear-fallback dynamic, eager,
// pad+dynamic or pad+eager the calls no gear serves are charged what the geared run charges
// them, so a gear set can leave rare sizes to the fallback. Every prediction is checked against
// a model-only geared run of the same set: the same counters, the same MODELED total, compile,
// compute, padding waste and start-up, and the same MODELED memory peak.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "driver/gear_suggest.h"
#include "driver/trace.h"
#include "executor/modes/geared.h"
#include "executor/session.h"
#include "gears/gear_choice.h"
#include "graph/error.h"
#include "graph/text.h"
#include "test_models.h"

namespace gearbox {
namespace {

using testing_models::fourOps;

std::string example(const std::string& name) {
  return std::string(GEARBOX_SOURCE_DIR) + "/examples/" + name;
}

constexpr GearFallback kEveryFallback[] = {GearFallback::kPad,        GearFallback::kError,
                                           GearFallback::kDynamic,    GearFallback::kEager,
                                           GearFallback::kPadDynamic, GearFallback::kPadEager};

// Gears on input `input` dim 0, as --gears takes them.
std::string gearsJson(const std::string& input, const std::vector<std::vector<int64_t>>& gears) {
  std::string list;
  for (const auto& g : gears) list += (list.empty() ? "" : ", ") + std::to_string(g[0]);
  return "{\"" + input + "\": {\"0\": [" + list + "]}}";
}

// A model-only geared run of `json` over `trace` (zero inputs: model-only reads no data).
SessionStats runGeared(const Graph& g, const std::vector<InputSignature>& trace,
                       const std::string& json, GearFallback fallback,
                       GraphPool pool = GraphPool::kShared) {
  SessionOptions o;
  o.mode = Mode::kGeared;
  o.modelOnly = true;
  o.graphPool = pool;
  o.historyLimit = 8;
  gearOptions(o).json = json;
  gearOptions(o).fallback = fallback;
  Session session(g, o);
  std::map<std::vector<int64_t>, std::vector<Tensor>> inputs;
  for (const InputSignature& sig : trace) {
    std::vector<int64_t> key;
    for (const Shape& s : sig)
      for (int d = 0; d < s.rank(); ++d) key.push_back(s[d]);
    auto& in = inputs[key];
    if (in.empty())
      for (size_t i = 0; i < sig.size(); ++i)
        in.emplace_back(g.values[g.inputs[i]].type.dtype, sig[i]);
    session.run(in);
  }
  return session.stats();
}

// The prediction is the run, term by term.
void expectRunAsPredicted(const cli::GearCandidate& p, const SessionStats& st,
                          const std::string& what) {
  const double rel = 1e-9;
  EXPECT_EQ(st.graphCompiles, p.compiles) << what;
  EXPECT_EQ(gearedCounters(st).paddedCalls, p.paddedCalls) << what;
  EXPECT_EQ(gearedCounters(st).fallbackCalls, p.fallbackCalls) << what;
  EXPECT_NEAR(st.modeled.total(), p.totalUs(), rel * p.totalUs()) << what;
  EXPECT_NEAR(st.modeled.compileUs, p.compileUs, rel * p.compileUs + 1e-9) << what;
  EXPECT_NEAR(st.modeled.computeUs, p.computeUs, rel * p.computeUs) << what;
  EXPECT_NEAR(st.modeled.paddingWasteUs, p.paddingWasteUs, rel * p.paddingWasteUs + 1e-9) << what;
  EXPECT_NEAR(st.startup.modeledCompileUs, p.startupUs(), rel * p.startupUs()) << what;
  EXPECT_EQ(st.memory.peakBytes, p.memoryBytes) << what;
}

class ServingFallbacks : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    graph_ = new Graph(loadGraph(example("mlp.gbx")));
    const auto all = cli::loadTrace(example("mlp_serving.trace.jsonl"), *graph_);
    // The first 2,000 calls: every one of the 64 sizes, fast enough for the ASan suite.
    trace_ = new std::vector<InputSignature>(all.begin(), all.begin() + 2000);
  }
  static void TearDownTestSuite() {
    delete trace_;
    delete graph_;
  }
  static Graph* graph_;
  static std::vector<InputSignature>* trace_;
};
Graph* ServingFallbacks::graph_ = nullptr;
std::vector<InputSignature>* ServingFallbacks::trace_ = nullptr;

// The acceptance of item 4: for the chosen set, the predicted MODELED total (and memory,
// start-up and counters) is what a geared run of it with that fallback reports.
TEST_F(ServingFallbacks, TheSuggestionRunsAsPredictedWithEachFallback) {
  for (GearFallback f : kEveryFallback) {
    if (f == GearFallback::kError) continue;  // 64 sizes: 64 exact gears, tested below
    cli::SuggestOptions o;
    o.references = false;
    o.fallback = f;
    const cli::GearSuggestion s = cli::suggestGears(*graph_, *trace_, CostModel{}, o);
    const cli::GearCandidate& p = s.candidates[0];
    ASSERT_TRUE(p.allowed) << gearFallbackName(f) << ": " << p.note;
    EXPECT_EQ(s.fallback, f);
    expectRunAsPredicted(p, runGeared(*graph_, *trace_, s.gearsJson, f), gearFallbackName(f));
  }
}

// Every costed row, not only the suggestion, under the pad and both pad-then-fallback kinds:
// the powers of two leave nothing above 64; [1, 64] pads everything; the vLLM list covers all.
TEST_F(ServingFallbacks, EveryRowRunsAsPredicted) {
  for (GearFallback f : {GearFallback::kPadEager, GearFallback::kDynamic}) {
    cli::SuggestOptions o;
    o.references = false;
    o.fallback = f;
    o.pool = GraphPool::kSeparate;
    const cli::GearSuggestion s = cli::suggestGears(*graph_, *trace_, CostModel{}, o);
    for (const cli::GearCandidate& c : s.candidates) {
      if (c.gears.empty() || c.gears.size() > 100) continue;
      expectRunAsPredicted(
          c, runGeared(*graph_, *trace_, gearsJson("x", c.gears), f, GraphPool::kSeparate),
          std::string(gearFallbackName(f)) + " " + c.name);
    }
  }
}

// Random traces on four_ops (sizes 1..40, odd ones, size 1 specialised by the dynamic
// fallback, calls in random order so the device pool and the dynamic fallback's plans see
// every order), random gear sets, every fallback kind, both graph pools: the prediction is
// the run.
TEST(SuggestFallback, RandomSetsAndTracesRunAsPredicted) {
  const Graph g = fourOps();
  std::mt19937 rng(2025);
  std::uniform_int_distribution<int64_t> size(1, 40), calls(20, 60), gearCount(2, 6);
  for (int trial = 0; trial < 24; ++trial) {
    std::vector<InputSignature> trace;
    const int64_t n = calls(rng);
    for (int64_t i = 0; i < n; ++i) trace.push_back({Shape{size(rng), 4}, Shape{4, 3}});
    std::vector<std::vector<int64_t>> gears;
    const int64_t k = gearCount(rng);
    for (int64_t i = 0; i < k; ++i) gears.push_back({size(rng)});
    std::sort(gears.begin(), gears.end());
    gears.erase(std::unique(gears.begin(), gears.end()), gears.end());
    if (gears.size() < 2) continue;
    const GearFallback f = kEveryFallback[trial % 6];
    if (f == GearFallback::kError || f == GearFallback::kPad) {
      // Every size must be a gear (error) or below the largest (pad): make it so.
      if (f == GearFallback::kPad) gears.push_back({40});
      if (f == GearFallback::kError)
        for (const InputSignature& sig : trace) gears.push_back({sig[0][0]});
      std::sort(gears.begin(), gears.end());
      gears.erase(std::unique(gears.begin(), gears.end()), gears.end());
    }
    const GraphPool pool = trial % 4 < 2 ? GraphPool::kShared : GraphPool::kSeparate;
    const cli::GearCandidate p =
        cli::evaluateGearSets(g, trace, CostModel{}, {gears}, true, f, pool).front();
    ASSERT_TRUE(p.allowed) << p.note;
    expectRunAsPredicted(p, runGeared(g, trace, gearsJson("x", gears), f, pool),
                         "trial " + std::to_string(trial) + " " + gearFallbackName(f));
  }
}

// four_ops, 40 calls each of 2, 4 and 8 and `rare` calls of 64. Under pad+eager a size above
// the largest gear runs op by op, compiling its three kernels once and no graph: for 2 calls of
// 64 that beats a gear at 64 (a graph compile of 2,000 us + 20 us per node, MODELED, and three
// padded-from-nothing kernels); for 500 calls the op-by-op overhead per call loses to it.
std::vector<InputSignature> rareLargeTrace(int64_t rare) {
  std::vector<InputSignature> trace;
  for (int rep = 0; rep < 40; ++rep)
    for (int64_t b : {2, 4, 8}) trace.push_back({Shape{b, 4}, Shape{4, 3}});
  for (int64_t i = 0; i < rare; ++i) trace.push_back({Shape{64, 4}, Shape{4, 3}});
  return trace;
}

TEST(SuggestFallback, LeavingTheRareLargestSizeToEagerWins) {
  const Graph g = fourOps();
  const auto trace = rareLargeTrace(2);
  cli::SuggestOptions o;
  o.references = false;
  o.fallback = GearFallback::kPadEager;
  const cli::GearSuggestion s = cli::suggestGears(g, trace, CostModel{}, o);
  const cli::GearCandidate& p = s.candidates[0];
  EXPECT_EQ(p.gears, (std::vector<std::vector<int64_t>>{{2}, {4}, {8}}));
  EXPECT_EQ(p.fallbackCalls, 2);
  EXPECT_EQ(p.paddedCalls, 0);
  EXPECT_EQ(p.compiles, 3);  // the gears; eager compiles no graph
  expectRunAsPredicted(p, runGeared(g, trace, s.gearsJson, GearFallback::kPadEager), "win");
  // The set covering every size is the second row, and it costs more.
  ASSERT_GE(s.candidates.size(), 2u);
  const cli::GearCandidate& covering = s.candidates[1];
  EXPECT_EQ(covering.name, "covering every size");
  EXPECT_EQ(covering.gears.back(), std::vector<int64_t>{64});
  EXPECT_EQ(covering.fallbackCalls, 0);
  EXPECT_LT(p.totalUs(), covering.totalUs());
  // What the fallback saved: the gear's graph compile, less the eager calls' extra per-call
  // cost (both MODELED, from the run).
  const CostModel cost;
  EXPECT_GT(covering.totalUs() - p.totalUs(), 0.5 * cost.graphCompileBaseUs);
  // Its start-up is lower too: one gear fewer compiled up front.
  EXPECT_LT(p.startupUs(), covering.startupUs());
  EXPECT_GT(p.fallbackUs, 0);
}

TEST(SuggestFallback, LeavingAFrequentLargestSizeToEagerLoses) {
  const Graph g = fourOps();
  const auto trace = rareLargeTrace(500);
  cli::SuggestOptions o;
  o.references = false;
  o.fallback = GearFallback::kPadEager;
  const cli::GearSuggestion s = cli::suggestGears(g, trace, CostModel{}, o);
  const cli::GearCandidate& p = s.candidates[0];
  EXPECT_EQ(p.gears.back(), std::vector<int64_t>{64});  // a gear after all
  EXPECT_EQ(p.fallbackCalls, 0);
  EXPECT_EQ(p.fallbackUs, 0);
  // The same set pad would choose, at the same total.
  o.fallback = GearFallback::kPad;
  const cli::GearSuggestion pad = cli::suggestGears(g, trace, CostModel{}, o);
  EXPECT_EQ(p.gears, pad.candidates[0].gears);
  EXPECT_NEAR(p.totalUs(), pad.candidates[0].totalUs(), 1e-9 * p.totalUs());
  expectRunAsPredicted(p, runGeared(g, trace, s.gearsJson, GearFallback::kPadEager), "lose");
  // Every call of 64 through eager instead would cost more: the exact figure of that set.
  const cli::GearCandidate leave =
      cli::evaluateGearSets(g, trace, CostModel{}, {{{2}, {4}, {8}}}, true, GearFallback::kPadEager)
          .front();
  EXPECT_EQ(leave.fallbackCalls, 500);
  EXPECT_GT(leave.totalUs(), p.totalUs());
}

// dynamic and eager (no padding): the gears are exact sizes, every other size falls back; with
// one call of each of many sizes and many calls of two, the two frequent sizes are the gears.
TEST(SuggestFallback, WithoutPaddingTheFrequentSizesBecomeGears) {
  const Graph g = fourOps();
  std::vector<InputSignature> trace;
  for (int rep = 0; rep < 300; ++rep)
    for (int64_t b : {6, 12}) trace.push_back({Shape{b, 4}, Shape{4, 3}});
  for (int64_t b = 13; b < 23; ++b) trace.push_back({Shape{b, 4}, Shape{4, 3}});
  for (GearFallback f : {GearFallback::kDynamic, GearFallback::kEager}) {
    cli::SuggestOptions o;
    o.references = false;
    o.fallback = f;
    const cli::GearSuggestion s = cli::suggestGears(g, trace, CostModel{}, o);
    const cli::GearCandidate& p = s.candidates[0];
    EXPECT_EQ(p.gears, (std::vector<std::vector<int64_t>>{{6}, {12}})) << gearFallbackName(f);
    EXPECT_EQ(p.fallbackCalls, 10) << gearFallbackName(f);
    EXPECT_EQ(p.paddedCalls, 0) << gearFallbackName(f);
    EXPECT_EQ(p.compiles, f == GearFallback::kDynamic ? 3 : 2) << gearFallbackName(f);
    expectRunAsPredicted(p, runGeared(g, trace, s.gearsJson, f), gearFallbackName(f));
  }
}

// --gear-fallback error: every size a gear, and a set missing one is not allowed.
TEST(SuggestFallback, ErrorMakesEverySizeAGear) {
  const Graph g = fourOps();
  std::vector<InputSignature> trace;
  for (int64_t b : {3, 5, 3, 9, 5}) trace.push_back({Shape{b, 4}, Shape{4, 3}});
  cli::SuggestOptions o;
  o.references = false;
  o.fallback = GearFallback::kError;
  const cli::GearSuggestion s = cli::suggestGears(g, trace, CostModel{}, o);
  EXPECT_EQ(s.candidates[0].gears, (std::vector<std::vector<int64_t>>{{3}, {5}, {9}}));
  expectRunAsPredicted(s.candidates[0], runGeared(g, trace, s.gearsJson, GearFallback::kError),
                       "error");
  for (const cli::GearCandidate& c : s.candidates)
    if (c.name == "powers of two") {
      EXPECT_FALSE(c.allowed);
      EXPECT_NE(c.note.find("is not a gear (--gear-fallback error)"), std::string::npos) << c.note;
    }
}

// Under a start-up budget that rules out every covering set, pad+eager still fits: the gears
// cover the frequent sizes and the largest is left to the fallback; pad has nothing.
TEST(SuggestFallback, AStartupBudgetLeavesTheLargestSizeToTheFallback) {
  const Graph g = fourOps();
  const auto trace = rareLargeTrace(100);
  cli::SuggestOptions o;
  o.references = false;
  o.fallback = GearFallback::kPad;
  const cli::GearSuggestion pad = cli::suggestGears(g, trace, CostModel{}, o);
  ASSERT_EQ(pad.candidates[0].gears.back(), std::vector<int64_t>{64});
  // Room for two gears' compiles, not three: pad's best fit keeps 64 and pads 2, 4, 8 to it.
  const cli::GearCandidate two =
      cli::evaluateGearSets(g, trace, CostModel{}, {{{8}, {64}}}, true, GearFallback::kPad).front();
  o.maxStartupUs = two.startupUs();
  o.fallback = GearFallback::kPadEager;
  const cli::GearSuggestion s = cli::suggestGears(g, trace, CostModel{}, o);
  const cli::GearCandidate& p = s.candidates[0];
  EXPECT_LE(p.startupUs(), o.maxStartupUs);
  EXPECT_TRUE(p.allowed);
  expectRunAsPredicted(p, runGeared(g, trace, s.gearsJson, GearFallback::kPadEager), "budget");
}

TEST(SuggestFallback, PadThenFallbackOnAGraphThatRefusesPaddingIsAClearError) {
  const Graph g = loadGraph(example("seed002_masked_loss.gbx"));
  const auto trace = cli::loadTrace(example("seed002_masked_loss.trace.jsonl"), g);
  cli::SuggestOptions o;
  o.references = false;
  o.fallback = GearFallback::kPadDynamic;
  try {
    cli::suggestGears(g, trace, CostModel{}, o);
    ADD_FAILURE() << "expected Error(kGear)";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kGear);
    EXPECT_NE(std::string(e.what()).find("--gear-fallback pad+dynamic pads"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gearbox
