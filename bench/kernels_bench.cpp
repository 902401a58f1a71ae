// Kernel benchmarks, each paired with its peer in the same binary and run (absolute numbers
// drift on shared machines; the ratio is the result):
//  - MatMul GFLOP/s through compileKernelSpec + kernels::run vs a direct single-threaded Eigen
//    product on row-major Maps;
//  - Add, Cat, IndexSelect, Relu and Transpose bandwidth vs std::memcpy of the same output bytes,
//  counted
//    STREAM style (bytes read + bytes written): Add reads two operands (12 B per f32 element),
//    the copies read one (8 B per f32 element), memcpy reads and writes its bytes (2 x size).
// A 1-element Add measures the dispatch floor of kernels::run.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

// GCC 12 reports false -Wmaybe-uninitialized warnings inside its AVX-512 intrinsics when they
// are inlined from Eigen's GEMM kernels.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <fmt/format.h>

#include <Eigen/Core>

#include "compiler/kernel_spec.h"
#include "executor/kernels.h"

namespace gearbox {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

// A compiled kernel plus its inputs and output, ready to run.
struct Prepared {
  std::shared_ptr<const KernelSpec> spec;
  std::vector<Tensor> inputs;
  std::vector<const void*> ptrs;
  Tensor output;

  // oneTask = true runs the same compiled kernel with its thread split removed, which separates
  // the kernel's single-thread quality from the gain of the split.
  Prepared(OpKind kind, std::vector<Tensor> ins, Attrs attrs, bool oneTask)
      : inputs(std::move(ins)) {
    std::vector<TensorType> types;
    for (const Tensor& t : inputs) {
      types.push_back({t.dtype(), t.shape()});
      ptrs.push_back(t.data());
    }
    spec = compileKernelSpec(makeKernelKey(kind, types, attrs));
    if (oneTask) {
      auto single = std::make_shared<KernelSpec>(*spec);
      single->tasks = 1;
      if (auto* mm = std::get_if<MatMulParams>(&single->params)) mm->rowsPerTask = 0;
      spec = single;
    }
    output = Tensor(spec->output.dtype, spec->output.shape);
    kernels::run(*spec, ptrs.data(), output.data());  // warm up (page faults, workspaces)
  }
  void run() { kernels::run(*spec, ptrs.data(), output.data()); }
};

void setGflops(benchmark::State& state, int64_t n) {
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * n * n * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_MatMul_Gearbox(benchmark::State& state, int64_t n, bool oneTask) {
  Prepared p(OpKind::kMatMul,
             {randomTensor(DType::kF32, {n, n}, 1), randomTensor(DType::kF32, {n, n}, 2)}, {},
             oneTask);
  for (auto _ : state) {
    p.run();
    benchmark::DoNotOptimize(p.output.data());
    benchmark::ClobberMemory();
  }
  setGflops(state, n);
  state.counters["tasks"] = p.spec->tasks;
}

void BM_MatMul_Eigen1T(benchmark::State& state, int64_t n) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Tensor a = randomTensor(DType::kF32, {n, n}, 1), b = randomTensor(DType::kF32, {n, n}, 2);
  Tensor c(DType::kF32, {n, n});
  Eigen::Map<const Mat> am(a.as<float>(), n, n), bm(b.as<float>(), n, n);
  Eigen::Map<Mat> cm(c.as<float>(), n, n);
  for (auto _ : state) {
    cm.noalias() = am * bm;
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  setGflops(state, n);
}

// Output sizes for the bandwidth benchmarks: cache-resident and memory-bound.
const int64_t kSizes[] = {1 * kMiB, 16 * kMiB};

void BM_Memcpy(benchmark::State& state, int64_t bytes) {
  const Tensor src = randomTensor(DType::kF32, {bytes / 4}, 1);
  Tensor dst(DType::kF32, {bytes / 4});
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
}

void BM_Add_Gearbox(benchmark::State& state, int64_t bytes, bool oneTask) {
  const int64_t n = bytes / 4;
  Prepared p(OpKind::kAdd, {randomTensor(DType::kF32, {n}, 1), randomTensor(DType::kF32, {n}, 2)},
             {}, oneTask);
  for (auto _ : state) {
    p.run();
    benchmark::DoNotOptimize(p.output.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * bytes);
  state.counters["tasks"] = p.spec->tasks;
}

// Row-block Cat: two [rows, 512] f32 halves side by side into [rows, 1024].
void BM_Cat_Gearbox(benchmark::State& state, int64_t bytes, bool oneTask) {
  const int64_t rows = bytes / (1024 * 4);
  Prepared p(OpKind::kCat,
             {randomTensor(DType::kF32, {rows, 512}, 1), randomTensor(DType::kF32, {rows, 512}, 2)},
             Attrs{1}, oneTask);
  for (auto _ : state) {
    p.run();
    benchmark::DoNotOptimize(p.output.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
  state.counters["tasks"] = p.spec->tasks;
}

// IndexSelect: a permutation of rows of 1024 floats along dim 0.
void BM_IndexSelect_Gearbox(benchmark::State& state, int64_t bytes, bool oneTask) {
  const int64_t rows = bytes / (1024 * 4);
  Tensor index(DType::kI64, {rows});
  // A fixed odd stride visits every row once in a scattered order.
  for (int64_t j = 0; j < rows; ++j) index.as<int64_t>()[j] = (j * 2654435761ll) % rows;
  Prepared p(OpKind::kIndexSelect, {randomTensor(DType::kF32, {rows, 1024}, 1), index}, Attrs{0},
             oneTask);
  for (auto _ : state) {
    p.run();
    benchmark::DoNotOptimize(p.output.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
  state.counters["tasks"] = p.spec->tasks;
}

// Relu over `bytes` of f32: one read, one write, like a copy.
void BM_Relu_Gearbox(benchmark::State& state, int64_t bytes, bool oneTask) {
  Prepared p(OpKind::kRelu, {randomTensor(DType::kF32, {bytes / 4}, 1)}, {}, oneTask);
  for (auto _ : state) {
    p.run();
    benchmark::DoNotOptimize(p.output.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
  state.counters["tasks"] = p.spec->tasks;
}

// Transpose [B, C, HW] -> [B, HW, C] (NCHW -> NHWC with C = 64, HW = 1024): strided reads of 4 B.
void BM_Transpose_Gearbox(benchmark::State& state, int64_t bytes, bool oneTask) {
  const int64_t b = bytes / (64 * 1024 * 4);
  Prepared p(OpKind::kTranspose, {randomTensor(DType::kF32, {b, 64, 1024}, 1)},
             Attrs{{}, {}, Shape{0, 2, 1}}, oneTask);
  for (auto _ : state) {
    p.run();
    benchmark::DoNotOptimize(p.output.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
  state.counters["tasks"] = p.spec->tasks;
}

// The dispatch floor: a 1-element Add through kernels::run (switch + variant lookup + loop).
void BM_Add_Gearbox_1Element(benchmark::State& state) {
  Prepared p(OpKind::kAdd, {randomTensor(DType::kF32, {1}, 1), randomTensor(DType::kF32, {1}, 2)},
             {}, false);
  for (auto _ : state) {
    p.run();
    benchmark::ClobberMemory();
  }
}

// Registers every benchmark under a readable name (BM_MatMul_Gearbox/256, BM_Add_Gearbox/16MiB),
// each kernel next to its peer. Real time, not CPU time: the Gearbox kernels may run on oneTBB
// worker threads, whose CPU time the calling thread's clock would not see.
bool registerAll() {
  using PeerFn = void (*)(benchmark::State&, int64_t);
  using KernelFn = void (*)(benchmark::State&, int64_t, bool);
  auto peer = [](std::string name, PeerFn fn, int64_t arg) {
    benchmark::RegisterBenchmark(name.c_str(), [fn, arg](benchmark::State& st) {
      fn(st, arg);
    })->UseRealTime();
  };
  // Each Gearbox kernel twice: as compiled (BM_X_Gearbox) and forced to one task
  // (BM_X_Gearbox1T).
  auto kernel = [](const std::string& op, const std::string& arg, KernelFn fn, int64_t value) {
    for (bool oneTask : {false, true}) {
      const std::string name = fmt::format("BM_{}_Gearbox{}/{}", op, oneTask ? "1T" : "", arg);
      benchmark::RegisterBenchmark(name.c_str(), [fn, value, oneTask](benchmark::State& st) {
        fn(st, value, oneTask);
      })->UseRealTime();
    }
  };
  for (int64_t n : {64, 256, 1024}) {
    kernel("MatMul", std::to_string(n), BM_MatMul_Gearbox, n);
    peer(fmt::format("BM_MatMul_Eigen1T/{}", n), BM_MatMul_Eigen1T, n);
  }
  for (int64_t bytes : kSizes) {
    const std::string size = std::to_string(bytes / kMiB) + "MiB";
    peer("BM_Memcpy/" + size, BM_Memcpy, bytes);
    kernel("Add", size, BM_Add_Gearbox, bytes);
    kernel("Cat", size, BM_Cat_Gearbox, bytes);
    kernel("IndexSelect", size, BM_IndexSelect_Gearbox, bytes);
    kernel("Relu", size, BM_Relu_Gearbox, bytes);
    kernel("Transpose", size, BM_Transpose_Gearbox, bytes);
  }
  benchmark::RegisterBenchmark("BM_Add_Gearbox_1Element", BM_Add_Gearbox_1Element);
  return true;
}
[[maybe_unused]] const bool kRegistered = registerAll();

}  // namespace
}  // namespace gearbox

BENCHMARK_MAIN();
