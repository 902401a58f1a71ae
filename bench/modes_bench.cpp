// Dispatch and mode benchmarks (Google Benchmark). Every figure is meant to be read as a ratio
// to a peer measured in the same run:
//  - BM_StaticPlanDispatch vs BM_DirectKernelCalls: a 100-node graph of 1-element Adds run as a
//    compiled plan, against the same 100 precompiled kernels called in a bare loop; the
//    ns_per_op counter is the plan's per-op dispatch cost.
//  - BM_Mode/<mode>/<width>/<device>: one steady-state call (everything compiled) of the
//    four-op model; ratio to BM_Mode/static at the same width and device.
//  - BM_GearedCall vs BM_StaticCall: the same shape through a geared plan and a static plan.
//  - BM_GearCompile/<threads>: compiling 64 gears up front, serial (1 thread) vs parallel.
#include <benchmark/benchmark.h>
#include <tbb/task_arena.h>

#include <chrono>

#include "executor/kernels.h"
#include "executor/plan_runner.h"
#include "executor/session.h"
#include "graph/text.h"

namespace gearbox {
namespace {

Graph addChain(int nodes) {
  GraphBuilder b("chain");
  ValueId v = b.input("x", DType::kF32, {1});
  ValueId y = b.input("y", DType::kF32, {1});
  for (int i = 0; i < nodes; ++i) v = b.add(v, y);
  b.output(v);
  return b.build();
}

void BM_StaticPlanDispatch(benchmark::State& state) {
  const Graph g = addChain(100);
  KernelCache cache;
  auto plan = compilePlan(g, {Shape{1}, Shape{1}}, cache);
  Tensor x = randomTensor(DType::kF32, {1}, 1), y = randomTensor(DType::kF32, {1}, 2);
  Tensor out(DType::kF32, {1});
  TensorView in[2] = {x.view(), y.view()};
  TensorView ov[1] = {out.view()};
  for (auto _ : state) {
    runStaticPlan(*plan, in, ov);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["ns_per_op"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 100,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_StaticPlanDispatch);

void BM_DirectKernelCalls(benchmark::State& state) {
  // The peer: the same 100 Add kernels, precompiled, called in a bare loop with fixed
  // pointers (no plan, no pointer table).
  auto spec = compileKernelSpec(
      makeKernelKey(OpKind::kAdd, {{DType::kF32, Shape{1}}, {DType::kF32, Shape{1}}}, {}));
  Tensor a = randomTensor(DType::kF32, {1}, 1), b = randomTensor(DType::kF32, {1}, 2);
  Tensor tmp[2] = {Tensor(DType::kF32, {1}), Tensor(DType::kF32, {1})};
  for (auto _ : state) {
    const void* args[2] = {a.data(), b.data()};
    for (int i = 0; i < 100; ++i) {
      void* out = tmp[i & 1].data();
      kernels::run(*spec, args, out);
      args[0] = out;
    }
    benchmark::DoNotOptimize(tmp[0].data());
  }
  state.counters["ns_per_op"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 100,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DirectKernelCalls);

void BM_SessionStaticCall100(benchmark::State& state) {
  // The same graph through Session::run: adds the plan-cache lookup, output allocation and
  // the device launch + sync.
  Session s(addChain(100));
  std::vector<Tensor> in = {randomTensor(DType::kF32, {1}, 1), randomTensor(DType::kF32, {1}, 2)};
  s.run(in);
  for (auto _ : state) benchmark::DoNotOptimize(s.run(in));
  state.counters["ns_per_op"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 100,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_SessionStaticCall100);

// The four-op model at a given width: x[B, W] + x -> @ w[W, W] -> cat -> index_select.
Graph fourOps(int64_t width) {
  GraphBuilder b("four_ops");
  auto x = b.input("x", DType::kF32, {symbolDim("B"), width});
  auto w = b.input("w", DType::kF32, {width, width});
  auto s = b.add(x, x, "s");
  auto m = b.matmul(s, w, "m");
  auto c = b.cat({m, s}, 1, "c");
  Tensor perm(DType::kI64, {2 * width});
  for (int64_t i = 0; i < 2 * width; ++i) perm.as<int64_t>()[i] = 2 * width - 1 - i;
  b.output(b.indexSelect(c, b.constant(perm, "p"), 1, "o"));
  return b.build();
}

void BM_Mode(benchmark::State& state) {
  const Mode mode = static_cast<Mode>(state.range(0));
  const int64_t width = state.range(1);
  SessionOptions o;
  o.mode = mode;
  o.device = state.range(2) ? DeviceKind::kStream : DeviceKind::kInline;
  Session s(fourOps(width), o);
  const int64_t batch = width >= 256 ? 256 : 2;
  // Warm up: auto sees two batch sizes so the batch dim is dynamic, as in steady state.
  for (int64_t warm : {batch + 1, batch + 2, batch})
    s.run(makeInputs(s.graph(), {Shape{warm, width}, Shape{width, width}}, 1));
  auto in = makeInputs(s.graph(), {Shape{batch, width}, Shape{width, width}}, 2);
  const int64_t compiles = s.stats().graphCompiles + s.stats().kernelCompiles;
  for (auto _ : state) benchmark::DoNotOptimize(s.run(in));
  if (s.stats().graphCompiles + s.stats().kernelCompiles != compiles)
    state.SkipWithError("compiled during the timed loop");
  state.SetLabel(std::string(modeName(mode)) + "/" + deviceKindName(o.device));
}
BENCHMARK(BM_Mode)
    ->ArgNames({"mode", "width", "stream"})
    ->ArgsProduct({{static_cast<int>(Mode::kStatic), static_cast<int>(Mode::kEager),
                    static_cast<int>(Mode::kDynamic), static_cast<int>(Mode::kAuto)},
                   {4, 256},
                   {0, 1}})
    ->Unit(benchmark::kMicrosecond);

void BM_StaticCall(benchmark::State& state) {
  Session s(fourOps(64));
  auto in = makeInputs(s.graph(), {Shape{state.range(0), 64}, Shape{64, 64}}, 3);
  s.run(in);
  for (auto _ : state) benchmark::DoNotOptimize(s.run(in));
}
BENCHMARK(BM_StaticCall)->Arg(8)->Arg(64)->Unit(benchmark::kMicrosecond);

void BM_GearedCall(benchmark::State& state) {
  SessionOptions o;
  o.mode = Mode::kGeared;
  Session s(fourOps(64), o);
  s.setDimGears("x", {{0, {1, 2, 4, 8, 16, 32, 64, 128}}});
  s.compileGears();
  auto in = makeInputs(s.graph(), {Shape{state.range(0), 64}, Shape{64, 64}}, 3);
  for (auto _ : state) benchmark::DoNotOptimize(s.run(in));
}
BENCHMARK(BM_GearedCall)->Arg(8)->Arg(64)->Unit(benchmark::kMicrosecond);

void BM_GearCompile(benchmark::State& state) {
  // 64 gears (batch 1..64) of the bundled ShuffleNetV2 stage, compiled up front. Only
  // compileGears is timed: building and destroying the session is the same serial work in
  // both variants.
  const Graph g = loadGraph(std::string(GEARBOX_SOURCE_DIR) + "/examples/shufflenet_stage.gbx");
  std::vector<int64_t> batches;
  for (int64_t b = 1; b <= 64; ++b) batches.push_back(b);
  tbb::task_arena arena(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    SessionOptions o;
    o.mode = Mode::kGeared;
    Session s(g, o);
    s.setDimGears("x", {{0, batches}});
    const auto start = std::chrono::steady_clock::now();
    arena.execute([&] { s.compileGears(); });
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (s.stats().graphCompiles != 64) state.SkipWithError("expected 64 gears");
  }
  state.SetLabel(std::to_string(state.range(0)) + " thread(s)");
}
BENCHMARK(BM_GearCompile)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseManualTime();

}  // namespace
}  // namespace gearbox

BENCHMARK_MAIN();
