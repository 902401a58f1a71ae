// suggest-gears under a fallback (issue 25, item 4): with --gear-fallback dynamic, eager,
// pad+dynamic or pad+eager the calls no gear serves are charged what the geared run charges
// them, so a gear set can leave rare sizes to the fallback. Every prediction is checked against
// a model-only geared run of the same set: the same counters, the same MODELED total, compile,
// compute, padding waste and start-up, and the same MODELED memory peak.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "driver/gear_suggest.h"
#include "driver/trace.h"
#include "executor/modes/geared.h"
#include "executor/session.h"
#include "gears/gear_choice.h"
#include "graph/error.h"
#include "graph/graph.h"
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
                       GraphPool pool = GraphPool::kShared, const CostModel& cost = {}) {
  SessionOptions o;
  o.cost = cost;
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
    CostModel cost;
    if (trial % 3 == 2) cost.syncPolicy = SyncPolicy::kEndOnly;
    const cli::GearCandidate p =
        cli::evaluateGearSets(g, trace, cost, {gears}, true, f, pool).front();
    ASSERT_TRUE(p.allowed) << p.note;
    expectRunAsPredicted(p, runGeared(g, trace, gearsJson("x", gears), f, pool, cost),
                         "trial " + std::to_string(trial) + " " + gearFallbackName(f));
  }
}

// The eager fallback over hundreds of sizes: three kernels per size overflow the kernel
// cache's 16-entry shards, so a size that comes back after its kernels were evicted compiles
// them again. The prediction replays the cache and counts those recompiles as the run does.
TEST(SuggestFallback, EagerRecompilesWhatTheKernelCacheEvictedAsTheRunDoes) {
  const Graph g = fourOps();
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> size(9, 400);
  std::vector<InputSignature> trace;
  for (int i = 0; i < 1500; ++i) trace.push_back({Shape{size(rng), 4}, Shape{4, 3}});
  const std::vector<std::vector<int64_t>> gears = {{2}, {4}, {8}};
  const cli::GearCandidate p =
      cli::evaluateGearSets(g, trace, CostModel{}, {gears}, true, GearFallback::kEager).front();
  const SessionStats st = runGeared(g, trace, gearsJson("x", gears), GearFallback::kEager);
  std::set<int64_t> sizes;
  for (const InputSignature& sig : trace) sizes.insert(sig[0][0]);
  EXPECT_GT(st.kernelCompiles, static_cast<int64_t>(9 + 3 * sizes.size()));  // recompiles
  EXPECT_GT(st.kernelCache.evictions, 0);
  expectRunAsPredicted(p, st, "eager over many sizes");
}

// The MLP (examples/mlp.gbx), 200 calls each of batch 8 and 512, then `rare` calls of 4096.
// Padding 8 up to 512 costs 64 times the compute on every call, so both are gears whatever
// the fallback. Under pad+eager a size above the largest gear runs op by op, compiling its two
// kernels (the same ones a gear at 4096 compiles) but no graph: for 2 calls of 4096 that beats
// a third gear by its graph compile (2,000 us + 20 us per node, MODELED) less the eager calls'
// per-op launches and host work; for 500 calls those lose to it.
std::vector<InputSignature> rareLargeTrace(const Graph& g, int64_t rare) {
  InputSignature base;
  for (ValueId v : g.inputs) base.push_back(g.values[v].type.shape);
  std::vector<InputSignature> trace;
  for (int rep = 0; rep < 200; ++rep)
    for (int64_t b : {8, 512}) {
      trace.push_back(base);
      trace.back()[0][0] = b;
    }
  for (int64_t i = 0; i < rare; ++i) {
    trace.push_back(base);
    trace.back()[0][0] = 4096;
  }
  return trace;
}

TEST(SuggestFallback, LeavingTheRareLargestSizeToEagerWins) {
  const Graph g = loadGraph(example("mlp.gbx"));
  const auto trace = rareLargeTrace(g, 2);
  cli::SuggestOptions o;
  o.references = false;
  o.fallback = GearFallback::kPadEager;
  const cli::GearSuggestion s = cli::suggestGears(g, trace, CostModel{}, o);
  const cli::GearCandidate& p = s.candidates[0];
  EXPECT_EQ(p.gears, (std::vector<std::vector<int64_t>>{{8}, {512}}));
  EXPECT_EQ(p.fallbackCalls, 2);
  EXPECT_EQ(p.paddedCalls, 0);
  EXPECT_EQ(p.compiles, 2);  // the gears; eager compiles no graph
  expectRunAsPredicted(p, runGeared(g, trace, s.gearsJson, GearFallback::kPadEager), "win");
  // The best set covering every size (what --gear-fallback pad chooses) is the second row.
  ASSERT_GE(s.candidates.size(), 2u);
  const cli::GearCandidate& covering = s.candidates[1];
  EXPECT_EQ(covering.name, "covering every size");
  EXPECT_EQ(covering.gears, (std::vector<std::vector<int64_t>>{{8}, {512}, {4096}}));
  EXPECT_EQ(covering.fallbackCalls, 0);
  EXPECT_LT(p.totalUs(), covering.totalUs());
  // The same kernels compile either way; what leaving 4096 to eager saves is the third gear's
  // graph compile, less the two eager calls' extra launches, syncs and host work.
  const size_t nodes = Session(g, SessionOptions{}).graph().nodes.size();  // after the passes
  EXPECT_NEAR(covering.compileUs - p.compileUs, CostModel{}.graphCompile(nodes),
              1e-9 * covering.compileUs);
  EXPECT_GT(p.runUs, covering.runUs);
  // One gear fewer compiles up front, and the eager calls' intermediates take device pool
  // segments a gear's arena would not: a Pareto trade of start-up and total for memory.
  EXPECT_LT(p.startupUs(), covering.startupUs());
  EXPECT_GT(p.memoryBytes, covering.memoryBytes);
  EXPECT_TRUE(p.pareto && covering.pareto);
  EXPECT_GT(p.fallbackUs, 0);
}

TEST(SuggestFallback, LeavingAFrequentLargestSizeToEagerLoses) {
  const Graph g = loadGraph(example("mlp.gbx"));
  const auto trace = rareLargeTrace(g, 500);
  cli::SuggestOptions o;
  o.references = false;
  o.fallback = GearFallback::kPadEager;
  const cli::GearSuggestion s = cli::suggestGears(g, trace, CostModel{}, o);
  const cli::GearCandidate& p = s.candidates[0];
  EXPECT_EQ(p.gears, (std::vector<std::vector<int64_t>>{{8}, {512}, {4096}}));
  EXPECT_EQ(p.fallbackCalls, 0);
  EXPECT_EQ(p.fallbackUs, 0);
  // The set pad chooses, at the same total.
  o.fallback = GearFallback::kPad;
  const cli::GearSuggestion pad = cli::suggestGears(g, trace, CostModel{}, o);
  EXPECT_EQ(p.gears, pad.candidates[0].gears);
  EXPECT_NEAR(p.totalUs(), pad.candidates[0].totalUs(), 1e-9 * p.totalUs());
  expectRunAsPredicted(p, runGeared(g, trace, s.gearsJson, GearFallback::kPadEager), "lose");
  // Leaving the 500 calls of 4096 to eager instead: exact figures of that set, and dearer.
  const cli::GearCandidate leave =
      cli::evaluateGearSets(g, trace, CostModel{}, {{{8}, {512}}}, true, GearFallback::kPadEager)
          .front();
  EXPECT_EQ(leave.fallbackCalls, 500);
  EXPECT_GT(leave.totalUs(), p.totalUs());
  expectRunAsPredicted(
      leave, runGeared(g, trace, gearsJson("x", {{8}, {512}}), GearFallback::kPadEager), "leave");
}

// pad+dynamic: seven rare sizes from 1024 to 4096, one call each. Covering them takes a gear
// at 4096 and pads the other six up to it; the dynamic fallback runs them all on one plan
// with dynamic dims at their own sizes, which wins.
TEST(SuggestFallback, RareLargeSizesShareTheDynamicFallbacksOnePlan) {
  const Graph g = loadGraph(example("mlp.gbx"));
  auto trace = rareLargeTrace(g, 0);
  for (int64_t b = 1024; b <= 4096; b += 512) {
    trace.push_back(trace.front());
    trace.back()[0][0] = b;
  }
  cli::SuggestOptions o;
  o.references = false;
  o.fallback = GearFallback::kPadDynamic;
  const cli::GearSuggestion s = cli::suggestGears(g, trace, CostModel{}, o);
  const cli::GearCandidate& p = s.candidates[0];
  EXPECT_EQ(p.gears, (std::vector<std::vector<int64_t>>{{8}, {512}}));
  EXPECT_EQ(p.fallbackCalls, 7);
  EXPECT_EQ(p.compiles, 2 + 1);  // the gears and the one dynamic plan
  expectRunAsPredicted(p, runGeared(g, trace, s.gearsJson, GearFallback::kPadDynamic), "dyn");
  const cli::GearCandidate& covering = s.candidates[1];
  EXPECT_EQ(covering.name, "covering every size");
  EXPECT_EQ(covering.paddedCalls, 6);
  EXPECT_LT(p.totalUs(), covering.totalUs());
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

// A start-up budget below the three gears pad needs: pad's best fit within it pads 8 up to
// 512 on 200 calls; pad+eager keeps 8 and 512 and leaves 4096 to eager, and is cheaper.
TEST(SuggestFallback, AStartupBudgetLeavesTheLargestSizeToTheFallback) {
  const Graph g = loadGraph(example("mlp.gbx"));
  const auto trace = rareLargeTrace(g, 2);
  cli::SuggestOptions o;
  o.references = false;
  o.fallback = GearFallback::kPad;
  const cli::GearCandidate three = cli::suggestGears(g, trace, CostModel{}, o).candidates[0];
  ASSERT_EQ(three.gears.size(), 3u);
  o.maxStartupUs = three.startupUs() - 1;
  const cli::GearCandidate pad = cli::suggestGears(g, trace, CostModel{}, o).candidates[0];
  EXPECT_EQ(pad.gears.size(), 2u);
  EXPECT_EQ(pad.gears.back(), std::vector<int64_t>{4096});
  o.fallback = GearFallback::kPadEager;
  const cli::GearSuggestion s = cli::suggestGears(g, trace, CostModel{}, o);
  const cli::GearCandidate& p = s.candidates[0];
  EXPECT_TRUE(p.allowed);
  EXPECT_LE(p.startupUs(), o.maxStartupUs);
  EXPECT_EQ(p.gears, (std::vector<std::vector<int64_t>>{{8}, {512}}));
  EXPECT_LT(p.totalUs(), pad.totalUs());
  expectRunAsPredicted(p, runGeared(g, trace, s.gearsJson, GearFallback::kPadEager), "budget");
}

TEST(SuggestFallback, PadThenFallbackOnAGraphThatRefusesPaddingIsAClearError) {
  // A cat along the varying dim: padded rows would land between real ones.
  GraphBuilder b("cat_rows");
  auto x = b.input("x", DType::kF32, {symbolDim("B"), 4});
  auto y = b.input("y", DType::kF32, {4, 4});
  b.output(b.cat({x, y}, 0, "c"));
  const Graph g = b.build();
  std::vector<InputSignature> trace;
  for (int64_t n : {3, 5, 3, 9}) trace.push_back({Shape{n, 4}, Shape{4, 4}});
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
  // dynamic pads nothing, so it runs there; its suggestion is exactly what a run reports.
  o.fallback = GearFallback::kDynamic;
  const cli::GearSuggestion s = cli::suggestGears(g, trace, CostModel{}, o);
  expectRunAsPredicted(s.candidates[0], runGeared(g, trace, s.gearsJson, GearFallback::kDynamic),
                       "no padding");
}

}  // namespace
}  // namespace gearbox
