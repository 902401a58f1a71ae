// compiler/recompile_policy: guards, miss description, dynamic dims and the limit, unit-tested
// without a Session; then the one thing that needs a Session: every mode that compiles plans
// takes the same decision in the same words.
#include "compiler/recompile_policy.h"

#include <gtest/gtest.h>

#include <mutex>

#include "compiler/compile_log.h"
#include "executor/session.h"
#include "graph/error.h"
#include "warning_capture.h"

namespace gearbox {
namespace {

using testing_util::WarningCapture;

Graph twoInputs() {
  GraphBuilder b("pair");
  auto x = b.input("x", DType::kF32, {symbolDim("B"), 3});
  auto y = b.input("y", DType::kF32, {symbolDim("B"), 3});
  b.output(b.add(x, y, "s"));
  return b.build();
}

TEST(RecompilePolicy, GuardsAcceptDynamicDimsFromTwo) {
  const InputSignature dyn = {Shape{kAnyDim, 3}};
  EXPECT_TRUE(signatureAccepts(dyn, {Shape{2, 3}}));
  EXPECT_TRUE(signatureAccepts(dyn, {Shape{9, 3}}));
  EXPECT_FALSE(signatureAccepts(dyn, {Shape{1, 3}}));  // 0 and 1 are specialised
  EXPECT_FALSE(signatureAccepts(dyn, {Shape{4, 4}}));
  EXPECT_FALSE(signatureAccepts(dyn, {Shape{4, 3, 1}}));
}

TEST(RecompilePolicy, MissDescriptionListsEveryFailedGuardNewestPlanFirst) {
  const Graph g = twoInputs();
  const InputSignature actual = {Shape{5, 3}, Shape{5, 3}};
  const MissDescription first = describeMiss(g, {}, actual, /*firstCompile=*/true);
  EXPECT_EQ(first.reason, kFirstCallReason);
  EXPECT_TRUE(first.guardFailures.empty());

  const MissDescription m = describeMiss(
      g, {{1, {Shape{2, 3}, Shape{2, 3}}}, {4, {Shape{4, 3}, Shape{5, 3}}}}, actual, false);
  EXPECT_EQ(m.reason, "input 'x' size mismatch at dim 0: expected 4, actual 5");
  EXPECT_EQ(m.guardFailures,
            (std::vector<std::string>{
                "plan #4: input 'x' size mismatch at dim 0: expected 4, actual 5",
                "plan #1: input 'x' size mismatch at dim 0: expected 2, actual 5",
                "plan #1: input 'y' size mismatch at dim 0: expected 2, actual 5"}));

  // Nothing cached rejects the call: the plan that accepted it was evicted.
  EXPECT_EQ(describeMiss(g, {}, actual, false).reason, kEvictedReason);
}

TEST(RecompilePolicy, AutomaticDynamicMakesChangedDimsDynamic) {
  const Graph g = twoInputs();
  DynamicDimPolicy p(DynamicDimPolicy::Start::kAutomatic, {}, {});
  const InputSignature a = {Shape{2, 3}, Shape{2, 3}}, b = {Shape{4, 3}, Shape{4, 3}};
  p.observeMiss(a);
  EXPECT_EQ(p.target(g, a), a) << "the first compile is static";
  EXPECT_EQ(p.compileReason("first call", true, a), "first call");
  p.observeMiss(b);
  const InputSignature dyn = {Shape{kAnyDim, 3}, Shape{kAnyDim, 3}};
  EXPECT_EQ(p.target(g, b), dyn);
  EXPECT_EQ(p.compileReason("why", false, dyn), "why (dims that changed are now dynamic)");
  // Size 1 stays specialised even in a dynamic dim.
  EXPECT_EQ(p.target(g, {Shape{1, 3}, Shape{1, 3}}), (InputSignature{Shape{1, 3}, Shape{1, 3}}));
}

TEST(RecompilePolicy, DeclaredDynamicAndMarks) {
  const Graph g = twoInputs();
  DynamicDimPolicy declared(DynamicDimPolicy::Start::kDeclared, {}, {{"y", 0}});
  const InputSignature s = {Shape{4, 3}, Shape{4, 3}};
  declared.observeMiss(s);
  // x's B is declared dynamic; mark_static keeps y's static.
  EXPECT_EQ(declared.target(g, s), (InputSignature{Shape{kAnyDim, 3}, Shape{4, 3}}));
  EXPECT_EQ(declared.compileReason("first call", true, declared.target(g, s)), "first call");

  DynamicDimPolicy marked(DynamicDimPolicy::Start::kAutomatic, parseDimMarks("x:1"), {});
  marked.observeMiss(s);
  EXPECT_EQ(marked.target(g, s), (InputSignature{Shape{4, kAnyDim}, Shape{4, 3}}));
}

TEST(RecompilePolicy, LimitCompilesThenFallsBackWarningOnce) {
  RecompilePolicy p(2, OnRecompileLimit::kFallback);
  const MissDescription miss{"input 'x' size mismatch at dim 0: expected 2, actual 3", {}, {}};
  EXPECT_EQ(p.onMiss(0, miss).action, MissAction::kCompile);
  EXPECT_EQ(p.onMiss(1, miss).action, MissAction::kCompile);
  const MissDecision d = p.onMiss(2, miss);
  EXPECT_EQ(d.action, MissAction::kFallback);
  EXPECT_EQ(d.warning.rfind("hit recompile_limit (2); last reason: " + miss.reason + ".", 0), 0u)
      << d.warning;
  const MissDecision again = p.onMiss(2, miss);
  EXPECT_EQ(again.action, MissAction::kFallback);
  EXPECT_TRUE(again.warning.empty()) << "one warning per session";
}

TEST(RecompilePolicy, LimitErrorAndUnlimited) {
  const MissDescription miss{"input 'x' size mismatch at dim 0: expected 2, actual 3", {}, {}};
  RecompilePolicy error(1, OnRecompileLimit::kError);
  EXPECT_EQ(error.onMiss(0, miss).action, MissAction::kCompile);
  try {
    error.onMiss(1, miss);
    ADD_FAILURE() << "expected Error(kLimit)";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kLimit);
    EXPECT_EQ(std::string(e.what()), "hit recompile_limit (1); last reason: " + miss.reason);
  }
  RecompilePolicy unlimited(1, OnRecompileLimit::kUnlimited);
  EXPECT_EQ(unlimited.onMiss(100, miss).action, MissAction::kCompile);
}

TEST(RecompilePolicy, OnLimitNamesRoundTrip) {
  for (auto p :
       {OnRecompileLimit::kFallback, OnRecompileLimit::kError, OnRecompileLimit::kUnlimited})
    EXPECT_EQ(parseOnRecompileLimit(onRecompileLimitName(p)), p);
  EXPECT_EQ(parseOnRecompileLimit("sometimes"), std::nullopt);
}

// Every mode that compiles plans: a miss over the limit falls back with the miss's reason,
// warns once in the same words, and under kError fails with the same words.
TEST(RecompilePolicy, EveryPlanCompilingModeDecidesInTheSameWords) {
  GraphBuilder b("add");
  auto x = b.input("x", DType::kF32, {kAnyDim});
  b.output(b.add(x, x, "y"));
  const Graph g = b.build();
  // 2 compiles a plan in every such mode; 1 misses it in every one of them (a static [2], a
  // dynamic plan that accepts sizes >= 2, auto's static [2]).
  const std::vector<int64_t> sizes = {2, 1, 0};
  int checked = 0;
  for (Mode m : modes(ModeSet::kWithoutGears)) {
    SCOPED_TRACE(modeName(m));
    SessionOptions o;
    o.mode = m;
    o.recompileLimit = 1;
    Session s(g, o);
    WarningCapture warnings;
    for (int64_t n : sizes) s.run(makeInputs(g, {Shape{n}}, 1));
    if (s.stats().graphCompiles == 0) continue;  // compiles no plan: no limit to hit
    // Its captures are bound by its own capture_limit, not the recompile limit (docs/modes.md).
    if (m == Mode::kReduceOverhead) continue;
    ++checked;
    const auto& h = s.history();
    ASSERT_EQ(s.stats().graphCompiles, 1);
    EXPECT_EQ(s.stats().fallbackRuns, 2);
    for (size_t k = 1; k < h.size(); ++k) {
      EXPECT_TRUE(h[k].fallback);
      ASSERT_FALSE(h[k].guardFailures.empty());
      // The reason is the first failed guard, without the plan prefix.
      EXPECT_NE(h[k].guardFailures[0].find(": " + h[k].reason), std::string::npos)
          << h[k].guardFailures[0] << " vs " << h[k].reason;
    }
    const auto w = warnings.messages();
    ASSERT_EQ(w.size(), 1u) << "one warning per session";
    EXPECT_EQ(w[0].rfind("hit recompile_limit (1); last reason: " + h[1].reason + ".", 0), 0u)
        << w[0];

    o.onRecompileLimit = OnRecompileLimit::kError;
    Session strict(g, o);
    strict.run(makeInputs(g, {Shape{2}}, 1));
    try {
      strict.run(makeInputs(g, {Shape{1}}, 1));
      ADD_FAILURE() << "expected Error(kLimit)";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kLimit);
      EXPECT_EQ(std::string(e.what()), "hit recompile_limit (1); last reason: " + h[1].reason);
    }
  }
  EXPECT_GE(checked, 3) << "three modes compile plans today";
}

}  // namespace
}  // namespace gearbox
