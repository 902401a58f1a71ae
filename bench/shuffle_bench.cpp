// ShuffleNetV2's channel shuffle after a cat, three ways, in one run:
//   fused   - one CatGather kernel reading the two halves directly (what the fusion pass makes);
//   unfused - Cat into an intermediate buffer, then IndexSelect by the permutation;
//   memcpy  - std::memcpy of the output's bytes: the roofline of a pure data movement.
// Shapes: cat of two [N, 116, 196] halves (ShuffleNetV2 1.0x stage 3, 14 x 14) for N = 1 and 8,
// and N = 96, whose 17 MB output is larger than the caches.
//
// Every variant counts the same bytes per iteration (the output read once and written once), so
// the bytes/s ratios printed at the end are speed ratios. Every kernel runs as one task (a single
// thread, like memcpy): the thread split is the compiled plan's policy, not the kernel's speed.
// Ratios use each benchmark's CPU time (as the bytes/s column does) and its fastest repetition:
// on a shared machine the wall time also counts the time other processes held the core.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "compiler/kernel_spec.h"
#include "executor/kernels.h"

namespace gearbox {
namespace {

constexpr int64_t kHalf = 116;  // channels per branch
constexpr int64_t kChannels = 2 * kHalf;
constexpr int64_t kHW = 14 * 14;

// The groups = 2 channel-shuffle permutation: range(C).reshape(2, C/2).T.flatten().
Tensor shuffleIndex() {
  Tensor t(DType::kI64, {kChannels});
  for (int64_t j = 0; j < kHalf; ++j)
    for (int64_t i = 0; i < 2; ++i) t.as<int64_t>()[j * 2 + i] = i * kHalf + j;
  return t;
}

// A static kernel for `kind` on `inputs`, forced to one task.
KernelSpec singleTask(OpKind kind, const std::vector<TensorType>& inputs, int64_t dim) {
  KernelSpec spec = *compileKernelSpec(makeKernelKey(kind, inputs, Attrs{dim}));
  spec.tasks = 1;
  return spec;
}

struct Buffers {
  explicit Buffers(int64_t n)
      : a(randomTensor(DType::kF32, {n, kHalf, kHW}, 1)),
        b(randomTensor(DType::kF32, {n, kHalf, kHW}, 2)),
        index(shuffleIndex()),
        cat(DType::kF32, {n, kChannels, kHW}),
        out(DType::kF32, {n, kChannels, kHW}) {}
  Tensor a, b, index, cat, out;
  TensorType half() const { return {DType::kF32, a.shape()}; }
  TensorType whole() const { return {DType::kF32, out.shape()}; }
  TensorType idx() const { return {DType::kI64, index.shape()}; }
};

void setBytes(benchmark::State& state, const Tensor& out) {
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(out.bytes()));
}

void fused(benchmark::State& state) {
  Buffers buf(state.range(0));
  const KernelSpec spec = singleTask(OpKind::kCatGather, {buf.half(), buf.half(), buf.idx()}, 1);
  const void* in[] = {buf.a.data(), buf.b.data(), buf.index.data()};
  for (auto _ : state) {
    kernels::run(spec, in, buf.out.data());
    benchmark::DoNotOptimize(buf.out.data());
    benchmark::ClobberMemory();
  }
  setBytes(state, buf.out);
}

void unfused(benchmark::State& state) {
  Buffers buf(state.range(0));
  const KernelSpec cat = singleTask(OpKind::kCat, {buf.half(), buf.half()}, 1);
  const KernelSpec gather = singleTask(OpKind::kIndexSelect, {buf.whole(), buf.idx()}, 1);
  const void* catIn[] = {buf.a.data(), buf.b.data()};
  const void* gatherIn[] = {buf.cat.data(), buf.index.data()};
  for (auto _ : state) {
    kernels::run(cat, catIn, buf.cat.data());
    kernels::run(gather, gatherIn, buf.out.data());
    benchmark::DoNotOptimize(buf.out.data());
    benchmark::ClobberMemory();
  }
  setBytes(state, buf.out);
}

void copy(benchmark::State& state) {
  Buffers buf(state.range(0));
  for (auto _ : state) {
    std::memcpy(buf.out.data(), buf.cat.data(), buf.out.bytes());
    benchmark::DoNotOptimize(buf.out.data());
    benchmark::ClobberMemory();
  }
  setBytes(state, buf.out);
}

// Prints the console table as usual, then fused/unfused and fused/memcpy per N from the same run.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  // Tabular without colour codes, so the output can be pasted into docs and logs as is.
  RatioReporter() : ConsoleReporter(OO_Tabular) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.error_occurred) continue;
      // Function name and argument only: repetition flags would otherwise change the key.
      double& best = best_[r.run_name.function_name + "/" + r.run_name.args];
      const double t = r.GetAdjustedCPUTime();
      if (best == 0 || t < best) best = t;
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    auto& os = GetOutputStream();
    os << "\nratios (speed, CPU time of the fastest repetition; > 1 means fused is faster)\n";
    for (int64_t n : kBatches) {
      const double f = time(fmt::format("shuffle/fused/{}", n)),
                   u = time(fmt::format("shuffle/unfused/{}", n)),
                   m = time(fmt::format("shuffle/memcpy/{}", n));
      if (f <= 0 || u <= 0 || m <= 0) continue;
      const double mib = static_cast<double>(n * kChannels * kHW * 4) / (1 << 20);
      os << fmt::format("  N={} (output {:.2f} MiB): fused/unfused {:.2f}x, fused/memcpy {:.2f}x\n",
                        n, mib, u / f, m / f);
    }
  }
  static constexpr int64_t kBatches[] = {1, 8, 96};

 private:
  double time(const std::string& name) const {
    auto it = best_.find(name);
    return it == best_.end() ? 0 : it->second;
  }
  std::map<std::string, double> best_;
};

}  // namespace
}  // namespace gearbox

int main(int argc, char** argv) {
  using gearbox::RatioReporter;
  for (int64_t n : RatioReporter::kBatches) {
    benchmark::RegisterBenchmark("shuffle/fused", gearbox::fused)->Arg(n);
    benchmark::RegisterBenchmark("shuffle/unfused", gearbox::unfused)->Arg(n);
    benchmark::RegisterBenchmark("shuffle/memcpy", gearbox::copy)->Arg(n);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
