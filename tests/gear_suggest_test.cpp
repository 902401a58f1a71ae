// Choosing gears (issue 14): the exact DP against exhaustive search, suggest-gears on the
// bundled serving trace against every listed candidate and against a real geared run, seed 001,
// and gears that follow shared symbols.
#include "driver/gear_suggest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "driver/trace.h"
#include "executor/modes/geared.h"
#include "executor/session.h"
#include "gears/gear_choice.h"
#include "graph/error.h"
#include "graph/text.h"
#include "test_models.h"

namespace gearbox {
namespace {

std::string example(const std::string& name) {
  return std::string(GEARBOX_SOURCE_DIR) + "/examples/" + name;
}

// Random problem with n sizes; callUs grows with the size unless `monotone` is false.
GearChoiceProblem randomProblem(std::mt19937& rng, size_t n, bool monotone) {
  GearChoiceProblem p;
  std::uniform_int_distribution<int64_t> step(1, 9), count(1, 60);
  std::uniform_real_distribution<double> compile(50, 5000), call(0.5, 40);
  int64_t size = 0;
  double c = 1;
  for (size_t i = 0; i < n; ++i) {
    size += step(rng);
    p.sizes.push_back(size);
    p.counts.push_back(count(rng));
    p.compileUs.push_back(compile(rng));
    c = monotone ? c + call(rng) : call(rng);
    p.callUs.push_back(c);
  }
  return p;
}

// A problem from its four per-size lists (no fallback).
GearChoiceProblem problem(std::vector<int64_t> sizes, std::vector<int64_t> counts,
                          std::vector<double> compileUs, std::vector<double> callUs) {
  GearChoiceProblem p;
  p.sizes = std::move(sizes);
  p.counts = std::move(counts);
  p.compileUs = std::move(compileUs);
  p.callUs = std::move(callUs);
  return p;
}

TEST(GearChoice, DynamicProgrammeEqualsExhaustiveSearchOnRandomTraces) {
  std::mt19937 rng(14);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = 2 + trial % 11;  // 2..12 sizes
    const bool monotone = trial % 3 != 0;
    const GearChoiceProblem p = randomProblem(rng, n, monotone);
    const size_t maxGears = 2 + static_cast<size_t>(trial) % (n - 1);
    const GearChoice dp = chooseGears(p, 2, maxGears);
    const GearChoice ex = chooseGearsExhaustive(p, 2, maxGears);
    ASSERT_NEAR(dp.totalUs, ex.totalUs, 1e-9 * ex.totalUs) << "trial " << trial;
    EXPECT_EQ(dp.totalUs, gearChoiceCost(p, dp.gears));
    EXPECT_GE(dp.gears.size(), 2u);
    EXPECT_LE(dp.gears.size(), maxGears);
    EXPECT_EQ(dp.gears.back(), n - 1);
  }
}

TEST(GearChoice, LargeProblemUsesTheHullAndMatchesTheQuadraticDp) {
  std::mt19937 rng(7);
  const GearChoiceProblem p = randomProblem(rng, 400, true);
  GearChoiceProblem q = p;
  q.callUs.back() -= 1e-3;  // no longer monotone: the O(K n^2) path
  for (size_t k : {2, 5, 100}) {
    const GearChoice hull = chooseGears(p, 2, k);
    // Same problem via the quadratic path: a tiny dip at the end changes one gear's cost only.
    const GearChoice quad = chooseGears(q, 2, k);
    EXPECT_NEAR(hull.totalUs, gearChoiceCost(p, quad.gears), 1e-3 * 60 + 1e-9 * hull.totalUs);
    EXPECT_LE(hull.totalUs, gearChoiceCost(p, quad.gears) + 1e-9 * hull.totalUs);
  }
}

TEST(GearChoice, RangeFormAgreesWithTheSeparableForm) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 50; ++trial) {
    const GearChoiceProblem p = randomProblem(rng, 2 + trial % 9, true);
    std::vector<double> prefix;
    double sum = 0;
    for (int64_t c : p.counts) prefix.push_back(sum += static_cast<double>(c));
    const GearChoice a = chooseGears(p, 2, 5);
    const GearChoice b = chooseGearsByRange(p.sizes.size(), 2, 5, [&](int64_t i, size_t j) {
      return p.compileUs[j] + p.callUs[j] * (prefix[j] - (i >= 0 ? prefix[i] : 0.0));
    });
    EXPECT_NEAR(a.totalUs, b.totalUs, 1e-9 * a.totalUs) << "trial " << trial;
  }
}

// Fallback costs on a random problem: per call through the fallback, dearer than a gear
// call; a first-call cost per size; some sizes needing a shared part (the dynamic plan).
void addFallback(std::mt19937& rng, GearChoiceProblem& p, SizeFallback rule) {
  std::uniform_real_distribution<double> extra(0, 60), first(0, 3000), shared(0, 4000);
  std::bernoulli_distribution needsShared(0.8);
  p.fallback = rule;
  for (size_t i = 0; i < p.sizes.size(); ++i) {
    p.fallbackCallUs.push_back(p.callUs[i] + extra(rng));
    p.fallbackFirstUs.push_back(first(rng));
    p.fallbackShared.push_back(needsShared(rng) ? 1 : 0);
  }
  p.fallbackSharedUs = shared(rng);
}

// With a fallback the gears need not cover the largest size (pad+dynamic, pad+eager) or any
// size at all (dynamic, eager): the single pass equals exhaustive search, also with the
// largest gear bounded (a memory budget), and every per-count best is that count's optimum.
TEST(GearChoice, FallbackProgrammesEqualExhaustiveSearch) {
  std::mt19937 rng(25);
  for (int trial = 0; trial < 400; ++trial) {
    const size_t n = 2 + trial % 10;  // 2..11 sizes
    const SizeFallback rule = trial % 2 ? SizeFallback::kAboveLargest : SizeFallback::kNotAGear;
    GearChoiceProblem p = randomProblem(rng, n, trial % 5 != 0);
    addFallback(rng, p, rule);
    if (trial % 4 == 3) p.largestGearLimit = 1 + static_cast<size_t>(trial) % (n - 1);
    const size_t maxGears = 2 + static_cast<size_t>(trial) % (n - 1);
    const GearChoice dp = chooseGears(p, 2, maxGears);
    const GearChoice ex = chooseGearsExhaustive(p, 2, maxGears);
    ASSERT_NEAR(dp.totalUs, ex.totalUs, 1e-9 * ex.totalUs) << "trial " << trial;
    EXPECT_EQ(dp.totalUs, gearChoiceCost(p, dp.gears));
    EXPECT_LE(dp.gears.back(), p.largestGearLimit);
    const std::vector<GearChoice> perCount = chooseGearsPerCount(p, 2, maxGears);
    ASSERT_EQ(perCount.size(), maxGears - 1);
    for (size_t k = 2; k <= maxGears; ++k) {
      const GearChoice& c = perCount[k - 2];
      if (c.gears.empty()) {
        EXPECT_THROW(chooseGearsExhaustive(p, k, k), Error) << "trial " << trial << " k " << k;
        continue;
      }
      EXPECT_EQ(c.gears.size(), k);
      EXPECT_NEAR(c.totalUs, chooseGearsExhaustive(p, k, k).totalUs, 1e-9 * c.totalUs)
          << "trial " << trial << " k " << k;
    }
  }
}

// The totals by hand on three sizes, one call each: what each rule charges a size left out.
TEST(GearChoice, FallbackRulesChargeWhatTheRunCharges) {
  GearChoiceProblem p = problem({2, 4, 8}, {1, 1, 1}, {100, 100, 100}, {1, 2, 3});
  p.fallbackCallUs = {10, 20, 30};
  p.fallbackFirstUs = {1000, 2000, 3000};
  p.fallbackShared = {0, 1, 1};
  p.fallbackSharedUs = 50000;
  EXPECT_THROW(gearChoiceCost(p, {0, 1}), Error);               // kNone: 8 must be a gear
  EXPECT_EQ(gearChoiceCost(p, {0, 2}), 100 + 1 + 100 + 3 + 3);  // 4 pads up to 8
  p.fallback = SizeFallback::kAboveLargest;
  // 8 falls back: its call, its first-call cost and the shared part once.
  EXPECT_EQ(gearChoiceCost(p, {0, 1}), 100 + 1 + 100 + 2 + (30 + 3000) + 50000);
  EXPECT_EQ(gearChoiceCost(p, {1, 2}), 100 + 2 + 2 + 100 + 3);  // 2 pads up to 4
  p.fallback = SizeFallback::kNotAGear;
  // No padding: 4 is not a gear, so it falls back, with the shared part.
  EXPECT_EQ(gearChoiceCost(p, {0, 2}), 100 + 1 + (20 + 2000) + 50000 + 100 + 3);
  // Only size 2 falls back: it needs no shared part.
  EXPECT_EQ(gearChoiceCost(p, {1, 2}), (10 + 1000) + 100 + 2 + 100 + 3);
  p.largestGearLimit = 1;
  EXPECT_THROW(gearChoiceCost(p, {1, 2}), Error);  // 8 may not be a gear
  EXPECT_EQ(chooseGears(p, 2, 2).gears, (std::vector<size_t>{0, 1}));
  p.fallback = SizeFallback::kNone;
  EXPECT_THROW(chooseGears(p, 2, 3), Error);  // the largest must be a gear, and cannot be
}

TEST(GearChoice, BadProblemsAreClearErrors) {
  GearChoiceProblem p = problem({4, 2}, {1, 1}, {1, 1}, {1, 1});
  EXPECT_THROW(chooseGears(p, 2, 2), Error);
  GearChoiceProblem one = problem({4}, {1}, {1}, {1});
  EXPECT_THROW(chooseGears(one, 2, 100), Error);
  GearChoiceProblem ok = problem({2, 4}, {1, 1}, {1, 1}, {1, 1});
  EXPECT_THROW(gearChoiceCost(ok, {0}), Error);  // does not cover the largest size
}

TEST(GearSuggest, VllmCaptureSizes) {
  EXPECT_EQ(cli::vllmCaptureSizes(64),
            (std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64}));
  const auto big = cli::vllmCaptureSizes(300);
  EXPECT_EQ(big[big.size() - 4], 256);
  EXPECT_EQ(big.back(), 304);
}

class ServingSuggestion : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    graph_ = new Graph(loadGraph(example("mlp.gbx")));
    trace_ = new std::vector<InputSignature>(
        cli::loadTrace(example("mlp_serving.trace.jsonl"), *graph_));
    suggestion_ = new cli::GearSuggestion(cli::suggestGears(*graph_, *trace_, CostModel{}));
  }
  static void TearDownTestSuite() {
    delete suggestion_;
    delete trace_;
    delete graph_;
  }
  static Graph* graph_;
  static std::vector<InputSignature>* trace_;
  static cli::GearSuggestion* suggestion_;
};
Graph* ServingSuggestion::graph_ = nullptr;
std::vector<InputSignature>* ServingSuggestion::trace_ = nullptr;
cli::GearSuggestion* ServingSuggestion::suggestion_ = nullptr;

TEST_F(ServingSuggestion, SuggestionIsAtMostEveryListedCandidate) {
  const cli::GearSuggestion& s = *suggestion_;
  ASSERT_EQ(s.symbols.size(), 1u);
  EXPECT_EQ(s.symbols[0].name, "B");
  EXPECT_EQ(s.calls, 20000);
  EXPECT_EQ(s.distinctShapes, 64u);
  ASSERT_GE(s.candidates.size(), 8u);  // suggestion, 5 gear sets, dynamic, auto
  const cli::GearCandidate& best = s.candidates[0];
  EXPECT_EQ(best.name, "suggested");
  EXPECT_TRUE(best.best);
  EXPECT_EQ(best.gears.back(), std::vector<int64_t>{64});
  for (const cli::GearCandidate& c : s.candidates) {
    EXPECT_LE(best.totalUs(), c.totalUs()) << c.name;
    EXPECT_GT(c.totalUs(), 0) << c.name;
  }
  bool sawDynamic = false, sawAuto = false, sawPow2 = false;
  for (const cli::GearCandidate& c : s.candidates) {
    sawDynamic = sawDynamic || c.name == "dynamic";
    sawAuto = sawAuto || c.name == "auto";
    sawPow2 = sawPow2 || c.name == "powers of two";
  }
  EXPECT_TRUE(sawDynamic && sawAuto && sawPow2);
}

// The suggestion's JSON runs in geared mode: every compile happens up front (none at run
// time), and the padded calls, padding waste, compile and compute are what it predicted.
TEST_F(ServingSuggestion, ItsJsonRunsInGearedModeAsPredicted) {
  const cli::GearSuggestion& s = *suggestion_;
  const cli::GearCandidate& predicted = s.candidates[0];
  SessionOptions o;
  o.mode = Mode::kGeared;
  o.modelOnly = true;
  gearOptions(o).json = s.gearsJson;
  gearOptions(o).fallback = GearFallback::kPad;
  o.historyLimit = 64;
  int64_t compilesAtRunTime = 0;
  o.onCall = [&](const CallRecord& r) { compilesAtRunTime += r.graphCompiled ? 1 : 0; };
  Session session(*graph_, o);
  compileGears(session);
  const int64_t upFront = session.stats().graphCompiles;
  EXPECT_EQ(upFront, static_cast<int64_t>(predicted.gears.size()));
  std::vector<Tensor> in;
  std::vector<Tensor> weights;
  for (size_t i = 1; i < graph_->inputs.size(); ++i)
    weights.emplace_back(DType::kF32, graph_->values[graph_->inputs[i]].type.shape);
  std::vector<std::vector<Tensor>> byBatch(65);
  for (const InputSignature& sig : *trace_) {
    auto& call = byBatch.at(sig[0][0]);
    if (call.empty()) {
      call.emplace_back(DType::kF32, sig[0]);
      call.insert(call.end(), weights.begin(), weights.end());
    }
    session.run(call);
  }
  const SessionStats& st = session.stats();
  EXPECT_EQ(compilesAtRunTime, 0);
  EXPECT_EQ(st.graphCompiles, upFront);
  EXPECT_EQ(gearedCounters(st).paddedCalls, predicted.paddedCalls);
  EXPECT_NEAR(st.modeled.paddingWasteUs, predicted.paddingWasteUs,
              1e-9 * predicted.paddingWasteUs + 1e-6);
  EXPECT_NEAR(st.modeled.compileUs, predicted.compileUs, 1e-9 * predicted.compileUs);
  EXPECT_NEAR(st.modeled.computeUs, predicted.computeUs, 1e-9 * predicted.computeUs);
  // The MODELED device memory it predicted is the run's peak (issue 25: --max-memory).
  EXPECT_EQ(st.memory.peakBytes, predicted.memoryBytes);
  // Launch and sync per call are predicted too; padded inputs' pool misses are not (a few
  // allocations in all), so the run total may exceed the prediction by those only.
  const double allocs = st.modeled.launchSyncUs + st.modeled.computeUs - predicted.runUs;
  EXPECT_GE(allocs, -1e-6);
  EXPECT_LE(allocs, 64 * CostModel{}.allocUs);
}

// MODELED memory of a gear set (issue 25): weights + workspaces by the graph pool + the largest
// gear's inputs and outputs, as modeledPlanMemory plans them without a trace.
TEST_F(ServingSuggestion, MemoryIsTheGearSetsModeledPlanMemory) {
  const cli::GearCandidate& c = suggestion_->candidates[0];
  std::vector<InputSignature> shapes;
  for (const auto& gear : c.gears) {
    InputSignature sig = trace_->front();
    sig[0][0] = gear[0];
    shapes.push_back(sig);
  }
  const ShapeSetMemory m = modeledPlanMemory(*graph_, shapes, GraphPool::kShared);
  int64_t io = 0;
  for (const PlanMemory& p : m.plans) io = std::max(io, p.ioBytes);
  // It pads, so the caching allocator's 2 MiB small-pool segment that holds the padded copies
  // of x (64 x 1024 floats, 256 KiB) is part of it (executor/caching_allocator.h).
  ASSERT_GT(c.paddedCalls, 0);
  EXPECT_EQ(c.memoryBytes, m.residentBytes + io + (int64_t{2} << 20));
  // The MLP's workspace is its one [b, 1024] f32 intermediate, 4,096 bytes per batch row (each
  // bias add is its matmul's epilogue): the shared pool holds the largest gear's, 64 rows.
  EXPECT_EQ(m.workspaceBytes, 4096 * 64);
  EXPECT_EQ(c.startupUs(), c.compileUs);
}

TEST_F(ServingSuggestion, EveryAllowedRowIsParetoOrDominatedByOne) {
  const auto& rows = suggestion_->candidates;
  auto dominates = [](const cli::GearCandidate& a, const cli::GearCandidate& b) {
    return a.totalUs() <= b.totalUs() && a.memoryBytes <= b.memoryBytes &&
           a.startupUs() <= b.startupUs() &&
           (a.totalUs() < b.totalUs() || a.memoryBytes < b.memoryBytes ||
            a.startupUs() < b.startupUs());
  };
  int pareto = 0;
  for (const cli::GearCandidate& r : rows) {
    if (!r.allowed) {
      EXPECT_FALSE(r.pareto) << r.name;
      continue;
    }
    bool dominated = false;
    for (const cli::GearCandidate& o : rows)
      dominated = dominated || (o.allowed && dominates(o, r));
    EXPECT_EQ(r.pareto, !dominated) << r.name;
    pareto += r.pareto ? 1 : 0;
    if (r.best) {
      EXPECT_TRUE(r.pareto) << r.name;
    }
  }
  EXPECT_GE(pareto, 2);  // the dynamic reference starts at 0 us; gear sets win on total
}

// --max-memory with separate pools (every gear's workspace adds up): the suggestion changes to
// the cheapest set within the budget; rows above it are not allowed and say why.
TEST_F(ServingSuggestion, AMemoryBudgetPicksTheCheapestSetThatFits) {
  cli::SuggestOptions o;
  o.pool = GraphPool::kSeparate;
  const cli::GearSuggestion free = cli::suggestGears(*graph_, *trace_, CostModel{}, o);
  const cli::GearCandidate& unbounded = free.candidates[0];
  ASSERT_GT(unbounded.gears.size(), 2u);
  o.maxMemoryBytes = unbounded.memoryBytes - 1;
  const cli::GearSuggestion s = cli::suggestGears(*graph_, *trace_, CostModel{}, o);
  const cli::GearCandidate& within = s.candidates[0];
  EXPECT_TRUE(within.allowed);
  EXPECT_LE(within.memoryBytes, o.maxMemoryBytes);
  EXPECT_GE(within.totalUs(), unbounded.totalUs());
  EXPECT_NE(within.gears, unbounded.gears);
  EXPECT_EQ(within.gears.back(), std::vector<int64_t>{64});  // the largest size is still a gear
  for (const cli::GearCandidate& c : s.candidates)
    if (!c.reference && c.memoryBytes > o.maxMemoryBytes) {
      EXPECT_FALSE(c.allowed) << c.name;
      EXPECT_NE(c.note.find("above the budget"), std::string::npos) << c.note;
    }
}

TEST_F(ServingSuggestion, AStartupBudgetBoundsTheUpFrontCompiles) {
  cli::SuggestOptions o;
  o.references = false;
  const double unbounded = suggestion_->candidates[0].startupUs();
  o.maxStartupUs = unbounded / 2;
  const cli::GearSuggestion s = cli::suggestGears(*graph_, *trace_, CostModel{}, o);
  EXPECT_LE(s.candidates[0].startupUs(), o.maxStartupUs);
  EXPECT_LT(s.candidates[0].gears.size(), suggestion_->candidates[0].gears.size());
  // Below one gear's compile nothing fits: a clear error naming the budget.
  o.maxStartupUs = 1;
  try {
    cli::suggestGears(*graph_, *trace_, CostModel{}, o);
    FAIL() << "expected Error(kGear)";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kGear);
    EXPECT_NE(std::string(e.what()).find("no gear set is within the budgets"), std::string::npos)
        << e.what();
  }
}

TEST(GearSuggest, SeedOneGearsCoverItsOwnTrace) {
  const Graph g = loadGraph(example("seed001_add.gbx"));
  const auto trace = cli::loadTrace(example("seed001_add.trace.jsonl"), g);
  cli::SuggestOptions so;
  so.references = false;
  const cli::GearSuggestion s = cli::suggestGears(g, trace, CostModel{}, so);
  ASSERT_FALSE(s.gears.empty());
  SessionOptions o;
  o.mode = Mode::kGeared;
  gearOptions(o).json = s.gearsJson;
  gearOptions(o).fallback = GearFallback::kPad;
  Session session(g, o);
  for (size_t i = 0; i < trace.size(); ++i) {
    const auto in = makeInputs(g, trace[i], i);
    EXPECT_NO_THROW(session.run(in)) << "call " << i;
  }
  EXPECT_EQ(session.stats().graphCompiles, static_cast<int64_t>(s.gears.size()));
  EXPECT_EQ(gearedCounters(session.stats()).paddedCalls, s.candidates[0].paddedCalls);
}

// Two varying symbols (B and T): coordinate descent against exhaustive search over every
// pair of per-symbol lists (each with its largest size, 2+ values, product <= max gears) on
// small random traces. The gap is printed; the suggestion is never below the optimum (the same
// exact evaluation) and, on these traces, within 10% of it.
TEST(GearSuggest, TwoSymbolsAgainstExhaustiveSearch) {
  const Graph g = parseGraph(R"(graph two(%x: f32[B, T], %y: f32[B, T]) {
  %s = add(%x, %y)
  return %s
})");
  std::mt19937 rng(3);
  double worst = 0;
  for (int trial = 0; trial < 6; ++trial) {
    std::uniform_int_distribution<int64_t> b(1, 6 + trial % 3), t(1, 5);
    std::vector<InputSignature> trace;
    for (int i = 0; i < 40; ++i) {
      const Shape sh{b(rng), t(rng)};
      trace.push_back({sh, sh});
    }
    cli::SuggestOptions so;
    so.references = false;
    so.maxGears = 12;
    const cli::GearSuggestion s = cli::suggestGears(g, trace, CostModel{}, so);
    ASSERT_EQ(s.symbols.size(), 2u);
    // Every per-symbol list containing the largest size, with >= 2 values.
    std::vector<std::vector<int64_t>> distinct(2);
    for (const auto& sig : trace)
      for (int k = 0; k < 2; ++k) distinct[k].push_back(sig[0][k]);
    std::vector<std::vector<std::vector<int64_t>>> lists(2);
    for (int k = 0; k < 2; ++k) {
      auto& d = distinct[k];
      std::sort(d.begin(), d.end());
      d.erase(std::unique(d.begin(), d.end()), d.end());
      for (uint32_t mask = 0; mask < (1u << (d.size() - 1)); ++mask) {
        std::vector<int64_t> l;
        for (size_t i = 0; i + 1 < d.size(); ++i)
          if (mask >> i & 1) l.push_back(d[i]);
        l.push_back(d.back());
        if (l.size() >= 2) lists[k].push_back(l);
      }
    }
    std::vector<std::vector<std::vector<int64_t>>> sets;
    for (const auto& l1 : lists[0])
      for (const auto& l2 : lists[1]) {
        if (l1.size() * l2.size() > so.maxGears) continue;
        std::vector<std::vector<int64_t>> set;
        for (int64_t v1 : l1)
          for (int64_t v2 : l2) set.push_back({v1, v2});
        sets.push_back(set);
      }
    sets.push_back(s.gears);
    const auto rows = cli::evaluateGearSets(g, trace, CostModel{}, sets);
    double optimum = rows[0].totalUs();
    for (const auto& r : rows) optimum = std::min(optimum, r.totalUs());
    const double got = rows.back().totalUs();
    EXPECT_NEAR(got, s.candidates[0].totalUs(), 1e-9 * got);
    EXPECT_GE(got, optimum - 1e-9 * optimum);
    const double gap = got / optimum - 1;
    worst = std::max(worst, gap);
    EXPECT_LE(gap, 0.10) << "trial " << trial;
  }
  std::printf("two symbols: worst gap to exhaustive search %.2f%%\n", 100 * worst);
}

TEST(GearSuggest, NothingVaryingIsAClearError) {
  const Graph g = loadGraph(example("seed001_add.gbx"));
  std::vector<InputSignature> trace(3, InputSignature{Shape{2, 2}, Shape{2, 2}});
  try {
    cli::suggestGears(g, trace, CostModel{});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kGear);
    EXPECT_NE(std::string(e.what()).find("no input dim varies"), std::string::npos) << e.what();
  }
}

// four_ops: x and y share B. A gear on x alone applies to y too (it used to compile 1 of 4
// gears and fail at the second call).
TEST(SharedSymbolGears, AGearOnOneInputCoversTheOther) {
  const Graph g = loadGraph(example("four_ops.gbx"));
  const auto trace = cli::loadTrace(example("four_ops.trace.jsonl"), g);
  SessionOptions o;
  o.mode = Mode::kGeared;
  gearOptions(o).json = R"({"x": {"0": [1, 2, 4, 8]}})";
  gearOptions(o).fallback = GearFallback::kPad;
  Session session(g, o);
  for (size_t i = 0; i < trace.size(); ++i) {
    const auto in = makeInputs(g, trace[i], i);
    ASSERT_NO_THROW(session.run(in)) << "call " << i;
  }
  EXPECT_EQ(session.stats().graphCompiles, 4);
  EXPECT_EQ(gearedCounters(session.stats()).gears, 4);
}

}  // namespace
}  // namespace gearbox
