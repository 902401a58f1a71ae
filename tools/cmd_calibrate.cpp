// gearbox calibrate [-o profile.json]
//
// Measures this machine with gearbox's own kernels and runtime and writes a `cpu-host` device
// profile (docs/cost-model.md): MatMul GFLOP/s at a few sizes, copy GB/s, the per-call and
// per-kernel host overheads of static, eager and dynamic calls on the inline device, plan
// compile per node and kernel compile per op. Every value's source names what was measured.
// Each figure is the median of repeated timings; the run takes a few seconds.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>

#include "compiler/compiler.h"
#include "compiler/cpu_isa.h"
#include "driver/run_report.h"
#include "executor/cost_model.h"
#include "executor/kernels.h"
#include "executor/session.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "tools/commands.h"

namespace gearbox::cli {

namespace {

using Clock = std::chrono::steady_clock;

// Median over `reps` timings of `iters` calls of fn, in microseconds per call.
double medianUs(const std::function<void()>& fn, int reps, int iters) {
  fn();  // warm caches, pools and lazily created threads
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) fn();
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iters);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::string cpuName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// This host's RAM in bytes (MemTotal of /proc/meminfo), or 0 when it cannot be read.
int64_t hostMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemTotal:", 0) != 0) continue;
    const long long kb = std::atoll(line.c_str() + 9);
    return kb > 0 && kb < (int64_t{1} << 40) ? static_cast<int64_t>(kb) * 1024 : 0;
  }
  return 0;
}

// y = x + x + ... : `nodes` Adds of f32[n] in a chain (one kernel shape, many nodes).
Graph chain(int nodes, int64_t n) {
  GraphBuilder b("chain");
  const int64_t N = symbolDim("N");
  const ValueId x = b.input("x", DType::kF32, {N});
  ValueId v = b.add(x, x);
  for (int i = 1; i < nodes; ++i) v = b.add(v, x);
  b.output(v);
  (void)n;
  return b.build();
}

// Per-call time of a session over a fixed input, and the per-node slope between two chains.
struct Line {
  double base, perNode;
};
Line sessionLine(Mode mode, int small, int large) {
  auto perCall = [&](int nodes) {
    SessionOptions o;
    o.mode = mode;
    o.runPasses = false;
    Session s(chain(nodes, 8), o);
    const auto in = makeInputs(s.graph(), {Shape{8}}, 0);
    return medianUs([&] { s.run(in); }, 7, 200);
  };
  const double a = perCall(small), b = perCall(large);
  const double slope = std::max(0.0, (b - a) / (large - small));
  return {std::max(0.0, a - slope * small), slope};
}

KernelKey keyOf(OpKind kind, std::vector<TensorType> in, std::optional<int64_t> dim = {}) {
  Attrs a;
  a.dim = dim;
  return makeKernelKey(kind, in, a);
}

// Runs one compiled kernel on fresh random inputs; returns us per run.
double kernelUs(const KernelKey& key, int reps, int iters, bool generic = false) {
  KernelKey k = key;
  if (generic)
    for (auto& t : k.inputs)
      for (int d = 0; d < t.shape.rank(); ++d) t.shape[d] = kAnyDim;
  const auto spec = compileKernelSpec(k);
  std::vector<Tensor> ins;
  std::vector<TensorView> views;
  for (size_t i = 0; i < key.inputs.size(); ++i) {
    ins.push_back(randomTensor(key.inputs[i].dtype, key.inputs[i].shape, i));
    if (key.inputs[i].dtype != DType::kF32) {
      // Index inputs: in range (0).
      std::memset(ins.back().data(), 0, ins.back().bytes());
    }
    views.push_back(ins.back().view());
  }
  const auto staticSpec = generic ? compileKernelSpec(key) : spec;
  Tensor out(staticSpec->output.dtype, staticSpec->output.shape);
  return medianUs([&] { kernels::runViews(*spec, views, out.view()); }, reps, iters);
}

// What one calibration writes into: the profile, the source line of every figure, and the log
// each figure is printed to as it is measured.
struct Calibration {
  CostModel m;
  std::string by;  // "measured here by `gearbox calibrate` (CPU, date)"
  std::ostream* log = nullptr;
  void set(const std::string& key, double& field, double v, const std::string& how) {
    field = v;
    m.sources[key] = by + ": " + how;
    *log << fmt::format("  {:<28} {:>10.3f}   {}\n", key, v, how);
  }
};

TensorType f32(Shape s) {
  return TensorType{DType::kF32, s};
}

// Compute peak, memory bandwidth, the kernel floor and generic-kernel efficiency.
void measureKernels(Calibration& c) {
  CostModel& m = c.m;
  // Compute: MatMul GFLOP/s at a few square sizes. The roofline peak is the figure at the
  // largest size: the model matters at kernel-dominated sizes, and a small MatMul that fits
  // in L1 on one thread runs faster than a large one that splits over threads.
  std::string sizes;
  double best = 0;
  for (int64_t n : {64, 256, 512}) {
    const KernelKey k = keyOf(OpKind::kMatMul, {f32({n, n}), f32({n, n})});
    const double us = kernelUs(k, 5, n >= 512 ? 2 : 20);
    const double gflops = 2.0 * n * n * n / (us * 1e3);
    best = gflops;
    sizes += fmt::format("{}{}: {:.1f}", sizes.empty() ? "" : ", ", n, gflops);
  }
  c.set("peak_gflops.float", m.peakGflops["float"], best,
        "MatMul GFLOP/s at the largest of the square sizes (n: GFLOP/s) " + sizes);
  for (const char* dt : {"int32", "int64"}) {
    m.peakGflops[dt] = best;
    m.sources[std::string("peak_gflops.") + dt] =
        "not measured: taken equal to the float figure (gearbox has no integer-arithmetic "
        "kernels that matter; index ops do no flops)";
  }
  // Memory: Cat (a copy) of two 8 MiB halves into 16 MiB, bytes read + written: larger
  // than the caches, like the kernel-dominated sizes the model is meant for.
  {
    const int64_t rows = 2048;
    const KernelKey k = keyOf(OpKind::kCat, {f32({rows, 1024}), f32({rows, 1024})}, 0);
    const double us = kernelUs(k, 7, 10);
    c.set("memory_gbps", m.memoryGBps, kernelCost(k).bytes / (us * 1e3),
          "Cat of two [2048, 1024] f32 into [4096, 1024] (32 MiB read + written)");
  }
  // The floor of a kernel: an Add of one element.
  const KernelKey tiny = keyOf(OpKind::kAdd, {f32({1}), f32({1})});
  c.set("min_kernel_us", m.minKernelUs, kernelUs(tiny, 7, 20000), "Add of one element");
  // Generic vs static kernels: the same MatMul with its params derived per call.
  {
    const KernelKey k = keyOf(OpKind::kMatMul, {f32({128, 128}), f32({128, 128})});
    const double s = kernelUs(k, 7, 20), g = kernelUs(k, 7, 20, /*generic=*/true);
    c.set("generic_kernel_efficiency", m.genericKernelEfficiency, std::clamp(s / g, 0.01, 1.0),
          fmt::format("MatMul 128^3 static {:.1f} us vs shape-generic {:.1f} us", s, g));
  }
}

// Launch, sync, host shape inference and tiling, and device allocation.
void measureOverheads(Calibration& c) {
  CostModel& m = c.m;
  const std::string& by = c.by;
  // Launch overheads from whole calls on the inline device: chains of 1 and 32 tiny Adds.
  const Line st = sessionLine(Mode::kStatic, 1, 32);
  const Line eg = sessionLine(Mode::kEager, 1, 32);
  const Line dy = sessionLine(Mode::kDynamic, 1, 32);
  c.set("graph_launch_base_us", m.graphLaunchBaseUs, st.base,
        "static call of a 1-Add plan minus the per-node slope (includes the inline sync)");
  c.set("graph_launch_per_node_us", m.graphLaunchPerNodeUs,
        std::max(0.0, st.perNode - m.minKernelUs),
        "per-node slope of static calls (1 vs 32 Adds) minus the tiny-kernel time");
  m.syncUs = 0;
  m.sources["sync_us"] = by +
                         ": the inline device syncs by returning; its cost is in the "
                         "launch figures";
  // Shape inference per op: inferring a 32-Add chain's types.
  {
    const Graph g = chain(32, 8);
    const double us = medianUs([&] { specializeTypes(g, {Shape{8}}); }, 7, 200);
    c.set("host_shape_inference_us", m.hostShapeInferenceUs, us / 32,
          "specializing the types of a 32-Add chain, per node");
  }
  c.set("launch_us", m.launchUs, std::max(0.0, eg.perNode - m.minKernelUs - m.hostShapeInferenceUs),
        "per-op slope of eager calls (1 vs 32 Adds) minus the kernel and shape inference");
  c.set("host_tiling_us", m.hostTilingUs, std::max(0.0, dy.perNode - eg.perNode),
        "per-op slope of dynamic calls minus that of eager ones (generic-kernel params)");
  // Device allocation: a new segment each time (allocate, release, empty the cache).
  {
    InlineDevice dev;
    const double us = medianUs(
        [&] {
          dev.release(dev.allocate(4096), 4096);
          dev.releaseCachedMemory();
        },
        5, 200);
    c.set("alloc_us", m.allocUs, us,
          "InlineDevice allocation of a new 2 MiB segment (pool miss), with its release");
  }
}

// Plan compile per node and the kernel spec compile of every op.
void measureCompiles(Calibration& c) {
  CostModel& m = c.m;
  const std::string& by = c.by;
  // Compiles: plan compile per node from chains of 10 and 1000 Adds (one kernel shape),
  // and one kernel spec per op.
  {
    auto planUs = [](int nodes) {
      const Graph g = chain(nodes, 8);
      auto shared = std::make_shared<const Graph>(g);
      return medianUs(
          [&] {
            KernelCache cache(16);
            compilePlan(shared, {Shape{8}}, cache);
          },
          5, nodes > 100 ? 2 : 50);
    };
    const double a = planUs(1), b = planUs(1000);
    const double per = std::max(0.0, (b - a) / 999);
    c.set("graph_compile_per_node_us", m.graphCompilePerNodeUs, per,
          "plan compile of 1000 vs 1 chained Adds, per node");
    c.set("graph_compile_base_us", m.graphCompileBaseUs, std::max(0.0, a - per),
          "plan compile of 1 Add minus the per-node term");
  }
  const std::vector<std::pair<std::string, KernelKey>> ops = {
      {"Add", keyOf(OpKind::kAdd, {f32({64, 64}), f32({64, 64})})},
      {"MatMul", keyOf(OpKind::kMatMul, {f32({64, 64}), f32({64, 64})})},
      {"IndexSelect",
       keyOf(OpKind::kIndexSelect, {f32({64, 64}), TensorType{DType::kI64, Shape{8}}}, 0)},
      {"Cat", keyOf(OpKind::kCat, {f32({64, 64}), f32({64, 64})}, 0)},
      {"Mul", keyOf(OpKind::kMul, {f32({64, 64}), f32({64, 64})})},
      {"Relu", keyOf(OpKind::kRelu, {f32({64, 64})})},
      {"CatGather", keyOf(OpKind::kCatGather,
                          {f32({64, 64}), f32({64, 64}), TensorType{DType::kI64, Shape{8}}}, 0)},
  };
  // A plain loop variable, not a structured binding: clang 14 (the fuzz flavour's compiler)
  // rejects capturing a binding in a lambda.
  for (const auto& entry : ops) {
    const std::string& op = entry.first;
    const KernelKey& k = entry.second;
    c.set("kernel_compile_us." + op, m.kernelCompileUs[op],
          medianUs([&] { compileKernelSpec(k); }, 7, 200),
          fmt::format("compiling the {} kernel spec for {}", op, k.name()));
  }
  m.kernelCompileDefaultUs = m.kernelCompileUs["Add"];
  m.sources["kernel_compile_default_us"] = by + ": taken equal to the Add kernel compile";
  {
    // Size term: MatMul compile at 64^3 and 1024^3, per doubling of FLOPs.
    const KernelKey k64 = keyOf(OpKind::kMatMul, {f32({64, 64}), f32({64, 64})});
    const KernelKey k1k = keyOf(OpKind::kMatMul, {f32({1024, 1024}), f32({1024, 1024})});
    const double a = medianUs([&] { compileKernelSpec(k64); }, 7, 200);
    const double b = medianUs([&] { compileKernelSpec(k1k); }, 7, 200);
    const double doublings =
        std::log2(1 + kernelCost(k1k).flops) - std::log2(1 + kernelCost(k64).flops);
    m.kernelCompileLog2FlopsUs.clear();
    c.set(
        "kernel_compile_log2_flops_us.MatMul", m.kernelCompileLog2FlopsUs["MatMul"],
        std::max(0.0, (b - a) / doublings),
        fmt::format("MatMul kernel spec compile at 64^3 ({:.2f} us) vs 1024^3 ({:.2f} us)", a, b));
  }
}

}  // namespace

void registerCalibrate(CLI::App& app) {
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Measure this machine with gearbox's own kernels and write a cpu-host device "
      "profile (docs/cost-model.md)");
  cmd->add_option("-o,--output", *out, "Write the profile here (atomically); default stdout");
  cmd->callback([out] {
    // The path is checked before the measurements (a few seconds), not after them.
    if (!out->empty()) checkOutputPath("-o", *out);
    const std::string cpu = cpuName();
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
    Calibration c;
    // The kernels' ISA is part of what was measured: a profile taken under GEARBOX_ISA=baseline
    // describes slower kernels than the same CPU's AVX2 ones.
    c.by = fmt::format("measured here by `gearbox calibrate` ({}, {}, {})", cpu, isaDescription(),
                       date);
    c.log = out->empty() ? &std::cerr : &std::cout;
    c.m.sources.clear();
    c.m.name = "cpu-host";
    c.m.description = fmt::format(
        "This CPU as gearbox runs it on the inline device, {}. Regenerate with `gearbox "
        "calibrate -o examples/devices/cpu-host.json`. MODELED figures: a profile predicts, it "
        "does not measure a run.",
        c.by);
    measureKernels(c);
    measureOverheads(c);
    measureCompiles(c);
    c.m.sources["sync_policy"] = "gearbox's default: dynamic mode syncs after every op (seed 001)";
    // The inline device's memory is this host's RAM: its capacity is MemTotal. Where
    // /proc/meminfo cannot be read the profile sets no capacity (unlimited).
    if (const int64_t ram = hostMemoryBytes(); ram > 0) {
      c.m.memoryCapacityBytes = ram;
      c.m.sources["memory_capacity_bytes"] =
          c.by + ": MemTotal of /proc/meminfo; the inline device's memory is this host's RAM";
    }

    const std::string json = costModelToJson(c.m) + "\n";
    if (out->empty()) {
      std::cout << json;
    } else {
      writeFileAtomic(*out, json);
      std::cout << fmt::format("wrote {}\n", *out);
    }
  });
}

}  // namespace gearbox::cli
