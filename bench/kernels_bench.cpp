// Kernel benchmarks, each paired with its peer in the same binary and run (absolute numbers
// drift on shared machines; the ratio is the result, printed in a table at the end):
//  - MatMul GFLOP/s through compileKernelSpec + kernels::run at n = 64, 256, 1024 (square) and
//    M = 1, 8, 64 with K = N = 1024, on the ISA the CPU has (compiler/cpu_isa.h) and forced to
//    the baseline, vs oneDNN's and OpenBLAS's sgemm (bench-only peers, found optionally by CMake)
//    at 1 thread and at their default thread count, and vs a direct single-threaded Eigen
//    product on row-major Maps;
//  - Conv2d GFLOP/s on ResNet-18's and MobileNetV2's layer shapes (batch 1, with bias) vs
//    oneDNN's convolution primitive, free to pick its own layouts (blocked activations, weights
//    reordered once, outside the timing, as a runtime does at load): the kernel against the
//    kernel, at 1 thread and at the default count;
//  - the compile step of one kernel spec (compileKernelSpec), per op: part of what users compare;
//  - Add, Cat, IndexSelect, Relu and Transpose bandwidth vs std::memcpy of the same output bytes,
//    counted STREAM style (bytes read + bytes written): Add reads two operands (12 B per f32
//    element), the copies read one (8 B per f32 element), memcpy reads and writes its bytes
//    (2 x size).
// A 1-element Add measures the dispatch floor of kernels::run.
#include <benchmark/benchmark.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

// GCC 12 reports false -Wmaybe-uninitialized warnings inside its AVX-512 intrinsics when they
// are inlined from Eigen's GEMM kernels.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <fmt/format.h>

#include <Eigen/Core>

#if GEARBOX_BENCH_ONEDNN
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <oneapi/dnnl/dnnl.hpp>
#endif
#if GEARBOX_BENCH_OPENBLAS
#include <cblas.h>
#endif

#include "compiler/cpu_isa.h"
#include "compiler/kernel_spec.h"
#include "compiler/weight_pack.h"
#include "executor/kernels.h"
#include "executor/transpose_stream.h"
#include "graph/large_buffer.h"

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
    KernelKey key = makeKernelKey(kind, types, attrs);
    spec = compileKernelSpec(key);
    if (oneTask && std::holds_alternative<ConvParams>(spec->params)) {
      // A conv compiled for several tasks splits its output channels (ConvParams::mSplit) or,
      // on AVX2, its positions (colBlock) where it has few positions, and its im2col path then
      // packs the same patches once per split: on one task, the compile for one thread, as a
      // one-thread plan has it. With the split kept, ResNet-18's 7 x 7 layer on the im2col path
      // (forced to AVX2) read 3.8-3.9 ms on one task for 2.5-2.6.
      key.threads = 1;
      spec = compileKernelSpec(key);
    }
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

  // Binds input 1 (MatMul's B) packed in strips as a static plan binds a constant B
  // (compiler/weight_pack.h): false, and nothing changed, where the plan keeps B in place.
  bool packMatMulB() {
    const std::shared_ptr<const KernelSpec> forStrips = matMulSpecForStrips(spec);
    const auto& mm = std::get<MatMulParams>(forStrips->params);
    const int64_t width = matMulStripWidth(mm);
    if (width == 0) return false;
    const auto bytes = static_cast<size_t>(matMulPackedBFloats(mm.k, mm.n, width)) * sizeof(float);
    // As the plan's pack (weight_pack.cpp): in huge pages from 2 MiB (graph/large_buffer.h).
    packedB.reset(static_cast<float*>(allocateLargeBuffer((bytes + 63) / 64 * 64)));
    gearbox::packMatMulB(inputs[1].as<const float>(), mm.k, mm.n, width, packedB.get());
    auto packed = std::make_shared<KernelSpec>(*forStrips);
    std::get<MatMulParams>(packed->params).bPacked = width;
    spec = packed;
    ptrs[1] = packedB.get();
    run();  // warm up
    return true;
  }
  struct Free {
    void operator()(float* f) const { std::free(f); }
  };
  std::unique_ptr<float, Free> packedB;
};

// A GEMM shape of the goals: square n x n x n, or M rows against a K = N = 1024 weight;
// and the MLP's layers at batch 32.
struct GemmShape {
  std::string label;
  int64_t m, n, k;
};

const std::vector<GemmShape>& gemmShapes() {
  static const std::vector<GemmShape> shapes = {
      {"n64", 64, 64, 64},
      {"n256", 256, 256, 256},
      {"n1024", 1024, 1024, 1024},
      {"m1_k1024_n1024", 1, 1024, 1024},
      {"m2_k1024_n1024", 2, 1024, 1024},
      {"m3_k1024_n1024", 3, 1024, 1024},
      {"m4_k1024_n1024", 4, 1024, 1024},
      {"m8_k1024_n1024", 8, 1024, 1024},
      {"m64_k1024_n1024", 64, 1024, 1024},
      {"m16_k1024_n1024", 16, 1024, 1024},
      {"m128_k1024_n1024", 128, 1024, 1024},
      // The peers' MLP (bench/peers/models.py) at batch 32: its two Linear layers.
      {"m32_k1024_n1024", 32, 1024, 1024},
      {"m32_k1024_n256", 32, 256, 1024},
  };
  return shapes;
}

void setGflops(benchmark::State& state, const GemmShape& s) {
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * s.m * s.n * s.k * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

// gearbox's MatMul, compiled and run under `isa` (nullopt: the ISA this CPU runs).
// packB: B packed in strips as a static plan packs a constant B (BM_MatMul_GearboxPackedB).
void BM_MatMul_Gearbox(benchmark::State& state, const GemmShape& s, bool oneTask,
                       std::optional<Isa> isa, bool packB = false) {
  std::optional<ScopedIsaOverride> forced;
  if (isa) forced.emplace(*isa);
  Prepared p(OpKind::kMatMul,
             {randomTensor(DType::kF32, {s.m, s.k}, 1), randomTensor(DType::kF32, {s.k, s.n}, 2)},
             {}, oneTask);
  if (packB && !p.packMatMulB()) {
    state.SkipWithError("a plan keeps this B in place");
    return;
  }
  for (auto _ : state) {
    p.run();
    benchmark::DoNotOptimize(p.output.data());
    benchmark::ClobberMemory();
  }
  setGflops(state, s);
  state.counters["tasks"] = p.spec->tasks;
  const auto& mm = std::get<MatMulParams>(p.spec->params);
  state.SetLabel(fmt::format("{} {}", isaName(mm.isa), gemmPathName(mm.gemm.path)));
}

void BM_MatMul_Eigen1T(benchmark::State& state, const GemmShape& s) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Tensor a = randomTensor(DType::kF32, {s.m, s.k}, 1);
  const Tensor b = randomTensor(DType::kF32, {s.k, s.n}, 2);
  Tensor c(DType::kF32, {s.m, s.n});
  Eigen::Map<const Mat> am(a.as<float>(), s.m, s.k), bm(b.as<float>(), s.k, s.n);
  Eigen::Map<Mat> cm(c.as<float>(), s.m, s.n);
  for (auto _ : state) {
    cm.noalias() = am * bm;
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  setGflops(state, s);
}

// A linear layer's epilogue (fuse-matmul-epilogue), one task: the fused MatMul (bias, then the
// residual or a ReLU, in the GEMM's blocks) against the unfused kernels a plan ran before it
// (MatMul, the bias Add, then the Add of the residual or the Relu), on the encoder's linear1
// (ReLU) and linear2 (residual) at batch 32, and the MLP's layer at batch 1. GFLOPS counts the
// product's 2 M N K only, so the two variants' figures compare directly.
struct LinearShape {
  std::string label;
  int64_t m, n, k;
  bool residual;
};

void BM_Linear(benchmark::State& state, const LinearShape& s, bool fused) {
  const Tensor a = randomTensor(DType::kF32, {s.m, s.k}, 1);
  const Tensor w = randomTensor(DType::kF32, {s.k, s.n}, 2);
  const Tensor bias = randomTensor(DType::kF32, {s.n}, 3);
  const Tensor res = randomTensor(DType::kF32, {s.m, s.n}, 4);
  if (fused) {
    Attrs attrs;
    if (!s.residual) attrs.setFloat(attr::MatMul::act_min, 0.0);
    std::vector<Tensor> ins = {a, w, bias};
    if (s.residual) ins.push_back(res);
    Prepared p(OpKind::kMatMul, std::move(ins), attrs, true);
    for (auto _ : state) {
      p.run();
      benchmark::DoNotOptimize(p.output.data());
      benchmark::ClobberMemory();
    }
  } else {
    Prepared mm(OpKind::kMatMul, {a, w}, {}, true);
    Prepared add(OpKind::kAdd, {mm.output, bias}, {}, true);
    std::optional<Prepared> last;
    if (s.residual) {
      last.emplace(OpKind::kAdd, std::vector<Tensor>{add.output, res}, Attrs{}, true);
    } else {
      last.emplace(OpKind::kRelu, std::vector<Tensor>{add.output}, Attrs{}, true);
    }
    for (auto _ : state) {
      mm.run();
      add.run();
      last->run();
      benchmark::DoNotOptimize(last->output.data());
      benchmark::ClobberMemory();
    }
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * s.m * s.n * s.k * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

// The peers' default thread count: what each library uses when the user sets nothing.
[[maybe_unused]] int defaultThreads() {
  return std::max(1, tbb::this_task_arena::max_concurrency());
}

#if GEARBOX_BENCH_ONEDNN
// oneDNN's dnnl_sgemm (row-major, C = A B) on `threads` OpenMP threads (0: its default).
void BM_Sgemm_OneDNN(benchmark::State& state, const GemmShape& s, int threads) {
  omp_set_num_threads(threads > 0 ? threads : defaultThreads());
  const Tensor a = randomTensor(DType::kF32, {s.m, s.k}, 1);
  const Tensor b = randomTensor(DType::kF32, {s.k, s.n}, 2);
  Tensor c(DType::kF32, {s.m, s.n});
  auto call = [&] {
    return dnnl_sgemm('N', 'N', s.m, s.n, s.k, 1.0f, a.as<float>(), s.k, b.as<float>(), s.n, 0.0f,
                      c.as<float>(), s.n);
  };
  if (call() != dnnl_success) {
    state.SkipWithError("dnnl_sgemm failed");
    return;
  }
  for (auto _ : state) {
    call();
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  setGflops(state, s);
}
#endif

#if GEARBOX_BENCH_OPENBLAS
// OpenBLAS's cblas_sgemm (row-major) on `threads` threads (0: its default).
void BM_Sgemm_OpenBLAS(benchmark::State& state, const GemmShape& s, int threads) {
  openblas_set_num_threads(threads > 0 ? threads : defaultThreads());
  const Tensor a = randomTensor(DType::kF32, {s.m, s.k}, 1);
  const Tensor b = randomTensor(DType::kF32, {s.k, s.n}, 2);
  Tensor c(DType::kF32, {s.m, s.n});
  auto call = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, a.as<float>(), s.k,
                b.as<float>(), s.n, 0.0f, c.as<float>(), s.n);
  };
  call();
  for (auto _ : state) {
    call();
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  setGflops(state, s);
}
#endif

// A convolution layer of the goals: NCHW input [n, c, h, w], m square k x k filters.
struct ConvShape {
  std::string label;
  int64_t n, c, h, w, m, k, stride, pad, group;
  int64_t out(int64_t size) const { return (size + 2 * pad - k) / stride + 1; }
  double flops() const {
    return 2.0 * static_cast<double>(n * m * out(h) * out(w)) * static_cast<double>(c / group) *
           static_cast<double>(k * k);
  }
};

const std::vector<ConvShape>& convShapes() {
  static const std::vector<ConvShape> shapes = {
      {"r18_conv1_7x7s2", 1, 3, 224, 224, 64, 7, 2, 3, 1},
      {"r18_l1_3x3_64", 1, 64, 56, 56, 64, 3, 1, 1, 1},
      {"r18_l2_3x3s2_128", 1, 64, 56, 56, 128, 3, 2, 1, 1},
      {"r18_l2_down_1x1s2", 1, 64, 56, 56, 128, 1, 2, 0, 1},
      {"r18_l2_3x3_128", 1, 128, 28, 28, 128, 3, 1, 1, 1},
      {"r18_l3_3x3_256", 1, 256, 14, 14, 256, 3, 1, 1, 1},
      {"r18_l4_3x3_512", 1, 512, 7, 7, 512, 3, 1, 1, 1},
      {"mv2_stem_3x3s2", 1, 3, 224, 224, 32, 3, 2, 1, 1},
      {"mv2_expand_1x1_24_144", 1, 24, 56, 56, 144, 1, 1, 0, 1},
      {"mv2_dw_3x3_144", 1, 144, 56, 56, 144, 3, 1, 1, 144},
      {"mv2_dw_3x3s2_144", 1, 144, 56, 56, 144, 3, 2, 1, 144},
      {"mv2_project_1x1_144_32", 1, 144, 28, 28, 32, 1, 1, 0, 1},
      {"mv2_dw_3x3_960", 1, 960, 7, 7, 960, 3, 1, 1, 960},
      {"mv2_last_1x1_320_1280", 1, 320, 7, 7, 1280, 1, 1, 0, 1},
      {"mv2_expand_64_384_14x14", 1, 64, 14, 14, 384, 1, 1, 0, 1},
      {"mv2_project_576_96_14x14", 1, 576, 14, 14, 96, 1, 1, 0, 1},
      {"mv2_expand_160_960_7x7", 1, 160, 7, 7, 960, 1, 1, 0, 1},
      {"mv2_expand_32_192_28x28", 1, 32, 28, 28, 192, 1, 1, 0, 1},
      {"mv2_dw_3x3_32_112x112", 1, 32, 112, 112, 32, 3, 1, 1, 32},
      {"mv2_dw_3x3_192_28", 1, 192, 28, 28, 192, 3, 1, 1, 192},
      {"mv2_dw_3x3_384_14", 1, 384, 14, 14, 384, 3, 1, 1, 384},
      {"mv2_dw_3x3s2_96_112", 1, 96, 112, 112, 96, 3, 2, 1, 96},
      {"mv2_dw_3x3s2_192_28", 1, 192, 28, 28, 192, 3, 2, 1, 192},
      {"mv2_dw_3x3s2_576_14", 1, 576, 14, 14, 576, 3, 2, 1, 576},
  };
  return shapes;
}

// How a static plan holds a layer's tensors in MobileNetV2 (compiler.cpp's blockActivations).
// On AVX-512 a depthwise layer reads and writes channel blocks, its stem and expanding 1x1s write
// them and its projecting 1x1s read them, on the channel-tile path. On AVX2 a depthwise layer
// reads and writes them on the channel-block path (a wide one switched to it by the plan), the
// expanding 1x1 before it writing them from its GEMM tiles (convItemToBlocks) and the projecting
// 1x1 after it reading them (convItemFromBlocks); the 112 x 112 x 32 layer, which the 3 x 3 stem
// feeds, stays planes. kPlanar: NCHW.
enum class ConvLayout { kPlanar, kAsInPlan };

bool writesBlocksInPlan(const ConvShape& s) {
  return (s.label.find("expand") != std::string::npos ||
          s.label.find("mv2_stem") != std::string::npos) &&
         s.m % 16 == 0;
}

// Whether the plan blocks this layer's tensors (the layer kinds above).
bool blockedInPlan(const ConvShape& s) {
  const bool dw = s.group == s.c && s.group == s.m && s.k == 3 && s.c % 16 == 0;
  const bool project = s.label.find("project") != std::string::npos && s.c % 16 == 0;
  if (activeIsa() == Isa::kAvx2)
    return (dw && s.label != "mv2_dw_3x3_32_112x112") || project ||
           (s.label.find("expand") != std::string::npos && s.m % 16 == 0);
  return activeIsa() == Isa::kAvx512 && (dw || project || writesBlocksInPlan(s));
}

void BM_Conv2d_Gearbox(benchmark::State& state, const ConvShape& s, bool oneTask,
                       ConvLayout layout = ConvLayout::kPlanar) {
  Attrs attrs;
  attrs.setInts(attr::Conv2d::strides, {s.stride, s.stride});
  attrs.setInts(attr::Conv2d::pads, {s.pad, s.pad, s.pad, s.pad});
  attrs.setInts(attr::Conv2d::dilations, {1, 1});
  attrs.setInt(attr::Conv2d::group, s.group);
  Prepared p(OpKind::kConv2d,
             {randomTensor(DType::kF32, {s.n, s.c, s.h, s.w}, 1),
              randomTensor(DType::kF32, {s.m, s.c / s.group, s.k, s.k}, 2),
              randomTensor(DType::kF32, {s.m}, 3)},
             attrs, oneTask);
  // As a static plan runs it: where the compile step chose the channel-tile path, the weight
  // (a constant in a model) is packed once, outside the timed loop, as the plan packs it.
  // 64-byte aligned, as compiler/weight_pack.cpp allocates it: a 16-lane load of a vector's
  // default alignment (16 bytes) would straddle two cache lines.
  std::unique_ptr<float, decltype(&std::free)> packed(nullptr, &std::free);
  if (layout == ConvLayout::kAsInPlan) {
    auto spec = std::make_shared<KernelSpec>(*p.spec);
    auto& bp = std::get<ConvParams>(spec->params);
    if (bp.channelBlocks || (activeIsa() == Isa::kAvx2 && convDepthwiseBlocksFit(bp))) {
      bp.channelBlocks = 1;  // on AVX2 a wide layer's, switched by the plan
      bp.inBlocked = 1;
      bp.outBlocked = 1;
    } else if (activeIsa() == Isa::kAvx2) {
      // An expanding 1x1 writes blocks, a projecting one reads them; its weight packed below.
      (writesBlocksInPlan(s) ? bp.outBlocked : bp.inBlocked) = 1;
    } else {
      bp.channelTiles = 1;
      bp.winograd = 0;  // a plan never blocks a Winograd conv's values
      (writesBlocksInPlan(s) ? bp.outBlocked : bp.inBlocked) = 1;
    }
    p.spec = spec;
  }
  const auto& cp = std::get<ConvParams>(p.spec->params);
  // A plan packs a depthwise conv's constant taps too (9 vectors per 16 channels), whatever the
  // layout of its values (compiler.cpp: on AVX2 they stay in planes).
  const bool packTaps = cp.channelBlocks != 0;
  const bool blocksFromGemm =
      (cp.outBlocked || cp.inBlocked) && !cp.channelTiles && !cp.channelBlocks;
  if ((cp.channelTiles && !std::getenv("GEARBOX_BENCH_CONV_IM2COL")) || packTaps ||
      blocksFromGemm) {
    const size_t bytes = (static_cast<size_t>(convPackedWeightFloats(cp)) * 4 + 63) / 64 * 64;
    packed.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    if (!packed) throw std::bad_alloc();
    packConvWeights(cp, p.inputs[1].as<const float>(), packed.get());
    auto spec = std::make_shared<KernelSpec>(*p.spec);
    std::get<ConvParams>(spec->params).weightsPacked = 1;
    p.spec = spec;
    p.ptrs[1] = packed.get();
  }
  const auto& run = std::get<ConvParams>(p.spec->params);
  state.SetLabel(fmt::format("{}{}{}",
                             run.weightsPacked ? (run.channelBlocks  ? "packed taps"
                                                  : run.winograd     ? "winograd"
                                                  : run.channelTiles ? "channel tiles"
                                                                     : "gemm tiles")
                                               : "",
                             run.inBlocked ? " in nChw16c" : "",
                             run.outBlocked ? " out nChw16c" : ""));
  for (auto _ : state) {
    p.run();
    benchmark::DoNotOptimize(p.output.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(s.flops() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tasks"] = p.spec->tasks;
}

#if GEARBOX_BENCH_ONEDNN
// oneDNN's convolution primitive (forward inference, direct or whatever its dispatcher picks for
// format_tag::any) on `threads` OpenMP threads (0: its default).
void BM_Conv_OneDNN(benchmark::State& state, const ConvShape& s, int threads) {
  omp_set_num_threads(threads > 0 ? threads : defaultThreads());
  using dnnl::memory;
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(eng);
  const memory::dims src{s.n, s.c, s.h, s.w}, dst{s.n, s.m, s.out(s.h), s.out(s.w)};
  const memory::dims wei = s.group > 1
                               ? memory::dims{s.group, s.m / s.group, s.c / s.group, s.k, s.k}
                               : memory::dims{s.m, s.c, s.k, s.k};
  const memory::desc anySrc(src, f32, tag::any), anyWei(wei, f32, tag::any),
      bias({s.m}, f32, tag::x), anyDst(dst, f32, tag::any);
  const dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, anySrc, anyWei, bias,
      anyDst, {s.stride, s.stride}, {s.pad, s.pad}, {s.pad, s.pad});
  const dnnl::convolution_forward::primitive_desc pd(desc, eng);
  // The weights in the primitive's layout, reordered once from the plain one (not timed).
  const Tensor plainW = randomTensor(DType::kF32, {s.m, s.c / s.group, s.k, s.k}, 2);
  memory plainWeights({wei, f32, s.group > 1 ? tag::goihw : tag::oihw}, eng,
                      const_cast<float*>(plainW.as<float>()));
  memory weights(pd.weights_desc(), eng);
  dnnl::reorder(plainWeights, weights).execute(stream, plainWeights, weights);
  memory srcMem(pd.src_desc(), eng), dstMem(pd.dst_desc(), eng), biasMem(bias, eng);
  for (memory* m : {&srcMem, &biasMem}) {
    float* d = static_cast<float*>(m->get_data_handle());
    const size_t count = m->get_desc().get_size() / sizeof(float);
    for (size_t i = 0; i < count; ++i) d[i] = static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f;
  }
  dnnl::convolution_forward conv(pd);
  const std::unordered_map<int, memory> args{{DNNL_ARG_SRC, srcMem},
                                             {DNNL_ARG_WEIGHTS, weights},
                                             {DNNL_ARG_BIAS, biasMem},
                                             {DNNL_ARG_DST, dstMem}};
  conv.execute(stream, args);
  stream.wait();
  for (auto _ : state) {
    conv.execute(stream, args);
    stream.wait();
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(s.flops() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(pd.impl_info_str());
}
#endif

// The compile step of one kernel spec: every per-shape decision (paths, blocking, the thread
// split), what a user pays once per new shape.
void BM_CompileKernelSpec(benchmark::State& state, OpKind kind, std::vector<TensorType> inputs,
                          Attrs attrs) {
  const KernelKey key = makeKernelKey(kind, inputs, attrs);
  for (auto _ : state) benchmark::DoNotOptimize(compileKernelSpec(key));
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

// The same transpose on one task with plain stores at every size (the kernel streams outputs
// of a quarter of the last-level cache and more): what the streaming stores gain, same run.
void BM_Transpose_GearboxPlain1T(benchmark::State& state, int64_t bytes) {
  kernels::ScopedTransposeStreamThreshold plain(INT64_MAX);
  BM_Transpose_Gearbox(state, bytes, true);
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
  for (const GemmShape& g : gemmShapes()) {
    for (bool oneTask : {false, true}) {
      const std::string name = fmt::format("BM_MatMul_Gearbox{}/{}", oneTask ? "1T" : "", g.label);
      benchmark::RegisterBenchmark(name.c_str(), [g, oneTask](benchmark::State& st) {
        BM_MatMul_Gearbox(st, g, oneTask, std::nullopt);
      })->UseRealTime();
    }
    // As a static plan runs it where B is a constant it packs (a weight): only those shapes,
    // decided on the spec for this machine's threads (the 1T variant keeps its column split,
    // but for 1 and 2 rows on AVX-512, compiled to the skinny path: their direct spec is split
    // for the one task, as a one-thread plan's would be).
    const KernelKey key = makeKernelKey(
        OpKind::kMatMul, {{DType::kF32, Shape{g.m, g.k}}, {DType::kF32, Shape{g.k, g.n}}}, {});
    const std::shared_ptr<const KernelSpec> spec = matMulSpecForStrips(compileKernelSpec(key));
    if (const auto* mm = std::get_if<MatMulParams>(&spec->params); mm && matMulStripWidth(*mm))
      for (bool oneTask : {false, true}) {
        const std::string name =
            fmt::format("BM_MatMul_GearboxPackedB{}/{}", oneTask ? "1T" : "", g.label);
        benchmark::RegisterBenchmark(name.c_str(), [g, oneTask](benchmark::State& st) {
          BM_MatMul_Gearbox(st, g, oneTask, std::nullopt, true);
        })->UseRealTime();
      }
    // The same kernel on the baseline ISA (GEARBOX_ISA=baseline), in the same run.
    benchmark::RegisterBenchmark(
        ("BM_MatMul_GearboxBaseline1T/" + g.label).c_str(),
        [g](benchmark::State& st) { BM_MatMul_Gearbox(st, g, true, Isa::kBaseline); })
        ->UseRealTime();
#if GEARBOX_BENCH_ONEDNN
    for (int threads : {0, 1}) {
      const std::string name = fmt::format("BM_Sgemm_OneDNN{}/{}", threads ? "1T" : "", g.label);
      benchmark::RegisterBenchmark(name.c_str(), [g, threads](benchmark::State& st) {
        BM_Sgemm_OneDNN(st, g, threads);
      })->UseRealTime();
    }
#endif
#if GEARBOX_BENCH_OPENBLAS
    for (int threads : {0, 1}) {
      const std::string name = fmt::format("BM_Sgemm_OpenBLAS{}/{}", threads ? "1T" : "", g.label);
      benchmark::RegisterBenchmark(name.c_str(), [g, threads](benchmark::State& st) {
        BM_Sgemm_OpenBLAS(st, g, threads);
      })->UseRealTime();
    }
#endif
    benchmark::RegisterBenchmark(("BM_MatMul_Eigen1T/" + g.label).c_str(),
                                 [g](benchmark::State& st) { BM_MatMul_Eigen1T(st, g); })
        ->UseRealTime();
  }
  for (const ConvShape& c : convShapes()) {
    for (bool oneTask : {false, true}) {
      const std::string name = fmt::format("BM_Conv2d_Gearbox{}/{}", oneTask ? "1T" : "", c.label);
      benchmark::RegisterBenchmark(name.c_str(), [c, oneTask](benchmark::State& st) {
        BM_Conv2d_Gearbox(st, c, oneTask);
      })->UseRealTime();
    }
    if (blockedInPlan(c))
      for (bool oneTask : {false, true}) {
        const std::string name =
            fmt::format("BM_Conv2d_GearboxBlocked{}/{}", oneTask ? "1T" : "", c.label);
        benchmark::RegisterBenchmark(name.c_str(), [c, oneTask](benchmark::State& st) {
          BM_Conv2d_Gearbox(st, c, oneTask, ConvLayout::kAsInPlan);
        })->UseRealTime();
      }
#if GEARBOX_BENCH_ONEDNN
    for (int threads : {0, 1}) {
      const std::string name = fmt::format("BM_Conv_OneDNN{}/{}", threads ? "1T" : "", c.label);
      benchmark::RegisterBenchmark(name.c_str(), [c, threads](benchmark::State& st) {
        BM_Conv_OneDNN(st, c, threads);
      })->UseRealTime();
    }
#endif
  }
  for (const LinearShape& l : {LinearShape{"enc_linear1_relu", 4096, 1024, 256, false},
                               LinearShape{"enc_linear2_residual", 4096, 256, 1024, true},
                               LinearShape{"mlp_b1_relu", 1, 1024, 1024, false}})
    for (bool fused : {true, false})
      benchmark::RegisterBenchmark(
          fmt::format("BM_Linear_{}1T/{}", fused ? "Fused" : "Unfused", l.label).c_str(),
          [l, fused](benchmark::State& st) { BM_Linear(st, l, fused); })
          ->UseRealTime();
  // Compile time per kernel spec, for the shapes measured here.
  auto compile = [](const std::string& label, OpKind kind, std::vector<TensorType> ins, Attrs a) {
    benchmark::RegisterBenchmark(
        ("BM_CompileKernelSpec/" + label).c_str(),
        [kind, ins, a](benchmark::State& st) { BM_CompileKernelSpec(st, kind, ins, a); });
  };
  const auto f32 = [](Shape s) { return TensorType{DType::kF32, s}; };
  compile("MatMul_n1024", OpKind::kMatMul, {f32({1024, 1024}), f32({1024, 1024})}, {});
  compile("MatMul_m8_k1024_n1024", OpKind::kMatMul, {f32({8, 1024}), f32({1024, 1024})}, {});
  compile("MatMul_batch12_128x64x128", OpKind::kMatMul, {f32({12, 128, 64}), f32({12, 64, 128})},
          {});
  compile("Add_16MiB", OpKind::kAdd, {f32({4 * kMiB}), f32({4 * kMiB})}, {});
  compile("Add_row_broadcast", OpKind::kAdd, {f32({64, 1024}), f32({1024})}, {});
  compile("Transpose_64x1024", OpKind::kTranspose, {f32({4, 64, 1024})},
          Attrs{{}, {}, Shape{0, 2, 1}});
  compile("Relu_1MiB", OpKind::kRelu, {f32({kMiB / 4})}, {});
  for (int64_t bytes : kSizes) {
    const std::string size = std::to_string(bytes / kMiB) + "MiB";
    peer("BM_Memcpy/" + size, BM_Memcpy, bytes);
    kernel("Add", size, BM_Add_Gearbox, bytes);
    kernel("Cat", size, BM_Cat_Gearbox, bytes);
    kernel("IndexSelect", size, BM_IndexSelect_Gearbox, bytes);
    kernel("Relu", size, BM_Relu_Gearbox, bytes);
    kernel("Transpose", size, BM_Transpose_Gearbox, bytes);
    peer("BM_Transpose_GearboxPlain1T/" + size, BM_Transpose_GearboxPlain1T, bytes);
  }
  benchmark::RegisterBenchmark("BM_Add_Gearbox_1Element", BM_Add_Gearbox_1Element);
  return true;
}
[[maybe_unused]] const bool kRegistered = registerAll();

// Prints what the console shows and keeps each benchmark's figure (the median when repetitions
// are aggregated, else the single run): GFLOPS for GEMMs, bytes per second otherwise. The ratios
// of the goals are printed from them after the run.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (r.run_type == Run::RT_Aggregate && !median) continue;
      std::string name = r.run_name.str();
      if (const size_t at = name.find("/real_time"); at != std::string::npos) name.erase(at);
      double v = 0;
      if (auto it = r.counters.find("GFLOPS"); it != r.counters.end()) {
        v = it->second.value;
      } else if (auto bytes = r.counters.find("bytes_per_second"); bytes != r.counters.end()) {
        v = bytes->second.value;
      } else {
        continue;
      }
      // A median replaces the repetitions' single values.
      if (median || !medians_.count(name)) values_[name] = v;
      if (median) medians_.insert(name);
    }
    ConsoleReporter::ReportRuns(runs);
  }

  void printRatios(std::ostream& os) const {
    auto get = [&](const std::string& n) -> double {
      auto it = values_.find(n);
      return it == values_.end() ? 0.0 : it->second;
    };
    os << "\nMatMul vs the best sgemm peer measured in this run (GFLOP/s; ratio = gearbox / best "
          "peer):\n";
    os << fmt::format("{:<18} {:>7} {:>9} {:>8} {:>9} {:>7} {:>9}\n", "shape", "threads", "gearbox",
                      "oneDNN", "OpenBLAS", "ratio", "baseline");
    for (const GemmShape& g : gemmShapes()) {
      for (bool one : {true, false}) {
        const std::string t = one ? "1T" : "";
        const double gb = get(fmt::format("BM_MatMul_Gearbox{}/{}", t, g.label));
        const double dnnl = get(fmt::format("BM_Sgemm_OneDNN{}/{}", t, g.label));
        const double blas = get(fmt::format("BM_Sgemm_OpenBLAS{}/{}", t, g.label));
        const double best = std::max(dnnl, blas);
        const double base = one ? get("BM_MatMul_GearboxBaseline1T/" + g.label) : 0.0;
        if (gb == 0) continue;
        os << fmt::format(
            "{:<18} {:>7} {:>9.1f} {:>8} {:>9} {:>7} {:>9}\n", g.label, one ? "1" : "default", gb,
            dnnl ? fmt::format("{:.1f}", dnnl) : "-", blas ? fmt::format("{:.1f}", blas) : "-",
            best ? fmt::format("{:.2f}", gb / best) : "-", base ? fmt::format("{:.1f}", base) : "");
        if (const double pk = get(fmt::format("BM_MatMul_GearboxPackedB{}/{}", t, g.label)); pk)
          os << fmt::format("{:<18} {:>7} {:>9.1f} {:>8} {:>9} {:>7}\n", "  B packed (plan)",
                            one ? "1" : "default", pk, "", "",
                            best ? fmt::format("{:.2f}", pk / best) : "-");
      }
    }
    os << "\nConv2d vs oneDNN's convolution primitive in this run (GFLOP/s; ratio = gearbox / "
          "oneDNN):\n";
    os << fmt::format("{:<24} {:>7} {:>9} {:>8} {:>7}\n", "layer", "threads", "gearbox", "oneDNN",
                      "ratio");
    for (const ConvShape& c : convShapes()) {
      for (bool one : {true, false}) {
        const std::string t = one ? "1T" : "";
        const double gb = get(fmt::format("BM_Conv2d_Gearbox{}/{}", t, c.label));
        const double dnnl = get(fmt::format("BM_Conv_OneDNN{}/{}", t, c.label));
        if (gb == 0) continue;
        os << fmt::format("{:<24} {:>7} {:>9.1f} {:>8} {:>7}\n", c.label, one ? "1" : "default", gb,
                          dnnl ? fmt::format("{:.1f}", dnnl) : "-",
                          dnnl ? fmt::format("{:.2f}", gb / dnnl) : "-");
        // The same layer in the layout a static plan runs it in (blockedInPlan).
        if (const double blk = get(fmt::format("BM_Conv2d_GearboxBlocked{}/{}", t, c.label)); blk)
          os << fmt::format("{:<24} {:>7} {:>9.1f} {:>8} {:>7}\n", "  as in the plan (nChw16c)",
                            one ? "1" : "default", blk, dnnl ? fmt::format("{:.1f}", dnnl) : "-",
                            dnnl ? fmt::format("{:.2f}", blk / dnnl) : "-");
      }
    }
    os << "\nCopies vs memcpy of the same bytes in this run (ratio of GB/s):\n";
    for (int64_t bytes : kSizes) {
      const std::string size = std::to_string(bytes / kMiB) + "MiB";
      const double mem = get("BM_Memcpy/" + size);
      if (mem == 0) continue;
      for (const char* op : {"Add", "Cat", "IndexSelect", "Relu", "Transpose"}) {
        const double tasks = get(fmt::format("BM_{}_Gearbox/{}", op, size));
        const double one = get(fmt::format("BM_{}_Gearbox1T/{}", op, size));
        if (tasks == 0 && one == 0) continue;
        os << fmt::format("{:<12} {:>6}: {:.2f} as compiled, {:.2f} on 1 task", op, size,
                          tasks / mem, one / mem);
        if (const double plain = get("BM_Transpose_GearboxPlain1T/" + size);
            plain > 0 && std::string_view(op) == "Transpose")
          os << fmt::format(" ({:.2f} on 1 task with plain stores)", plain / mem);
        os << "\n";
      }
    }
  }

 private:
  std::map<std::string, double> values_;
  std::set<std::string> medians_;
};

}  // namespace
}  // namespace gearbox

int main(int argc, char** argv) {
  // Repetitions interleaved at random unless the command line says otherwise: the ratio tables
  // divide figures of gearbox and its peers, and on a VM whose speed drifts by up to 2x from
  // minute to minute, repetitions run back to back put each side in its own phase (ResNet-18's
  // 7 x 7 layer on two threads read 0.74 of oneDNN so, 0.95 interleaved, within the hour).
  std::vector<char*> args(argv, argv + argc);
  static char interleave[] = "--benchmark_enable_random_interleaving=true";
  if (std::none_of(args.begin(), args.end(), [](const char* a) {
        return std::string_view(a).starts_with("--benchmark_enable_random_interleaving");
      }))
    // After the program name; an argv without one (argc 0, which exec allows) takes it first.
    args.insert(args.empty() ? args.end() : args.begin() + 1, interleave);
  argc = static_cast<int>(args.size());
  args.push_back(nullptr);
  argv = args.data();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  gearbox::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.printRatios(std::cout);
  benchmark::Shutdown();
  return 0;
}
