// Scaled-dot-product attention, fused against unfused, in one run (the fuse-attention pass,
// docs/passes.md):
//   fused   - one Attention kernel: q, k, v [B, H, S, D] and an additive [S, S] mask in, the
//             output out; per block of query rows the scores stay in cache
//             (executor/kernels/attention.cpp);
//   unfused - the five kernels the pass replaces, as an export runs them: MatMul(q, k^T), Mul by
//             the scale, Add of the mask, Softmax, MatMul(p, v), each writing its [B, H, S, S]
//             intermediate to memory.
// B = 1, H = 4, D = 32 (the head size of a small BERT), S = 128 and 512. k^T is given to the
// unfused chain already transposed and k to the fused kernel as is: in a graph one transpose
// (the heads' split) makes either, so neither side is charged for it.
//
// Every kernel is compiled for one thread (a key with thread cap 1), so the ratio compares the
// kernels, not the thread split. FLOPs per iteration are the attention's 4 B H S^2 D (both
// sides do the same arithmetic). Ratios use the CPU time of each benchmark's fastest repetition:
// on a shared machine the wall time also counts the time other processes held the core.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <map>
#include <memory>
#include <vector>

#include "compiler/kernel_spec.h"
#include "executor/kernels.h"

namespace gearbox {
namespace {

constexpr int64_t kHeads = 4, kHeadSize = 32;
constexpr double kScale = 0.17677669529663687;  // 1 / sqrt(32)

std::shared_ptr<const KernelSpec> compileOne(OpKind kind, const std::vector<TensorType>& inputs,
                                             Attrs attrs = {}) {
  return compileKernelSpec(makeKernelKey(kind, inputs, attrs, /*threads=*/1));
}

TensorType f32(Shape s) {
  return {DType::kF32, std::move(s)};
}

struct Buffers {
  explicit Buffers(int64_t s)
      : q(randomTensor(DType::kF32, {1, kHeads, s, kHeadSize}, 1)),
        k(randomTensor(DType::kF32, {1, kHeads, s, kHeadSize}, 2)),
        kt(DType::kF32, {1, kHeads, kHeadSize, s}),
        v(randomTensor(DType::kF32, {1, kHeads, s, kHeadSize}, 3)),
        mask(DType::kF32, {s, s}),
        scale(DType::kF32, {}),
        scores(DType::kF32, {1, kHeads, s, s}),
        scaled(DType::kF32, {1, kHeads, s, s}),
        masked(DType::kF32, {1, kHeads, s, s}),
        probs(DType::kF32, {1, kHeads, s, s}),
        out(DType::kF32, {1, kHeads, s, kHeadSize}) {
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t j = 0; j < s; ++j)
        for (int64_t e = 0; e < kHeadSize; ++e)
          kt.as<float>()[(h * kHeadSize + e) * s + j] = k.as<float>()[(h * s + j) * kHeadSize + e];
    // A causal mask as the importer writes it: -10000 above the diagonal (gpt_prefill's value).
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < s; ++j) mask.as<float>()[i * s + j] = j > i ? -10000.0f : 0.0f;
    scale.as<float>()[0] = static_cast<float>(kScale);
  }
  Tensor q, k, kt, v, mask, scale, scores, scaled, masked, probs, out;
};

void setFlops(benchmark::State& state, int64_t s) {
  state.counters["FLOPS"] = benchmark::Counter(static_cast<double>(state.iterations()) * 4.0 *
                                                   kHeads * static_cast<double>(s * s) * kHeadSize,
                                               benchmark::Counter::kIsRate);
}

void fused(benchmark::State& state) {
  const int64_t s = state.range(0);
  Buffers b(s);
  Attrs attrs;
  attrs.setFloat(attr::Attention::scale, kScale);
  const auto spec = compileOne(
      OpKind::kAttention,
      {f32(b.q.shape()), f32(b.k.shape()), f32(b.v.shape()), f32(b.mask.shape())}, attrs);
  const void* in[] = {b.q.data(), b.k.data(), b.v.data(), b.mask.data()};
  for (auto _ : state) {
    kernels::run(*spec, in, b.out.data());
    benchmark::DoNotOptimize(b.out.data());
    benchmark::ClobberMemory();
  }
  setFlops(state, s);
}

void unfused(benchmark::State& state) {
  const int64_t s = state.range(0);
  Buffers b(s);
  const TensorType scores = f32(b.scores.shape());
  const auto qk = compileOne(OpKind::kMatMul, {f32(b.q.shape()), f32(b.kt.shape())});
  const auto mul = compileOne(OpKind::kMul, {scores, f32(Shape{})});
  const auto add = compileOne(OpKind::kAdd, {scores, f32(b.mask.shape())});
  const auto softmax = compileOne(OpKind::kSoftmax, {scores});
  const auto pv = compileOne(OpKind::kMatMul, {scores, f32(b.v.shape())});
  const void* qkIn[] = {b.q.data(), b.kt.data()};
  const void* mulIn[] = {b.scores.data(), b.scale.data()};
  const void* addIn[] = {b.scaled.data(), b.mask.data()};
  const void* softmaxIn[] = {b.masked.data()};
  const void* pvIn[] = {b.probs.data(), b.v.data()};
  for (auto _ : state) {
    kernels::run(*qk, qkIn, b.scores.data());
    kernels::run(*mul, mulIn, b.scaled.data());
    kernels::run(*add, addIn, b.masked.data());
    kernels::run(*softmax, softmaxIn, b.probs.data());
    kernels::run(*pv, pvIn, b.out.data());
    benchmark::DoNotOptimize(b.out.data());
    benchmark::ClobberMemory();
  }
  setFlops(state, s);
}

// Prints the console table as usual, then per S the speed ratio of the fused kernel to the
// unfused chain from the same run.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  RatioReporter() : ConsoleReporter(OO_Tabular) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.error_occurred) continue;
      double& best = best_[r.run_name.function_name + "/" + r.run_name.args];
      const double t = r.GetAdjustedCPUTime();
      if (best == 0 || t < best) best = t;
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    auto& os = GetOutputStream();
    os << fmt::format(
        "\nratios (B=1, H={}, D={}, one thread; speed = unfused CPU time / fused CPU time of the "
        "fastest repetition; > 1 means fused is faster)\n",
        kHeads, kHeadSize);
    for (int64_t s : kLengths) {
      const double f = time(fmt::format("attention/fused/{}", s)),
                   u = time(fmt::format("attention/unfused/{}", s));
      if (f <= 0 || u <= 0) continue;
      const double mib = static_cast<double>(kHeads * s * s * 4) / (1 << 20);
      os << fmt::format("  S={} (scores {:.2f} MiB per intermediate): fused/unfused {:.2f}x\n", s,
                        mib, u / f);
    }
  }
  static constexpr int64_t kLengths[] = {128, 512};

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
  for (int64_t s : RatioReporter::kLengths) {
    benchmark::RegisterBenchmark("attention/fused", gearbox::fused)->Arg(s);
    benchmark::RegisterBenchmark("attention/unfused", gearbox::unfused)->Arg(s);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
