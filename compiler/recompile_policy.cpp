#include "compiler/recompile_policy.h"

#include <fmt/format.h>

#include <algorithm>

#include "graph/error.h"

namespace gearbox {

// ---- Guards ----

namespace {
bool dimAccepts(int64_t cached, int64_t actual) {
  if (cached >= 0) return cached == actual;
  return actual >= 2;  // a dynamic dim assumes size >= 2, as Dynamo's does
}
}  // namespace

bool signatureAccepts(const InputSignature& cached, const InputSignature& actual) {
  if (cached.size() != actual.size()) return false;
  for (size_t i = 0; i < cached.size(); ++i) {
    if (cached[i].rank() != actual[i].rank()) return false;
    for (int d = 0; d < cached[i].rank(); ++d)
      if (!dimAccepts(cached[i][d], actual[i][d])) return false;
  }
  return true;
}

std::vector<GuardFailure> guardFailures(const Graph& g, const InputSignature& cached,
                                        const InputSignature& actual) {
  std::vector<GuardFailure> out;
  for (size_t i = 0; i < cached.size() && i < actual.size(); ++i) {
    const std::string& name = g.values[g.inputs[i]].name;
    if (cached[i].rank() != actual[i].rank()) {
      out.push_back({static_cast<int>(i), -1, cached[i].rank(), actual[i].rank(),
                     fmt::format("input '{}' rank mismatch: expected {}, actual {}", name,
                                 cached[i].rank(), actual[i].rank())});
      continue;
    }
    for (int d = 0; d < cached[i].rank(); ++d) {
      const int64_t c = cached[i][d], a = actual[i][d];
      if (dimAccepts(c, a)) continue;
      std::string text =
          c >= 0 ? fmt::format("input '{}' size mismatch at dim {}: expected {}, actual {}", name,
                               d, c, a)
                 : fmt::format(
                       "input '{}' size mismatch at dim {}: expected a dynamic size >= 2 "
                       "(0 and 1 are specialised), actual {}",
                       name, d, a);
      out.push_back({static_cast<int>(i), d, c, a, std::move(text)});
    }
  }
  return out;
}

// ---- Miss description ----

MissDescription describeMiss(const Graph& g, std::vector<GuardedPlan> cached,
                             const InputSignature& actual, bool firstCompile) {
  MissDescription miss;
  if (firstCompile) {
    miss.reason = kFirstCallReason;
    return miss;
  }
  // Newest plan first, as TORCH_LOGS=recompiles lists cache entries.
  std::sort(cached.begin(), cached.end(),
            [](const GuardedPlan& a, const GuardedPlan& b) { return a.id > b.id; });
  for (const GuardedPlan& p : cached) {
    for (const GuardFailure& f : guardFailures(g, p.signature, actual)) {
      miss.guardFailures.push_back(fmt::format("plan #{}: {}", p.id, f.text));
      miss.failures.push_back({p.id, f});
      if (miss.reason.empty()) miss.reason = f.text;
    }
  }
  // No cached plan rejects the call, so the one that accepted it was evicted.
  if (miss.reason.empty()) miss.reason = kEvictedReason;
  return miss;
}

// ---- Dynamic dims ----

DimMarks parseDimMarks(const std::string& spec) {
  DimMarks out;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(pos, comma - pos);
    const size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size())
      fail(ErrorKind::kConfig, "expected input:dim in '{}', got '{}'", spec, item);
    int dim = 0;
    try {
      size_t used = 0;
      dim = std::stoi(item.substr(colon + 1), &used);
      if (used != item.size() - colon - 1) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      fail(ErrorKind::kConfig, "dim in '{}' is not an integer", item);
    }
    out.emplace(item.substr(0, colon), dim);
    pos = comma + 1;
  }
  return out;
}

DynamicDimPolicy::DynamicDimPolicy(Start start, DimMarks dynamicMarks, DimMarks staticMarks)
    : start_(start), dynamicMarks_(std::move(dynamicMarks)), staticMarks_(std::move(staticMarks)) {}

void DynamicDimPolicy::observeMiss(const InputSignature& actual) {
  if (!firstMiss_) {
    firstMiss_ = actual;
    return;
  }
  if (start_ != Start::kAutomatic) return;
  // Automatic dynamic: every dim whose size differs from the first call becomes dynamic.
  for (size_t i = 0; i < actual.size() && i < firstMiss_->size(); ++i)
    for (int d = 0; d < actual[i].rank() && d < (*firstMiss_)[i].rank(); ++d)
      if (actual[i][d] != (*firstMiss_)[i][d]) changed_.insert({static_cast<int>(i), d});
}

InputSignature DynamicDimPolicy::target(const Graph& g, const InputSignature& actual) const {
  InputSignature sig = actual;
  for (size_t i = 0; i < sig.size() && i < g.inputs.size(); ++i) {
    const Value& input = g.values[g.inputs[i]];
    for (int d = 0; d < sig[i].rank(); ++d) {
      if (staticMarks_.count({input.name, d})) continue;
      bool dynamic = dynamicMarks_.count({input.name, d}) > 0;
      if (start_ == Start::kDeclared) {
        // Every dim the model declares dynamic stays symbolic.
        dynamic = dynamic || (d < input.type.shape.rank() && !isStaticDim(input.type.shape[d]));
      } else if (changed_.count({static_cast<int>(i), d})) {
        dynamic = true;
      }
      // Sizes 0 and 1 are specialised even when dynamic, as Dynamo does.
      if (dynamic && actual[i][d] >= 2) sig[i][d] = kAnyDim;
    }
  }
  return sig;
}

std::string DynamicDimPolicy::compileReason(const std::string& missReason, bool firstCompile,
                                            const InputSignature& target) const {
  bool isStatic = true;
  for (const Shape& s : target) isStatic = isStatic && s.isStatic();
  if (!firstCompile && !isStatic && start_ == Start::kAutomatic)
    return missReason + " (dims that changed are now dynamic)";
  return missReason;
}

// ---- The limit ----

const char* onRecompileLimitName(OnRecompileLimit p) {
  switch (p) {
    case OnRecompileLimit::kFallback: return "fallback";
    case OnRecompileLimit::kError: return "error";
    case OnRecompileLimit::kUnlimited: return "unlimited";
  }
  return "?";
}

std::optional<OnRecompileLimit> parseOnRecompileLimit(std::string_view s) {
  for (OnRecompileLimit p :
       {OnRecompileLimit::kFallback, OnRecompileLimit::kError, OnRecompileLimit::kUnlimited})
    if (s == onRecompileLimitName(p)) return p;
  return std::nullopt;
}

MissDecision RecompilePolicy::onMiss(int64_t compilesSoFar, const MissDescription& miss,
                                     int64_t allCompilesSoFar) {
  MissDecision d;
  const bool accumulated = accumulatedLimit_ > 0 && allCompilesSoFar >= accumulatedLimit_;
  if (onLimit_ == OnRecompileLimit::kUnlimited || (compilesSoFar < limit_ && !accumulated))
    return d;
  // Which limit was hit, in Dynamo's words.
  const std::string hit =
      compilesSoFar >= limit_
          ? fmt::format("recompile_limit ({})", limit_)
          : fmt::format("accumulated_recompile_limit ({}; {} compiles so far, plans and kernels)",
                        accumulatedLimit_, allCompilesSoFar);
  if (onLimit_ == OnRecompileLimit::kError)
    fail(ErrorKind::kLimit, "hit {}; last reason: {}", hit, miss.reason);
  d.action = MissAction::kFallback;
  // One warning per session, as Dynamo warns once and then runs the function in run-only mode;
  // every fallback call still records its reason.
  if (!warned_) {
    warned_ = true;
    d.warning = fmt::format(
        "hit {}; last reason: {}. Cached plans keep serving; calls that miss "
        "them now run through the dynamic path without compiling",
        hit, miss.reason);
  }
  return d;
}

}  // namespace gearbox
