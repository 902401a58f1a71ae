#pragma once
// The recompile policy: every decision a cached-plan mode takes on a plan-cache miss, in one
// place and in the same words for every mode. Split as Dynamo splits it (guards.py says why a
// cached entry does not fit, cache_size.py says whether another compile is allowed,
// convert_frame.py asks both):
//   - guards: which guards of a cached plan fail for a call's shapes (guardFailures);
//   - miss description: the short reason and every failed guard of every cached plan;
//   - the dynamic-dim policy: which dims a compile leaves dynamic (automatic dynamic);
//   - the limit: compile, fall back (Dynamo's run-only mode) or fail.
// Nothing here needs a Session; tests/recompile_policy_test.cpp exercises it alone.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/specialize.h"

namespace gearbox {

// ---- Guards ----

// One guard failure in TORCH_LOGS=recompiles style:
//   "input 'x1' size mismatch at dim 0: expected 4, actual 5"
struct GuardFailure {
  int input = 0;
  int dim = -1;  // -1: rank mismatch
  int64_t expected = 0, actual = 0;
  std::string text;
};

// Every guard of a plan compiled for `cached` that fails for `actual`. A cached dim that is
// dynamic (< 0) accepts any size >= 2 (sizes 0 and 1 are specialised, as Dynamo does).
std::vector<GuardFailure> guardFailures(const Graph& g, const InputSignature& cached,
                                        const InputSignature& actual);

// Does a plan compiled for `cached` (possibly with dynamic dims) accept `actual`?
bool signatureAccepts(const InputSignature& cached, const InputSignature& actual);

// ---- Miss description ----

// The reason of the first compile of a session.
inline constexpr std::string_view kFirstCallReason = "first call";
// The reason when no cached plan has a failing guard: the plan that fitted was evicted.
inline constexpr std::string_view kEvictedReason = "plan evicted from the plan cache";

// A plan a session holds, as the guards see it.
struct GuardedPlan {
  uint64_t id = 0;
  InputSignature signature;
};

// One failed guard of one cached plan.
struct PlanGuardFailure {
  uint64_t plan = 0;
  GuardFailure failure;
};

// Why a call missed every cached plan.
struct MissDescription {
  std::string reason;                      // short: first call, first failed guard, or evicted
  std::vector<std::string> guardFailures;  // "plan #3: <guard>", newest plan first
  std::vector<PlanGuardFailure> failures;  // the same guards, structured (reports group them)
};

// `firstCompile`: the session has compiled no plan yet (the reason is then "first call" and no
// guard is listed).
MissDescription describeMiss(const Graph& g, std::vector<GuardedPlan> cached,
                             const InputSignature& actual, bool firstCompile);

// ---- Dynamic dims ----

// (input name, dim) pairs, as given by --dynamic-dims x:0,y:1 / --static-dims x:1.
using DimMarks = std::set<std::pair<std::string, int>>;
DimMarks parseDimMarks(const std::string& spec);  // Error(kConfig) on bad syntax

// Which dims of a call's shapes a compile leaves dynamic.
class DynamicDimPolicy {
 public:
  enum class Start {
    kAutomatic,  // static first; dims that change become dynamic (torch.compile's default)
    kDeclared,   // every dim the model declares dynamic, from the first compile (dynamic=True)
  };
  DynamicDimPolicy(Start start, DimMarks dynamicMarks, DimMarks staticMarks);

  // Called on every plan-cache miss, before the limit is consulted. Automatic: the first miss
  // is remembered; a later one makes every dim whose size differs from it dynamic.
  void observeMiss(const InputSignature& actual);
  // The signature to compile for `actual`: dynamic dims are kAnyDim, except sizes 0 and 1,
  // which are specialised as Dynamo does. mark_static wins over everything else.
  InputSignature target(const Graph& g, const InputSignature& actual) const;
  // The compile reason, noting when automatic dynamic made dims dynamic.
  std::string compileReason(const std::string& missReason, bool firstCompile,
                            const InputSignature& target) const;

 private:
  Start start_;
  DimMarks dynamicMarks_, staticMarks_;
  std::optional<InputSignature> firstMiss_;
  std::set<std::pair<int, int>> changed_;  // (input, dim) made dynamic so far (automatic)
};

// ---- The limit ----

enum class OnRecompileLimit { kFallback, kError, kUnlimited };
const char* onRecompileLimitName(OnRecompileLimit p);  // "fallback", "error", "unlimited"
std::optional<OnRecompileLimit> parseOnRecompileLimit(std::string_view s);

// What to do with a miss.
enum class MissAction {
  kCompile,   // compile a plan for it
  kFallback,  // run it through the dynamic path without compiling (Dynamo's run-only mode)
};

struct MissDecision {
  MissAction action = MissAction::kCompile;
  // Set once per policy, on the first fallback: the warning to log.
  std::string warning;
};

// Counts nothing itself: the caller says how many plans the session has compiled (Dynamo's
// recompile_limit counts compiled entries per function; gearbox counts plan compiles per
// session), and how many compiles of any kind (plans and kernels) it has made.
//
// The accumulated limit is Dynamo's accumulated_recompile_limit (256) made to fit gearbox:
// Dynamo's recompile_limit counts the entries of one code object that guard on the same
// objects, and the accumulated limit all entries of the code object, a cap on compile work the
// per-variant count cannot give. A gearbox session is one graph with no such variants, so
// counting plans again would only be min(recompile_limit, accumulated); the compile work a
// plan count does not bound is its kernels (tens per plan). So the accumulated limit counts
// every compile of the session, plans and kernels (kernels loaded from a store are not
// compiles). 0 (gearbox's default) turns it off: 256 kernels is a different amount of work
// from Dynamo's 256 graphs, and a default would change every existing report.
class RecompilePolicy {
 public:
  RecompilePolicy(int limit, OnRecompileLimit onLimit, int64_t accumulatedLimit = 0)
      : limit_(limit), onLimit_(onLimit), accumulatedLimit_(accumulatedLimit) {}
  // Throws Error(kLimit) "hit recompile_limit (N); last reason: <reason>" (or
  // accumulated_recompile_limit) under kError.
  MissDecision onMiss(int64_t compilesSoFar, const MissDescription& miss,
                      int64_t allCompilesSoFar = 0);
  int limit() const { return limit_; }
  OnRecompileLimit onLimit() const { return onLimit_; }
  int64_t accumulatedLimit() const { return accumulatedLimit_; }

 private:
  int limit_;
  OnRecompileLimit onLimit_;
  int64_t accumulatedLimit_;
  bool warned_ = false;
};

}  // namespace gearbox
