// Plan compile time against graph size (issue 15): per-node compile time at 1,000, 20,000 and
// 100,000 nodes. A chain of adds with a skip connection every 8 nodes keeps a few values live
// at once, as real bodies do. The peer is the same benchmark at 1,000 nodes in the same run:
// the figure of interest is the per-node ratio (20,000 / 1,000), which a quadratic planner
// pushed to ~20x. Measured wall time (Google Benchmark), nothing modeled.
#include <benchmark/benchmark.h>

#include "compiler/compiler.h"
#include "compiler/memory_plan.h"
#include "graph/graph.h"

namespace gearbox {
namespace {

Graph chain(int nodes) {
  GraphBuilder b("chain");
  ValueId x = b.input("x", DType::kF32, Shape{4, 16});
  ValueId cur = x, skip = x;
  for (int i = 0; i < nodes; ++i) {
    cur = b.add(cur, i % 8 == 7 ? skip : x);
    if (i % 8 == 7) skip = cur;
  }
  b.output(cur);
  return b.build();
}

void BM_PlanCompile(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const Graph g = chain(nodes);
  for (auto _ : state) {
    KernelCache cache;
    auto plan = compilePlan(g, {Shape{4, 16}}, cache);
    benchmark::DoNotOptimize(plan);
  }
  state.counters["us_per_node"] = benchmark::Counter(
      static_cast<double>(nodes) * 1e-6,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_PlanCompile)->Arg(1000)->Arg(20000)->Arg(100000)->Unit(benchmark::kMillisecond);

// The planner alone, on the buffer requests of the same shape of graph.
void BM_PlanMemory(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<BufferRequest> req(n);
  for (int i = 0; i < n; ++i) {
    req[i].bytes = 256 + 64 * (i % 5);
    req[i].first = i;
    req[i].last = i % 8 == 7 ? std::min(n - 1, i + 8) : std::min(n - 1, i + 1);
  }
  for (auto _ : state) benchmark::DoNotOptimize(planMemory(req));
  state.counters["us_per_buffer"] = benchmark::Counter(
      static_cast<double>(n) * 1e-6,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_PlanMemory)->Arg(1000)->Arg(20000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gearbox

BENCHMARK_MAIN();
