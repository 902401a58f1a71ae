// suggest-gears speed (issue 14): the time to choose gears for a long trace, generated in
// memory (no trace files in the repo), on examples/mlp.gbx with the default device profile.
//  - BM_SuggestGears/1000000/64: 1,000,000 calls over 64 distinct batch sizes (the serving
//    case; target well under a second).
//  - BM_SuggestGears/1000000/10000: 1,000,000 calls over 10,000 distinct batch sizes (the DP's
//    worst case here: 100 layers of the convex-hull step over 10,000 sizes).
//  - BM_SuggestGearsFallback/1000000/10000/F: the same trace with --gear-fallback F =
//    1 pad+dynamic, 2 pad+eager, 3 dynamic, 4 eager (issue 25: the search over every largest
//    gear, or the selection; rows that send calls to the fallback replay them in order).
//  - BM_TraceHistogram/1000000/64: the peer: only the pass over the trace that every
//    suggestion makes (hashing each call's shapes into a histogram), so the ratio shows what
//    the choice itself adds.
// The dynamic/auto reference rows are off (they run the trace model-only, a separate cost).
#include <benchmark/benchmark.h>

#include <random>
#include <unordered_map>

#include "driver/gear_suggest.h"
#include "graph/text.h"

namespace gearbox {
namespace {

std::vector<InputSignature> servingTrace(const Graph& g, int64_t calls, int64_t distinct) {
  std::mt19937_64 rng(14);
  std::uniform_int_distribution<int64_t> batch(1, distinct);
  InputSignature base;
  for (ValueId v : g.inputs) base.push_back(g.values[v].type.shape);
  std::vector<InputSignature> trace(static_cast<size_t>(calls), base);
  for (auto& sig : trace) sig[0][0] = batch(rng);
  return trace;
}

void BM_SuggestGears(benchmark::State& state) {
  const Graph g = loadGraph(std::string(GEARBOX_SOURCE_DIR) + "/examples/mlp.gbx");
  const auto trace = servingTrace(g, state.range(0), state.range(1));
  cli::SuggestOptions o;
  o.references = false;
  size_t gears = 0;
  for (auto _ : state) {
    const cli::GearSuggestion s = cli::suggestGears(g, trace, CostModel{}, o);
    gears = s.gears.size();
    benchmark::DoNotOptimize(gears);
  }
  state.counters["gears"] = static_cast<double>(gears);
}
BENCHMARK(BM_SuggestGears)
    ->Args({1000000, 64})
    ->Args({1000000, 10000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

void BM_SuggestGearsFallback(benchmark::State& state) {
  const Graph g = loadGraph(std::string(GEARBOX_SOURCE_DIR) + "/examples/mlp.gbx");
  const auto trace = servingTrace(g, state.range(0), state.range(1));
  constexpr GearFallback kinds[] = {GearFallback::kPad, GearFallback::kPadDynamic,
                                    GearFallback::kPadEager, GearFallback::kDynamic,
                                    GearFallback::kEager};
  cli::SuggestOptions o;
  o.references = false;
  o.fallback = kinds[state.range(2)];
  size_t gears = 0;
  int64_t fallbackCalls = 0;
  for (auto _ : state) {
    const cli::GearSuggestion s = cli::suggestGears(g, trace, CostModel{}, o);
    gears = s.gears.size();
    fallbackCalls = s.candidates[0].fallbackCalls;
    benchmark::DoNotOptimize(gears);
  }
  state.SetLabel(gearFallbackName(o.fallback));
  state.counters["gears"] = static_cast<double>(gears);
  state.counters["fallback_calls"] = static_cast<double>(fallbackCalls);
}
BENCHMARK(BM_SuggestGearsFallback)
    ->Args({1000000, 10000, 1})
    ->Args({1000000, 10000, 2})
    ->Args({1000000, 10000, 3})
    ->Args({1000000, 10000, 4})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

void BM_TraceHistogram(benchmark::State& state) {
  const Graph g = loadGraph(std::string(GEARBOX_SOURCE_DIR) + "/examples/mlp.gbx");
  const auto trace = servingTrace(g, state.range(0), state.range(1));
  for (auto _ : state) {
    std::unordered_map<InputSignature, int64_t, SignatureHash> h;
    for (const auto& sig : trace) h[sig]++;
    benchmark::DoNotOptimize(h.size());
  }
}
BENCHMARK(BM_TraceHistogram)->Args({1000000, 64})->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace
}  // namespace gearbox
BENCHMARK_MAIN();
