// The thread cap (--threads, SessionOptions::threads, KernelKey::threads): a kernel's thread
// split is decided for the cap of its key, whatever the machine; a capped session compiles
// every kernel for its cap, in every mode, and runs inside a oneTBB arena of that many threads;
// kernel_meta files and bundles of different caps never serve one another; the CLI takes
// --threads and the report records it. The peers bench (bench/peers/) compares gearbox with
// ONNX Runtime and PyTorch at equal caps through this option.
#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"
#include "compiler/kernel_name.h"
#include "compiler/kernel_store.h"
#include "driver/run_options.h"
#include "executor/modes/geared.h"
#include "executor/modes/mode_strategy.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "temp_dir.h"

namespace gearbox {
namespace {

using testing_util::shellQuote;
using testing_util::TempDir;

// [m, 256] x [256, 256]: 2 * m * 256 * 256 flops. At m = 128 that is 16.8 MFLOP, far above
// MatMul's split threshold (0.25 MFLOP a task), so the split is the cap; at m = 8 it is 1.05
// MFLOP, four tasks' worth, so min(cap, 4) tasks; at m = 1 (0.13 MFLOP) it is one task.
KernelKey matmulKey(int64_t m, int threads) {
  return makeKernelKey(OpKind::kMatMul,
                       {{DType::kF32, Shape{m, 256}}, {DType::kF32, Shape{256, 256}}}, {}, threads);
}

// y = relu(x @ w) + x with x: f32[B, 256], w: f32[256, 256].
Graph matmulModel() {
  GraphBuilder b("capped");
  auto x = b.input("x", DType::kF32, {kAnyDim, 256});
  auto w = b.input("w", DType::kF32, {256, 256});
  auto m = b.matmul(x, w, "m");
  auto r = b.op(OpKind::kRelu, {m}, Attrs{}, "r");
  b.output(b.add(r, x, "y"));
  return b.build();
}

std::vector<Tensor> inputs(const Graph& g, int64_t batch) {
  return makeInputs(g, {Shape{batch, 256}, Shape{256, 256}}, static_cast<uint64_t>(batch));
}

TEST(Threads, TheKeysCapDecidesTheSplitNotTheMachine) {
  // 1, 2 and 3 tasks under caps 1, 2 and 3, on any machine: a kernel compiled for three
  // threads is split for three even where two cores run it.
  for (int cap : {1, 2, 3}) {
    const auto spec = compileKernelSpec(matmulKey(128, cap));
    EXPECT_EQ(spec->tasks, cap) << cap;
    EXPECT_EQ(spec->key.threads, cap);
    EXPECT_EQ(spec->name, "MatMul_float_ND_128_256__256_256__threads=" + std::to_string(cap));
  }
  // Above the work's own split (4 tasks of the threshold's size), the cap changes nothing.
  EXPECT_EQ(compileKernelSpec(matmulKey(8, 8))->tasks, 4);
  // Small work stays in the calling thread whatever the cap.
  EXPECT_EQ(compileKernelSpec(matmulKey(1, 8))->tasks, 1);
  // Without a cap the name and key are as they always were; the split follows the arena.
  const auto uncapped = compileKernelSpec(matmulKey(128, 0));
  EXPECT_EQ(uncapped->name, "MatMul_float_ND_128_256__256_256");
  tbb::task_arena one(1);
  one.execute([] { EXPECT_EQ(compileKernelSpec(matmulKey(128, 0))->tasks, 1); });
  tbb::task_arena three(3);
  three.execute([] {
    EXPECT_EQ(compileKernelSpec(matmulKey(128, 0))->tasks, 3);
    // A capped key inside any arena: its own cap.
    EXPECT_EQ(compileKernelSpec(matmulKey(128, 2))->tasks, 2);
  });
}

TEST(Threads, KeysOfDifferentCapsAreDifferentKernels) {
  EXPECT_FALSE(matmulKey(128, 1) == matmulKey(128, 2));
  EXPECT_FALSE(matmulKey(128, 0) == matmulKey(128, 1));
  EXPECT_TRUE(matmulKey(128, 2) == matmulKey(128, 2));
  EXPECT_NE(matmulKey(128, 1).hash(), matmulKey(128, 2).hash());
  // The name round-trips through the one parser, the cap as its own field.
  const auto parsed = parseKernelName("MatMul_float_ND_128_256__256_256__threads=2");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->op, "MatMul");
  EXPECT_EQ(parsed->inputs, (std::vector<std::vector<int64_t>>{{128, 256}, {256, 256}}));
  EXPECT_EQ(parsed->threads, 2);
  EXPECT_TRUE(parsed->attrs.empty());
  const auto cat = parseKernelName("Cat_float_ND_2_3__2_5__dim1__threads=1");
  ASSERT_TRUE(cat);
  EXPECT_EQ(cat->dim, 1);
  EXPECT_EQ(cat->threads, 1);
  EXPECT_FALSE(parseKernelName("MatMul_float_ND_128_256__256_256")->threads);
  EXPECT_FALSE(parseKernelName("MatMul_float_ND_1_2__2_1__threads=0"));
  EXPECT_FALSE(parseKernelName("MatMul_float_ND_1_2__2_1__threads=x"));
}

// Every kernel a session compiled, with its split, seen through a compile hook (called on the
// compiling thread: geared mode compiles its gears in parallel).
struct Compiled {
  std::mutex mu;
  std::vector<std::shared_ptr<const KernelSpec>> specs;
  void attach(SessionOptions& o) {
    o.compileHooks.push_back([this](const KernelSpec& s) {
      std::lock_guard lock(mu);
      specs.push_back(std::make_shared<const KernelSpec>(s));
    });
  }
};

SessionOptions optionsFor(Mode mode, int threads) {
  SessionOptions o;
  o.mode = mode;
  o.threads = threads;
  return o;
}

TEST(Threads, ACappedSessionCompilesEveryKernelForItsCapInEveryMode) {
  const Graph g = matmulModel();
  // The reference executor's outputs, once: they depend on neither the mode nor the cap.
  const std::vector<int64_t> batches = {128, 64, 128};
  std::vector<std::vector<Tensor>> in, ref;
  for (int64_t batch : batches) {
    in.push_back(inputs(g, batch));
    ref.push_back(referenceRun(g, in.back()));
  }
  for (const ModeInfo& info : modeTable()) {
    SCOPED_TRACE(std::string(info.name));
    std::vector<SessionStats> stats;
    for (int cap : {0, 1, 2, 3}) {
      SessionOptions o = optionsFor(info.mode, cap);
      Compiled compiled;
      compiled.attach(o);
      Session s(g, o);
      if (info.needsGears) set_dim_gears(s, "x", {{0, {64, 128}}});
      for (size_t i = 0; i < batches.size(); ++i) {
        // 256-term float sums, split or not: within 1e-3 of the reference executor.
        EXPECT_LE(maxAbsDiff(s.run(in[i]).at(0), ref[i].at(0)), 1e-3)
            << "cap " << cap << ", batch " << batches[i];
      }
      stats.push_back(s.stats());
      if (cap == 0) continue;
      const std::string suffix = "__threads=" + std::to_string(cap);
      ASSERT_FALSE(compiled.specs.empty());
      bool bigMatMul = false, anyStatic = false;
      for (const auto& spec : compiled.specs) {
        anyStatic |= !spec->generic;
        EXPECT_EQ(spec->key.threads, cap) << spec->name;
        EXPECT_TRUE(spec->name.ends_with(suffix)) << spec->name;
        EXPECT_LE(spec->tasks, cap) << spec->name;
        // The static [128, 256] x [256, 256] kernel, where a mode compiles static kernels.
        if (!spec->generic && spec->key.kind == OpKind::kMatMul &&
            spec->key.inputs[0].shape == Shape{128, 256}) {
          bigMatMul = true;
          EXPECT_EQ(spec->tasks, cap) << spec->name;
        }
      }
      // Where a mode compiles static kernels, the big MatMul is one, split for the cap (the
      // dynamic and replayed kernels are shape-generic: one task).
      if (anyStatic) {
        EXPECT_TRUE(bigMatMul) << "cap " << cap;
      }
      if (info.mode == Mode::kStatic) {
        EXPECT_TRUE(anyStatic);
      }
      for (const CallRecord& rec : s.history())
        for (const std::string& name : rec.kernelsCompiled)
          EXPECT_TRUE(name.ends_with(suffix)) << name;
    }
    // The cap changes no counter: the same compiles, hits, launches and syncs at every cap.
    for (size_t i = 1; i < stats.size(); ++i) {
      EXPECT_EQ(stats[i].graphCompiles, stats[0].graphCompiles) << i;
      EXPECT_EQ(stats[i].kernelCompiles, stats[0].kernelCompiles) << i;
      EXPECT_EQ(stats[i].kernelCacheHits, stats[0].kernelCacheHits) << i;
      EXPECT_EQ(stats[i].planCacheHits, stats[0].planCacheHits) << i;
      EXPECT_EQ(stats[i].launches, stats[0].launches) << i;
      EXPECT_EQ(stats[i].syncs, stats[0].syncs) << i;
      EXPECT_DOUBLE_EQ(stats[i].modeledDeviceUs, stats[0].modeledDeviceUs) << i;
    }
  }
}

// A mode that records the concurrency of the arena its prepare() and run() find themselves in.
class ArenaProbe final : public ModeStrategy {
 public:
  ArenaProbe(ModeHost& host, std::vector<int>& seen) : host_(host), seen_(seen) {}
  void prepare(const InputSignature&) override {
    seen_.push_back(tbb::this_task_arena::max_concurrency());
  }
  std::vector<Tensor> run(std::span<const Tensor> inputs, const InputSignature&,
                          CallContext& call) override {
    seen_.push_back(tbb::this_task_arena::max_concurrency());
    return host_.runOpByOp(host_.graph(), nullptr, inputs, false,
                           ModeHost::OpKernels::kEagerCompile, call, {}, {});
  }

 private:
  ModeHost& host_;
  std::vector<int>& seen_;
};

TEST(Threads, ACappedSessionRunsInAnArenaOfItsCap) {
  const Graph g = matmulModel();
  const int outside = tbb::this_task_arena::max_concurrency();
  for (int cap : {0, 1, 2, 3}) {
    std::vector<int> seen;
    SessionOptions o = optionsFor(Mode::kEager, cap);
    o.strategy = [&seen](ModeHost& h) { return std::make_unique<ArenaProbe>(h, seen); };
    Session s(g, o);
    s.run(inputs(s.graph(), 4));
    s.run(inputs(s.graph(), 4));
    // prepare, then two calls: each in an arena of the cap (no cap: the caller's own).
    EXPECT_EQ(seen, std::vector<int>(3, cap > 0 ? cap : outside)) << cap;
  }
}

TEST(Threads, ACapOutOfRangeIsAConfigError) {
  for (int cap : {-1, kMaxThreads + 1}) {
    try {
      Session s(matmulModel(), optionsFor(Mode::kStatic, cap));
      ADD_FAILURE() << cap << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kConfig);
      EXPECT_NE(std::string(e.what()).find("threads " + std::to_string(cap)), std::string::npos)
          << e.what();
    }
  }
  EXPECT_NO_THROW(Session(matmulModel(), optionsFor(Mode::kStatic, kMaxThreads)));
}

TEST(Threads, DescriptorsCarryTheCapAndCheckIt) {
  const auto spec = compileKernelSpec(matmulKey(128, 2));
  const KernelDescriptor back = parseKernelDescriptor(serializeKernelDescriptor(*spec, "t"));
  EXPECT_EQ(back.spec->key.threads, 2);
  EXPECT_EQ(back.spec->tasks, 2);
  EXPECT_TRUE(back.spec->key == spec->key);
  // An uncapped key's descriptor is as before: no "threads" field.
  const auto plain = kernelDescriptorJson(*compileKernelSpec(matmulKey(1, 0)), "t");
  EXPECT_FALSE(plain["key"].contains("threads"));
  // A key whose cap is out of range is refused by name.
  nlohmann::ordered_json key = keyToJson(spec->key);
  key["threads"] = kMaxThreads + 1;
  try {
    keyFromJson(key);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_NE(std::string(e.what()).find("key.threads"), std::string::npos) << e.what();
  }
}

TEST(Threads, KernelMetaKeepsTheKernelsOfEachCapApart) {
  TempDir dir;
  const Graph g = matmulModel();
  auto runWith = [&](int cap) {
    cli::RunOptions ro;
    ro.kernelMeta = dir.file("km");
    SessionOptions o = optionsFor(Mode::kStatic, cap);
    cli::attachKernelStores(ro, o);
    Session s(g, o);
    s.run(inputs(s.graph(), 128));
    return s.stats();
  };
  const SessionStats first = runWith(1);
  ASSERT_GT(first.kernelCompiles, 0);
  EXPECT_EQ(first.kernelStoreHits, 0);
  // Another cap finds none of them: it compiles (and stores) its own.
  const SessionStats second = runWith(2);
  EXPECT_EQ(second.kernelStoreHits, 0);
  EXPECT_EQ(second.kernelCompiles, first.kernelCompiles);
  // The first cap again: every kernel from the store.
  const SessionStats third = runWith(1);
  EXPECT_EQ(third.kernelCompiles, 0);
  EXPECT_EQ(third.kernelStoreHits, first.kernelCompiles);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("km"))) {
    ++files;
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name.find("__threads=1") != std::string::npos ||
                name.find("__threads=2") != std::string::npos)
        << name;
  }
  EXPECT_EQ(files, static_cast<size_t>(2 * first.kernelCompiles));
}

// The CLI: --threads on run and compare, recorded in the report; precompile --threads makes a
// bundle for that cap, which serves a run of that cap and no other.
TEST(ThreadsCli, RunRecordsTheCapAndBundlesServeOnlyTheirCap) {
  TempDir dir;
  const std::string model = testing_util::example("four_ops.gbx");
  const std::string trace = testing_util::example("four_ops.trace.jsonl");
  auto run = [&](const std::string& extra, const std::string& json) {
    return testing_util::runGearbox("run " + shellQuote(model) + " --trace " + shellQuote(trace) +
                                    " -q " + extra + " --json " + shellQuote(dir.file(json)));
  };
  auto report = [&](const std::string& json) {
    return nlohmann::json::parse(readFile(dir.file(json)));
  };
  auto r = run("--threads 1 --record-op-info " + shellQuote(dir.file("rec")), "a.json");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const auto a = report("a.json");
  EXPECT_EQ(a["config"]["threads"], 1);
  const int64_t kernels = a["kernel_compiles"];
  ASSERT_GT(kernels, 0);
  r = run("", "plain.json");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_EQ(report("plain.json")["config"]["threads"], 0);

  r = testing_util::runGearbox("precompile " + shellQuote(dir.file("rec")) + " --threads 1 -o " +
                               shellQuote(dir.file("t1.run")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  r = run("--threads 1 --kernel-bundle " + shellQuote(dir.file("t1.run")), "b.json");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_EQ(report("b.json")["kernel_compiles"], 0);
  EXPECT_EQ(report("b.json")["kernel_store_hits"], kernels);
  r = run("--threads 2 --kernel-bundle " + shellQuote(dir.file("t1.run")), "c.json");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_EQ(report("c.json")["kernel_compiles"], kernels);
  EXPECT_EQ(report("c.json")["kernel_store_hits"], 0);

  r = testing_util::runGearbox("compare " + shellQuote(model) + " --trace " + shellQuote(trace) +
                               " -q --repeat 1 --threads 1");
  EXPECT_EQ(r.exitCode, 0) << r.output;
}

TEST(ThreadsCli, ACapOutOfRangeExitsTwo) {
  const std::string model = testing_util::example("four_ops.gbx");
  const std::string trace = testing_util::example("four_ops.trace.jsonl");
  for (const char* bad : {"-1", "1025", "two"}) {
    const auto r = testing_util::runGearbox("run " + shellQuote(model) + " --trace " +
                                            shellQuote(trace) + " -q --threads " + bad);
    EXPECT_EQ(r.exitCode, 2) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("--threads"), std::string::npos) << r.output;
  }
  const auto r = testing_util::runGearbox("precompile /nonexistent --threads 2000");
  EXPECT_EQ(r.exitCode, 2) << r.output;
}

}  // namespace
}  // namespace gearbox
