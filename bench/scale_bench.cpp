// Plan compile time against graph size (issue 15): per-node compile time at 1,000, 20,000 and
// 100,000 nodes. A chain of adds with a skip connection every 8 nodes keeps a few values live
// at once, as real bodies do. The peer is the same benchmark at 1,000 nodes in the same run:
// the figure of interest is the per-node ratio (20,000 / 1,000), which a quadratic planner
// pushed to ~20x. Measured times (Google Benchmark), nothing modeled. The us_per_node and
// us_per_buffer counters are microseconds of CPU time per node (shown with an "s" suffix
// because Google Benchmark prints inverted rates that way).
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "compiler/compiler.h"
#include "compiler/kernel_store.h"
#include "compiler/memory_plan.h"
#include "graph/file_io.h"
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

std::vector<BufferRequest> chainRequests(int n) {
  std::vector<BufferRequest> req(n);
  for (int i = 0; i < n; ++i) {
    req[i].bytes = 256 + 64 * (i % 5);
    req[i].first = i;
    req[i].last = i % 8 == 7 ? std::min(n - 1, i + 8) : std::min(n - 1, i + 1);
  }
  return req;
}

// The peer: the planner as it was before issue 15 (a scan over every placed buffer per
// buffer), same placement, measured in the same run.
MemoryPlan quadraticPlan(const std::vector<BufferRequest>& requests) {
  auto alignUp = [](int64_t v) { return (v + 63) / 64 * 64; };
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].bytes != requests[b].bytes ? requests[a].bytes > requests[b].bytes : a < b;
  });
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    busy.clear();
    for (size_t p : placed) {
      const BufferRequest& q = requests[p];
      if (q.last < r.first || r.last < q.first) continue;
      busy.emplace_back(plan.offsets[p], plan.offsets[p] + alignUp(q.bytes));
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    const int64_t need = alignUp(r.bytes);
    for (const auto& [lo, hi] : busy) {
      if (offset + need <= lo) break;
      offset = std::max(offset, hi);
    }
    plan.offsets[idx] = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + need);
    placed.push_back(idx);
  }
  return plan;
}

void BM_PlanMemoryQuadraticPeer(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::vector<BufferRequest> req = chainRequests(n);
  for (auto _ : state) benchmark::DoNotOptimize(quadraticPlan(req));
  state.counters["us_per_buffer"] = benchmark::Counter(
      static_cast<double>(n) * 1e-6,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_PlanMemoryQuadraticPeer)->Arg(1000)->Arg(20000)->Unit(benchmark::kMillisecond);

// The planner alone, on the buffer requests of the same shape of graph.
void BM_PlanMemory(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::vector<BufferRequest> req = chainRequests(n);
  for (auto _ : state) benchmark::DoNotOptimize(planMemory(req));
  state.counters["us_per_buffer"] = benchmark::Counter(
      static_cast<double>(n) * 1e-6,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_PlanMemory)->Arg(1000)->Arg(20000)->Arg(100000)->Unit(benchmark::kMillisecond);

// Loading a kernel bundle of N kernels (issue 15: a 300,000-kernel bundle did not load in
// 120 s): read, parse, check the hash, parse and validate every descriptor (each is re-derived
// from its key, kernel_validate.h) and index it. The bundle holds N distinct Add kernels
// (f32[i, 4] + f32[i, 4]) and is written once per size, outside the timing. The peer in the
// same run is the same load at 1,000 kernels: us_per_kernel should stay flat.
void BM_BundleLoad(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<std::shared_ptr<const KernelSpec>> specs;
  specs.reserve(static_cast<size_t>(n));
  for (int i = 1; i <= n; ++i) {
    const TensorType t{DType::kF32, Shape{i, 4}};
    specs.push_back(compileKernelSpec(makeKernelKey(OpKind::kAdd, {t, t}, {})));
  }
  const std::string path = fmt::format("/tmp/gearbox_bundle_bench_{}_{}.json", ::getpid(), n);
  writeFileAtomic(path, serializeKernelBundle(specs, "bench"));
  specs.clear();
  for (auto _ : state) {
    BundleStore store(path);
    benchmark::DoNotOptimize(store.size());
  }
  ::unlink(path.c_str());
  state.counters["us_per_kernel"] = benchmark::Counter(
      static_cast<double>(n) * 1e-6,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_BundleLoad)->Arg(1000)->Arg(300000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gearbox

BENCHMARK_MAIN();
