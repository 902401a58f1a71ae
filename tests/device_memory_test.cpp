// MODELED device memory (executor/device_memory.h): the pool rules, the byte-size parser, the
// profile's capacity, every mode's terms in exact bytes, the OOM error and --on-oom evict, and
// issue 25's acceptance case on the MLP serving trace: gears every 8 vs every 32 vs powers of
// two. The MLP (examples/mlp.gbx) keeps its weights as graph inputs, so its weights term is 0
// and the weights count in every call's inputs (8,396,800 bytes: two 1024x1024 f32 matrices
// and two 1024 f32 biases). Its plan at batch B plans two live [B, 1024] f32 intermediates at
// once: a workspace of B x 8,192 bytes.
#include "executor/device_memory.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "compiler/passes.h"
#include "driver/trace.h"
#include "executor/cost_model.h"
#include "executor/modes/geared.h"
#include "executor/session.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "graph/text.h"
#include "tests/cli_util.h"
#include "tests/temp_dir.h"

namespace gearbox {
namespace {

using testing_util::example;
using testing_util::TempDir;

constexpr int64_t kMlpWeights = 2 * 1024 * 1024 * 4 + 2 * 1024 * 4;  // 8,396,800
// The MLP's workspace and its inputs + outputs at batch b.
constexpr int64_t mlpWorkspace(int64_t b) {
  return b * 8192;
}
constexpr int64_t mlpIo(int64_t b) {
  return kMlpWeights + 2 * b * 4096;
}

TEST(DeviceMemoryModel, SharedPoolIsTheMaxSeparateTheSumCachedPlansAlwaysAddUp) {
  DeviceMemoryModel shared(64, 0, GraphPool::kShared), separate(64, 0, GraphPool::kSeparate);
  for (DeviceMemoryModel* m : {&shared, &separate}) {
    m->hold(1, 100, false);
    m->hold(2, 300, false);
    m->hold(3, 200, false);
  }
  EXPECT_EQ(shared.workspaceWith(0), 300);
  EXPECT_EQ(separate.workspaceWith(0), 600);
  EXPECT_EQ(shared.residentWith(0), 364);  // + the weights
  EXPECT_EQ(shared.workspaceWith(500), 500);
  EXPECT_EQ(separate.workspaceWith(500), 1100);
  shared.release(2);
  separate.release(2);
  EXPECT_EQ(shared.workspaceWith(0), 200);
  EXPECT_EQ(separate.workspaceWith(0), 300);
  EXPECT_EQ(shared.snapshot().peakWorkspaceBytes, 300);
  EXPECT_EQ(separate.snapshot().peakWorkspaceBytes, 600);
  // A cached plan owns its arena: added whatever the pool.
  shared.hold(7, 1000, true);
  EXPECT_EQ(shared.workspaceWith(0), 1200);
  EXPECT_EQ(shared.workspaceWith(50, /*pooled=*/false), 1250);
  EXPECT_EQ(shared.evictableIds(), std::vector<uint64_t>{7});
  shared.setOpByOpBytes(2048);
  EXPECT_EQ(shared.residentWith(0), 64 + 1200 + 2048);
  shared.notePeak(10);
  EXPECT_EQ(shared.snapshot().peakBytes, 64 + 1200 + 2048 + 10);
  EXPECT_EQ(shared.snapshot().residentPlans, 3);
  EXPECT_TRUE(shared.unlimited());
  const DeviceMemoryModel small(64, 100, GraphPool::kShared);
  EXPECT_TRUE(small.fits(100));
  EXPECT_FALSE(small.fits(101));
}

TEST(DeviceMemory, ParseByteSize) {
  EXPECT_EQ(parseByteSize("40GiB", "--device-memory"), int64_t{42949672960});
  EXPECT_EQ(parseByteSize("512MiB", "x"), int64_t{536870912});
  EXPECT_EQ(parseByteSize("2GB", "x"), int64_t{2000000000});
  EXPECT_EQ(parseByteSize("10KB", "x"), 10000);
  EXPECT_EQ(parseByteSize("1000", "x"), 1000);
  EXPECT_EQ(parseByteSize("7B", "x"), 7);
  EXPECT_EQ(parseByteSize("1TiB", "x"), int64_t{1} << 40);
  for (const char* bad : {"", "GiB", "0", "0GiB", "4 GiB", "40gib", "-1", "1.5GiB", "2048TiB",
                          "99999999999999999999", "1e9"}) {
    try {
      parseByteSize(bad, "--device-memory");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kConfig);
      EXPECT_NE(std::string(e.what()).find("--device-memory"), std::string::npos) << e.what();
    }
  }
}

TEST(DeviceMemory, ProfilesCarryASourcedCapacityAndOldProfilesAreUnlimited) {
  const CostModel a100 = loadDeviceProfile("a100-class");
  EXPECT_EQ(a100.memoryCapacityBytes, int64_t{42949672960});
  EXPECT_NE(a100.sources.at("memory_capacity_bytes").find("A100 40 GB datasheet"),
            std::string::npos);
  const CostModel host = loadDeviceProfile("cpu-host");
  EXPECT_EQ(host.memoryCapacityBytes, int64_t{25276502016});
  EXPECT_NE(host.sources.at("memory_capacity_bytes").find("MemTotal"), std::string::npos);
  // The built-in values are a100-class's, the capacity too; but a profile file without the key
  // (every profile before it) loads with no capacity rather than an A100's.
  EXPECT_EQ(CostModel{}.memoryCapacityBytes, int64_t{42949672960});
  TempDir dir;
  writeFileAtomic(dir.file("old.json"), R"({"name": "old", "launch_us": 3})");
  EXPECT_EQ(loadDeviceProfile(dir.file("old.json")).memoryCapacityBytes, 0);
  // The key round-trips through the profile JSON with its source.
  CostModel back;
  applyCostJson(back, costModelToJson(a100), "round trip");
  EXPECT_EQ(back.memoryCapacityBytes, a100.memoryCapacityBytes);
  EXPECT_EQ(back.sources.at("memory_capacity_bytes"), a100.sources.at("memory_capacity_bytes"));
  // Untrusted files: whole bytes from 1 B to 1 PiB, numbers only.
  for (const char* bad :
       {R"({"memory_capacity_bytes": 1.5})", R"({"memory_capacity_bytes": 0})",
        R"({"memory_capacity_bytes": -4096})", R"({"memory_capacity_bytes": 1e300})",
        R"({"memory_capacity_bytes": "40GiB"})",
        R"({"memory_capacity_bytes": {"value": 2251799813685248, "source": "2 PiB"}})"}) {
    CostModel m;
    try {
      applyCostJson(m, bad, "bad.json");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kConfig);
      EXPECT_NE(std::string(e.what()).find("memory_capacity_bytes"), std::string::npos) << e.what();
    }
  }
  CostModel o;
  applyCostOverride(o, "memory_capacity_bytes=1048576");
  EXPECT_EQ(o.memoryCapacityBytes, 1048576);
}

// The MLP serving model, run model-only with shared weights (as tests/cost_model_test.cpp).
class MlpMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    graph_ = loadGraph(example("mlp.gbx"));
    weights_ = makeInputs(
        graph_, {Shape{1, 1024}, Shape{1024, 1024}, Shape{1024}, Shape{1024, 1024}, Shape{1024}},
        0);
  }
  std::vector<Tensor> inputs(int64_t b) const {
    auto in = weights_;
    in[0] = Tensor(DType::kF32, Shape{b, 1024});
    return in;
  }
  // The figures below are derived for the MLP's four kernels (matmul, bias add, matmul, bias
  // add: two [b, 1024] intermediates live per plan, three in a capture), so the bias adds stay
  // apart here: the memory model's arithmetic is under test, not fuse-matmul-epilogue, which
  // leaves one intermediate (MatMulEpilogueFusion tests it).
  SessionOptions options(Mode mode, const std::string& gears = "") const {
    SessionOptions o;
    o.mode = mode;
    o.modelOnly = true;
    o.disabledPasses = {"fuse-matmul-epilogue"};
    if (modeInfo(mode).needsGears) {
      gearOptions(o).json = gears;
      gearOptions(o).fallback = GearFallback::kPad;
    }
    return o;
  }
  ModeledMemory run(const SessionOptions& o, const std::vector<int64_t>& batches) const {
    // One set of inputs per batch size, built once: a trace of 20,000 calls allocating and
    // zeroing a fresh [b, 1024] input each spent half of this fixture's time there under ASan,
    // whose quarantine hands every such buffer new pages (79 s in CI's ASan suite).
    std::map<int64_t, std::vector<Tensor>> byBatch;
    Session s(graph_, o);
    for (int64_t b : batches) {
      auto it = byBatch.find(b);
      if (it == byBatch.end()) it = byBatch.emplace(b, inputs(b)).first;
      s.run(it->second);
    }
    return s.stats().memory;
  }
  std::vector<InputSignature> gearShapes(const std::vector<int64_t>& batches) const {
    std::vector<InputSignature> out;
    for (int64_t b : batches)
      out.push_back(
          {Shape{b, 1024}, Shape{1024, 1024}, Shape{1024}, Shape{1024, 1024}, Shape{1024}});
    return out;
  }
  Graph graph_;
  std::vector<Tensor> weights_;
};

std::string gearsEvery(int64_t step) {
  std::string list;
  for (int64_t b = step; b <= 64; b += step) list += (list.empty() ? "" : ", ") + std::to_string(b);
  return R"({"x": {"0": [)" + list + "]}}";
}
const std::string kPow2Gears = R"({"x": {"0": [1, 2, 4, 8, 16, 32, 64]}})";

TEST_F(MlpMemory, StaticHoldsEveryCachedPlanAndFreesWhatTheCacheEvicts) {
  const ModeledMemory m = run(options(Mode::kStatic), {8, 16, 8, 32});
  EXPECT_EQ(m.weightsBytes, 0);
  EXPECT_EQ(m.residentPlans, 3);
  EXPECT_EQ(m.workspaceBytes, mlpWorkspace(8) + mlpWorkspace(16) + mlpWorkspace(32));
  EXPECT_EQ(m.workspaceBytes, 458752);
  EXPECT_EQ(m.opByOpBytes, 0);  // no op-by-op call
  EXPECT_EQ(m.residentBytes, 458752);
  EXPECT_EQ(m.peakBytes, 458752 + mlpIo(32));
  EXPECT_EQ(m.capacityBytes, int64_t{42949672960});  // a100-class
  EXPECT_EQ(m.evictions, 0);
  // A plan cache of 2: the 32 plan evicts the least recently used (16), whose workspace goes.
  SessionOptions two = options(Mode::kStatic);
  two.planCacheCapacity = 2;
  const ModeledMemory e = run(two, {8, 16, 8, 32});
  EXPECT_EQ(e.residentPlans, 2);
  EXPECT_EQ(e.workspaceBytes, mlpWorkspace(8) + mlpWorkspace(32));
  // The cache evicts 16 before 32 is held: never all three at once.
  EXPECT_EQ(e.peakWorkspaceBytes, mlpWorkspace(8) + mlpWorkspace(32));
  EXPECT_EQ(e.evictions, 0);  // capacity evictions are the plan cache's, not memory's
}

TEST_F(MlpMemory, GraphPoolDoesNotChangeCachedPlans) {
  SessionOptions o = options(Mode::kStatic);
  o.graphPool = GraphPool::kSeparate;
  EXPECT_EQ(run(o, {8, 16, 32}).workspaceBytes, 458752);
}

TEST_F(MlpMemory, GearedHoldsEveryGearSharedOrSeparate) {
  SessionOptions shared = options(Mode::kGeared, gearsEvery(8));
  SessionOptions separate = shared;
  separate.graphPool = GraphPool::kSeparate;
  // One unpadded call (batch 64) so no padded copy enters the caching allocator.
  const ModeledMemory s = run(shared, {64});
  const ModeledMemory p = run(separate, {64});
  EXPECT_EQ(s.residentPlans, 8);
  EXPECT_EQ(p.residentPlans, 8);
  EXPECT_EQ(s.workspaceBytes, mlpWorkspace(64));                               // 524,288
  EXPECT_EQ(p.workspaceBytes, 8192 * (8 + 16 + 24 + 32 + 40 + 48 + 56 + 64));  // 2,359,296
  EXPECT_EQ(p.workspaceBytes, 2359296);
  EXPECT_EQ(s.peakBytes, 524288 + mlpIo(64));
  EXPECT_EQ(p.peakBytes, 2359296 + mlpIo(64));
  EXPECT_EQ(s.opByOpBytes, 0);
  // The simulated device follows the pool: one arena, or one per gear.
  Session sep(graph_, separate);
  sep.run(inputs(64));
  EXPECT_EQ(sep.stats().peakBytes, 2359296);
  EXPECT_EQ(sep.stats().allocations, 8);
  Session sh(graph_, shared);
  sh.run(inputs(64));
  EXPECT_EQ(sh.stats().peakBytes, 524288);
  EXPECT_EQ(sh.stats().allocations, 1);
}

TEST_F(MlpMemory, PaddedCallsCopyThroughTheCachingAllocator) {
  // Batch 5 pads to gear 8: the padded x (32 KiB) comes from the caching allocator, one 2 MiB
  // segment it keeps reserved (the op-by-op pool term).
  const ModeledMemory m = run(options(Mode::kGeared, gearsEvery(8)), {5});
  EXPECT_EQ(m.opByOpBytes, 2 << 20);
  EXPECT_EQ(m.residentBytes, mlpWorkspace(64) + (2 << 20));
  EXPECT_EQ(m.peakBytes, mlpWorkspace(64) + (2 << 20) + mlpIo(8));
}

TEST_F(MlpMemory, EagerAndDynamicHoldTheCachingAllocatorsReservedBytes) {
  const auto check = [&](Mode mode) {
    const ModeledMemory m = run(options(mode), {8, 16});
    EXPECT_EQ(m.residentPlans, 0) << modeName(mode);
    EXPECT_EQ(m.workspaceBytes, 0) << modeName(mode);
    // Three [16, 1024] f32 intermediates (64 KiB each) fit one 2 MiB segment.
    EXPECT_EQ(m.opByOpBytes, 2 << 20) << modeName(mode);
    EXPECT_EQ(m.residentBytes, 2 << 20) << modeName(mode);
    EXPECT_EQ(m.peakBytes, (2 << 20) + mlpIo(16)) << modeName(mode);
  };
  check(Mode::kEager);
  check(Mode::kDynamic);
}

TEST_F(MlpMemory, ReduceOverheadHoldsEveryCaptureInTheGraphPool) {
  // A capture keeps every intermediate apart (no reuse): 3 x b x 4,096 bytes.
  SessionOptions shared = options(Mode::kReduceOverhead);
  SessionOptions separate = shared;
  separate.graphPool = GraphPool::kSeparate;
  const ModeledMemory s = run(shared, {8, 16, 8});
  const ModeledMemory p = run(separate, {8, 16, 8});
  EXPECT_EQ(s.residentPlans, 2);
  EXPECT_EQ(s.workspaceBytes, 3 * 16 * 4096);
  EXPECT_EQ(p.workspaceBytes, 3 * 8 * 4096 + 3 * 16 * 4096);
  // The capturing calls ran op by op through the caching allocator: one 2 MiB segment.
  EXPECT_EQ(s.opByOpBytes, 2 << 20);
  EXPECT_EQ(p.residentBytes, 3 * 24 * 4096 + (2 << 20));
}

TEST_F(MlpMemory, WeightsAreTheGraphsConstants) {
  GraphBuilder b("weighted");
  const ValueId x = b.input("x", DType::kF32, {symbolDim("B"), 4});
  const ValueId w = b.constant(randomTensor(DType::kF32, Shape{4, 4}, 1), "w");
  const ValueId h = b.matmul(x, w);
  b.output(b.add(h, h));
  const Graph g = b.build();
  EXPECT_EQ(graphWeightBytes(g), 64);
  Session s(g, SessionOptions{});
  s.run(makeInputs(s.graph(), {Shape{2, 4}}, 0));
  EXPECT_EQ(s.stats().memory.weightsBytes, 64);
  // [2, 4] f32 h: 32 bytes, aligned to 64; x and the output 32 bytes each.
  EXPECT_EQ(s.stats().memory.residentBytes, 64 + 64);
  EXPECT_EQ(s.stats().memory.peakBytes, 64 + 64 + 32 + 32);
  // Weights beyond the capacity: refused when the session is built.
  SessionOptions tiny;
  tiny.deviceMemoryBytes = 63;
  try {
    Session refused(g, tiny);
    ADD_FAILURE() << "weights of 64 bytes fit 63";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kMemory);
    EXPECT_NE(std::string(e.what()).find("weights of graph weighted (64 bytes"), std::string::npos)
        << e.what();
  }
}

TEST_F(MlpMemory, StaticOutOfMemoryNamesTheShapeOrEvicts) {
  // 8 and 16 fit (8,724,480 bytes with 16's inputs and outputs); 32 needs 65,536 + 131,072 +
  // 262,144 of workspace + 8,658,944 of inputs and outputs = 9,117,696 > 9,100,000.
  SessionOptions o = options(Mode::kStatic);
  o.deviceMemoryBytes = 9100000;
  {
    Session s(graph_, o);
    s.run(inputs(8));
    s.run(inputs(16));
    try {
      s.run(inputs(32));
      ADD_FAILURE() << "32 fit";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kMemory);
      const std::string msg = e.what();
      EXPECT_NE(msg.find("the plan compiled for [x=[32, 1024]"), std::string::npos) << msg;
      EXPECT_NE(msg.find("would hold 9117696 bytes"), std::string::npos) << msg;
      EXPECT_NE(msg.find("capacity of 9100000 bytes"), std::string::npos) << msg;
      EXPECT_NE(msg.find("--device-memory"), std::string::npos) << msg;
      EXPECT_NE(msg.find("--on-oom evict"), std::string::npos) << msg;
    }
  }
  // --on-oom evict: dropping the least recently used plan (8) makes room.
  o.onOom = OnOom::kEvict;
  Session s(graph_, o);
  for (int64_t b : {8, 16, 32}) s.run(inputs(b));
  const SessionStats& st = s.stats();
  EXPECT_EQ(st.memory.evictions, 1);
  EXPECT_EQ(st.planCache.evictions, 1);
  EXPECT_EQ(st.memory.residentPlans, 2);
  EXPECT_EQ(st.memory.workspaceBytes, mlpWorkspace(16) + mlpWorkspace(32));
  EXPECT_EQ(st.memory.peakBytes, mlpWorkspace(16) + mlpWorkspace(32) + mlpIo(32));
  // 8 again: compiled again, and with 16 and 32 resident it fits (8,921,088 bytes).
  s.run(inputs(8));
  EXPECT_EQ(s.stats().graphCompiles, 4);
  EXPECT_EQ(s.stats().memory.evictions, 1);
  EXPECT_EQ(s.stats().memory.workspaceBytes, 458752);
}

// Issue 25's acceptance: the TensorRT-LLM-like case on the bundled serving trace.
TEST_F(MlpMemory, ServingTraceGearSetsEightApartThirtyTwoApartPowersOfTwo) {
  const auto trace = cli::loadTrace(example("mlp_serving.trace.jsonl"), graph_);
  ASSERT_EQ(trace.size(), 20000u);
  struct Case {
    std::string gears;
    int64_t count, separate;
  };
  const std::vector<Case> cases = {{gearsEvery(32), 2, 8192 * (32 + 64)},
                                   {kPow2Gears, 7, 8192 * 127},
                                   {gearsEvery(8), 8, 8192 * 288}};
  int64_t previous = 0;
  for (const Case& c : cases) {
    std::vector<int64_t> batches;
    for (const InputSignature& sig : trace) batches.push_back(sig[0][0]);
    SessionOptions shared = options(Mode::kGeared, c.gears);
    SessionOptions separate = shared;
    separate.graphPool = GraphPool::kSeparate;
    const ModeledMemory s = run(shared, batches), p = run(separate, batches);
    EXPECT_EQ(p.residentPlans, c.count) << c.gears;
    // Separate: the sum, growing with the gear count; shared: the largest gear's.
    EXPECT_EQ(p.workspaceBytes, c.separate) << c.gears;
    EXPECT_EQ(s.workspaceBytes, mlpWorkspace(64)) << c.gears;
    EXPECT_GT(p.workspaceBytes, previous) << c.gears;
    previous = p.workspaceBytes;
    // Every set pads some calls: one 2 MiB segment of padded copies.
    EXPECT_EQ(p.opByOpBytes, 2 << 20) << c.gears;
    EXPECT_EQ(p.peakBytes, c.separate + (2 << 20) + mlpIo(64)) << c.gears;
    // Without running a trace: the same workspace and resident bytes from the gear shapes.
    std::vector<int64_t> gearBatches;
    const GearConfig cfg = [&] {
      GearConfig g = GearConfig::fromGraph(graph_);
      applyGearsJson(g, c.gears);
      return g;
    }();
    const GearSet set = GearSet::build(cfg, MergePolicy::kZip, {});
    std::vector<InputSignature> shapes;
    for (size_t i = 0; i < set.size(); ++i)
      shapes.emplace_back(set.shapes(i).begin(), set.shapes(i).end());
    // (The graph the sessions above compile: the default passes but the bias adds' fusion.)
    Graph unfused = graph_;
    (void)defaultPipeline(std::vector<std::string>{"fuse-matmul-epilogue"}).run(unfused);
    const ShapeSetMemory est = modeledPlanMemory(unfused, shapes, GraphPool::kSeparate, false);
    EXPECT_EQ(est.workspaceBytes, c.separate) << c.gears;
    EXPECT_EQ(est.residentBytes, c.separate) << c.gears;
    EXPECT_EQ(est.peakBytes, c.separate + mlpIo(64)) << c.gears;
    EXPECT_EQ(modeledPlanMemory(unfused, shapes, GraphPool::kShared, false).workspaceBytes,
              mlpWorkspace(64));
  }
}

TEST_F(MlpMemory, LowCapacityRefusesTheEightApartGearsNamingTheGear) {
  // 10 MiB: gear 6 (56) needs 1,835,008 of workspace (8..56 separately) + its 8,855,552 of
  // inputs and outputs = 10,690,560 > 10,485,760.
  SessionOptions o = options(Mode::kGeared, gearsEvery(8));
  o.graphPool = GraphPool::kSeparate;
  o.deviceMemoryBytes = 10 << 20;
  o.onOom = OnOom::kEvict;  // gears are never evicted: the same error
  try {
    Session s(graph_, o);
    s.run(inputs(8));
    ADD_FAILURE() << "the 8-apart gears fit 10 MiB";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kMemory);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("gear 6 [x=[56, 1024]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("needs 458752 bytes (0.44 MiB) of workspace"), std::string::npos) << msg;
    EXPECT_NE(msg.find("would hold 10690560 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("capacity of 10485760 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("never evicted"), std::string::npos) << msg;
  }
  // The same gears in a shared pool fit, and so do the other sets in separate pools.
  o.graphPool = GraphPool::kShared;
  EXPECT_EQ(run(o, {8}).workspaceBytes, mlpWorkspace(64));
  o.graphPool = GraphPool::kSeparate;
  for (const std::string& gears : {kPow2Gears, gearsEvery(32)}) {
    gearOptions(o).json = gears;
    EXPECT_LE(run(o, {64}).peakBytes, 10 << 20) << gears;
  }
}

}  // namespace
}  // namespace gearbox

namespace gearbox {
namespace {

using testing_util::runGearbox;
using testing_util::shellQuote;

// A few serving requests (the CLI tests run the binary; the whole trace is the in-process
// tests' above): 64 runs its gear, 5 and 33 pad.
class DeviceMemoryCli : public ::testing::Test {
 protected:
  void SetUp() override {
    writeFileAtomic(trace_, "{\"x\": [64, 1024]}\n{\"x\": [5, 1024]}\n{\"x\": [33, 1024]}\n");
  }
  // The four-kernel MLP of MlpMemory's figures (its bias adds unfused, as there).
  std::string command(const std::string& cmd, const std::string& extra) const {
    return cmd + " " + shellQuote(example("mlp.gbx")) + " --trace " + shellQuote(trace_) +
           " --model-only --disable-pass fuse-matmul-epilogue " + extra;
  }
  std::string mlpRun(const std::string& extra) const { return command("run", "-q " + extra); }
  TempDir dir_;
  std::string trace_ = dir_.file("serving.jsonl");
};

TEST_F(DeviceMemoryCli, OutOfMemoryIsExitTwoNamingTheGear) {
  const std::string gears = shellQuote(gearsEvery(8));
  const auto r = runGearbox(mlpRun("--mode geared --gear-fallback pad --gears " + gears +
                                   " --graph-pool separate --device-memory 10MiB"));
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_NE(r.output.find("gearbox: out of memory: out of MODELED device memory: gear 6 "
                          "[x=[56, 1024], w1=[1024, 1024]"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("would hold 10690560 bytes (10.20 MiB), above its capacity of "
                          "10485760 bytes (10.00 MiB) (--device-memory)"),
            std::string::npos)
      << r.output;
  // A bad size names the option (exit 2 as every bad option).
  const auto bad = runGearbox(mlpRun("--device-memory 10MB/s"));
  EXPECT_EQ(bad.exitCode, 2) << bad.output;
  EXPECT_NE(bad.output.find("--device-memory '10MB/s': unknown unit 'MB/s'"), std::string::npos)
      << bad.output;
  const auto pool = runGearbox(mlpRun("--graph-pool private"));
  EXPECT_EQ(pool.exitCode, 2) << pool.output;
}

TEST_F(DeviceMemoryCli, ReportAndSummaryCarryTheModeledMemory) {
  const std::string json = dir_.file("r.json");
  const auto r = runGearbox(mlpRun("--mode geared --gear-fallback pad --gears " +
                                   shellQuote(kPow2Gears) + " --graph-pool separate --json " +
                                   shellQuote(json) + " --assert 'modeled_peak_bytes==12058624'"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("modeled device memory (a100-class, not measured): resident 2.99 MiB "
                          "= weights 0 B + workspace 1016.00 KiB (7 plans, graph pool "
                          "separate) + op-by-op pool 2.00 MiB; peak 11.50 MiB; capacity "
                          "40.00 GiB"),
            std::string::npos)
      << r.output;
  const nlohmann::json j = nlohmann::json::parse(readFile(json));
  EXPECT_EQ(j["modeled_resident_bytes"], 1040384 + (2 << 20));
  EXPECT_EQ(j["modeled_peak_bytes"], 1040384 + (2 << 20) + mlpIo(64));
  const nlohmann::json& m = j["modeled_memory"];
  EXPECT_EQ(m["workspace_bytes"], 1040384);
  EXPECT_EQ(m["resident_plans"], 7);
  EXPECT_EQ(m["graph_pool"], "separate");
  EXPECT_EQ(m["capacity_bytes"], int64_t{42949672960});
  EXPECT_EQ(m["evictions"], 0);
  EXPECT_NE(m["source"].get<std::string>().find("MODELED"), std::string::npos);
  EXPECT_EQ(j["config"]["memory"]["graph_pool"], "separate");
  EXPECT_EQ(j["config"]["memory"]["on_oom"], "error");
  // The simulated device's own figure stays: the larger of the gears' arenas (one per gear,
  // 1,040,384 bytes) and the caching allocator's segment of padded copies.
  EXPECT_EQ(j["peak_bytes"], 2 << 20);
}

TEST_F(DeviceMemoryCli, CompareTableHasTheModeledMemoryRows) {
  const auto r = runGearbox(command("compare", "--repeat 1 --modes static,eager"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  // static: the plans of 64, 5 and 33 resident, 8,192 x 102 bytes; its peak at the call of 33
  // (835,584 + 8,667,136 of inputs and outputs). eager: one 2 MiB segment, + 64's I/O.
  EXPECT_NE(r.output.find("MODELED memory resident                         816.00 KiB"
                          "              2.00 MiB"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("MODELED memory peak                               9.06 MiB"
                          "             10.51 MiB"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace gearbox
