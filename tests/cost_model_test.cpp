// The device model: profiles and their sources, per-op work counts, the roofline, the modeled
// breakdown of every mode, and the acceptance orderings of issue 10 (exact: modeled figures
// are deterministic).
#include "executor/cost_model.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "compiler/kernel_cost.h"
#include "driver/trace.h"
#include "executor/modes/geared.h"
#include "executor/session.h"
#include "graph/error.h"
#include "graph/text.h"
#include "test_models.h"

namespace gearbox {
namespace {

std::string example(const std::string& name) {
  return std::string(GEARBOX_SOURCE_DIR) + "/examples/" + name;
}

// The profile's values without the sources (which only a file carries).
std::string valuesOf(CostModel m) {
  m.sources.clear();
  m.description.clear();
  return costModelToJson(m);
}

TEST(DeviceProfile, BundledDefaultEqualsTheBuiltInDefaults) {
  EXPECT_EQ(std::string(kDefaultProfile), "a100-class");
  EXPECT_EQ(valuesOf(loadDeviceProfile(kDefaultProfile)), valuesOf(CostModel{}));
  // Every op with a kernel states its own compile terms (compileCost<Op>); Const has none.
  const CostModel m;
  EXPECT_EQ(m.kernelCompileUs.size(), static_cast<size_t>(kOpCount - 1));
  EXPECT_FALSE(m.kernelCompileUs.contains("Const"));
  EXPECT_EQ(m.kernelCompileUs.at("Conv2d"), compileCostTerms(OpKind::kConv2d).baseUs);
  EXPECT_GT(m.kernelCompileLog2FlopsUs.at("Conv2d"), 0);
  EXPECT_EQ(m.sources.at("kernel_compile_us.Conv2d"), compileCostTerms(OpKind::kConv2d).baseSource);
  // By name (compiled in) and by path (the file in the tree) give the same profile.
  EXPECT_EQ(costModelToJson(loadDeviceProfile(kDefaultProfile)),
            costModelToJson(loadDeviceProfile(example("devices/a100-class.json"))));
}

TEST(DeviceProfile, EveryBundledValueCarriesItsSource) {
  const auto names = bundledProfiles();
  EXPECT_NE(std::find(names.begin(), names.end(), "a100-class"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "cpu-host"), names.end());
  for (const std::string& name : names) {
    const auto j = nlohmann::json::parse(costModelToJson(loadDeviceProfile(name)));
    int values = 0;
    auto check = [&](const std::string& key, const nlohmann::json& v) {
      ++values;
      ASSERT_TRUE(v.is_object()) << name << ": " << key << " has no source";
      ASSERT_TRUE(v.contains("source")) << name << ": " << key;
      EXPECT_GT(v["source"].get<std::string>().size(), 10u) << name << ": " << key;
    };
    for (auto& [key, v] : j.items()) {
      if (key == "name" || key == "description") continue;
      if (v.is_object() && !v.contains("value")) {
        for (auto& [sub, x] : v.items()) check(key + "." + sub, x);
      } else {
        check(key, v);
      }
    }
    EXPECT_GT(values, 20) << name;
  }
}

TEST(DeviceProfile, UnknownNameListsTheBundledOnes) {
  try {
    loadDeviceProfile("h100");
    FAIL() << "no such profile";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown device profile 'h100' (bundled: "),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("a100-class"), std::string::npos) << e.what();
  }
}

TEST(DeviceProfile, OverridesAndErrors) {
  CostModel m;
  applyCostOverride(m, "launch_us=3");
  applyCostOverride(m, "kernel_compile_us.MatMul=500");
  applyCostOverride(m, "peak_gflops.float=1000");
  applyCostOverride(m, "sync_policy=end_only");
  EXPECT_EQ(m.launchUs, 3);
  EXPECT_EQ(m.kernelCompileUs.at("MatMul"), 500);
  // One entry overridden, the rest of the table kept with its sources.
  EXPECT_EQ(m.kernelCompileUs.at("Add"), CostModel{}.kernelCompileUs.at("Add"));
  EXPECT_EQ(m.sources.at("kernel_compile_us.MatMul"), "--cost kernel_compile_us.MatMul=500");
  EXPECT_TRUE(m.sources.at("kernel_compile_us.Add").starts_with("libxsmm"))
      << m.sources.at("kernel_compile_us.Add");
  EXPECT_EQ(m.peakGflops.at("float"), 1000);
  EXPECT_EQ(m.syncPolicy, SyncPolicy::kEndOnly);
  EXPECT_EQ(m.sources.at("launch_us"), "--cost launch_us=3");
  const std::string before = costModelToJson(m);
  EXPECT_THROW(applyCostOverride(m, "launch_us"), Error);
  EXPECT_THROW(applyCostOverride(m, "launch_us=abc"), Error);
  EXPECT_THROW(applyCostOverride(m, "launch_us=3x"), Error);
  EXPECT_THROW(applyCostOverride(m, "warp_us=1"), Error);
  EXPECT_THROW(applyCostOverride(m, "sync_policy=sometimes"), Error);
  EXPECT_THROW(applyCostOverride(m, "sync_us=-1"), Error);
  EXPECT_THROW(applyCostOverride(m, "memory_gbps=0"), Error);
  EXPECT_THROW(applyCostOverride(m, "generic_kernel_efficiency=0"), Error);
  EXPECT_THROW(applyCostJson(m, "{not json", "x.json"), Error);
  EXPECT_THROW(applyCostJson(m, R"({"sync_us": {"value": 1, "sauce": "x"}})", "x.json"), Error);
  EXPECT_EQ(costModelToJson(m), before) << "a failed override changes nothing";
}

TEST(DeviceProfile, OldCostModelKeysAreAcceptedOrRejectedNamingTheNewOnes) {
  // The unchanged keys of the first cost_model.json still load ...
  CostModel m;
  applyCostJson(m, R"({"kernel_compile_us": {"Add": 40}, "launch_us": 5, "sync_us": 15,
                       "alloc_us": 2, "sync_policy": "per_op", "comment": "old"})",
                "old.json");
  EXPECT_EQ(m.kernelCompileUs.at("Add"), 40);
  EXPECT_EQ(m.syncUs, 15);
  // ... the two whose meaning changed are refused with the keys that replace them.
  for (const auto& [key, replacement] :
       {std::pair{"graph_compile_us", "graph_compile_base_us and graph_compile_per_node_us"},
        std::pair{"graph_launch_us", "graph_launch_base_us and graph_launch_per_node_us"}}) {
    try {
      applyCostJson(m, fmt::format(R"({{"{}": 8}})", key), "old.json");
      FAIL() << key;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), fmt::format("old.json: cost model key '{}' was replaced "
                                                   "by {} (docs/cost-model.md)",
                                                   key, replacement));
    }
  }
}

KernelKey key(OpKind kind, std::vector<TensorType> inputs, std::optional<int64_t> dim = {}) {
  Attrs a;
  a.dim = dim;
  return makeKernelKey(kind, inputs, a);
}

TEST(KernelCost, FlopsAndBytesPerOp) {
  const auto f32 = [](Shape s) { return TensorType{DType::kF32, s}; };
  const auto i64 = [](Shape s) { return TensorType{DType::kI64, s}; };
  // Add with a row broadcast: 12 outputs, reads 12 + 3, writes 12 floats.
  KernelCost c = kernelCost(key(OpKind::kAdd, {f32({4, 3}), f32({3})}));
  EXPECT_EQ(c.flops, 12);
  EXPECT_EQ(c.bytes, (12 + 3 + 12) * 4);
  // MatMul [2, 3] x [3, 5]: 2*M*N*K flops; reads A and B, writes C.
  c = kernelCost(key(OpKind::kMatMul, {f32({2, 3}), f32({3, 5})}));
  EXPECT_EQ(c.flops, 2 * 2 * 5 * 3);
  EXPECT_EQ(c.bytes, (6 + 15 + 10) * 4);
  // Batched: the weight broadcast over 7 batches.
  c = kernelCost(key(OpKind::kMatMul, {f32({7, 2, 3}), f32({3, 5})}));
  EXPECT_EQ(c.flops, 7 * 2 * 2 * 5 * 3);
  // IndexSelect of 2 of 4 rows of [4, 3]: reads the 6 selected, the index, writes 6.
  c = kernelCost(key(OpKind::kIndexSelect, {f32({4, 3}), i64({2})}, 0));
  EXPECT_EQ(c.flops, 0);
  EXPECT_EQ(c.bytes, 6 * 4 + 2 * 8 + 6 * 4);
  // Cat [2, 3] + [2, 5] on dim 1: reads 16, writes 16.
  c = kernelCost(key(OpKind::kCat, {f32({2, 3}), f32({2, 5})}, 1));
  EXPECT_EQ(c.bytes, 32 * 4);
  // CatGather of 4 rows out of cat([2, 3], [6, 3]) on dim 0.
  c = kernelCost(key(OpKind::kCatGather, {f32({2, 3}), f32({6, 3}), i64({4})}, 0));
  EXPECT_EQ(c.bytes, 12 * 4 + 4 * 8 + 12 * 4);
  // A dynamic dim counts as 1.
  c = kernelCost(key(OpKind::kAdd, {f32({kAnyDim, 3}), f32({kAnyDim, 3})}));
  EXPECT_EQ(c.flops, 3);
}

TEST(KernelCost, AFullyGenericKeyCostsFiniteNonNegativeFigures) {
  // reduce-overhead's eager kernels make every dim of every input dynamic, the conv weight's
  // too; a dynamic dim counts as 1, so no figure goes negative (log2 of one did: NaN).
  const CostModel m;
  const TensorType x{DType::kF32, Shape{kAnyDim, kAnyDim, kAnyDim, kAnyDim}};
  Attrs conv;
  conv.setInts(attr::Conv2d::pads, {1, 1, 1, 1});
  for (const KernelKey& key : {makeKernelKey(OpKind::kConv2d, {x, x}, conv),
                               makeKernelKey(OpKind::kMatMul,
                                             {TensorType{DType::kF32, Shape{kAnyDim, kAnyDim}},
                                              TensorType{DType::kF32, Shape{kAnyDim, kAnyDim}}},
                                             {})}) {
    EXPECT_GE(kernelCost(key).flops, 0) << key.name();
    EXPECT_TRUE(std::isfinite(m.kernelCompile(key))) << key.name();
    EXPECT_GE(m.kernelCompile(key), m.kernelCompileUs.at(std::string(opKernelName(key.kind))));
    EXPECT_TRUE(std::isfinite(m.kernelRun(key, true))) << key.name();
  }
}

TEST(KernelCost, RooflineGenericEfficiencyAndMinimum) {
  CostModel m;
  m.peakGflops["float"] = 1000;  // 1e6 flop per us
  m.memoryGBps = 100;            // 1e5 bytes per us
  m.minKernelUs = 2;
  m.genericKernelEfficiency = 0.5;
  const auto f32 = [](Shape s) { return TensorType{DType::kF32, s}; };
  // MatMul 100x100x100: 2e6 flops -> 2 us compute; 120,000 bytes -> 1.2 us: compute-bound.
  const KernelKey mm = key(OpKind::kMatMul, {f32({100, 100}), f32({100, 100})});
  EXPECT_DOUBLE_EQ(m.kernelRun(mm, false), 2.0 + 2.0);
  EXPECT_DOUBLE_EQ(m.kernelRun(mm, true), 2.0 / 0.5 + 2.0);
  // Add of 1e5 floats: 1.2e6 bytes -> 12 us memory-bound.
  const KernelKey add = key(OpKind::kAdd, {f32({100000}), f32({100000})});
  EXPECT_DOUBLE_EQ(m.kernelRun(add, false), 12.0 + 2.0);
  // Graph terms.
  EXPECT_DOUBLE_EQ(m.graphCompile(100), m.graphCompileBaseUs + 100 * m.graphCompilePerNodeUs);
  EXPECT_DOUBLE_EQ(m.graphLaunch(3), m.graphLaunchBaseUs + 3 * m.graphLaunchPerNodeUs);
  // Kernel compile: the per-op base plus the size term where the profile has one.
  EXPECT_DOUBLE_EQ(m.kernelCompile(add), m.kernelCompileUs.at("Add"));
  EXPECT_DOUBLE_EQ(m.kernelCompile(mm),
                   m.kernelCompileUs.at("MatMul") +
                       m.kernelCompileLog2FlopsUs.at("MatMul") * std::log2(1 + 2e6));
}

TEST(ModeledTime, FollowsTheCountersAndTheShapesRun) {
  // Seed 001 static: 5 plans of one Add (5 kernel + 5 graph compiles), then every call is one
  // whole-graph launch of one kernel, one sync and the kernel itself.
  const CostModel c;
  Session s(testing_models::seed001());
  const std::vector<int64_t> sizes = {2, 3, 4, 4, 5, 5, 6};
  for (int64_t n : sizes) s.run(makeInputs(s.graph(), testing_models::seed001Sig(n), 0));
  const auto f32 = [](int64_t n) { return TensorType{DType::kF32, Shape{n, 2}}; };
  double compile = 0, compute = 0;
  for (int64_t n : {2, 3, 4, 5, 6})
    compile += c.kernelCompile(key(OpKind::kAdd, {f32(n), f32(n)})) + c.graphCompile(1);
  for (int64_t n : sizes) compute += c.kernelRun(key(OpKind::kAdd, {f32(n), f32(n)}), false);
  const ModeledTime& m = s.stats().modeled;
  EXPECT_DOUBLE_EQ(m.compileUs, compile);
  EXPECT_DOUBLE_EQ(m.launchSyncUs, 7 * (c.graphLaunch(1) + c.syncUs));
  EXPECT_DOUBLE_EQ(m.computeUs, compute);
  EXPECT_DOUBLE_EQ(m.hostDynamicUs, 0);
  EXPECT_DOUBLE_EQ(s.stats().modeledDeviceUs, m.total());
  EXPECT_DOUBLE_EQ(s.stats().modeledCompileUs, m.compileUs);

  // Dynamic, per-op syncs: one generic plan; every call pays shape inference and tiling on
  // the host, one launch, one sync, and the generic kernel at the runtime shape.
  SessionOptions o;
  o.mode = Mode::kDynamic;
  o.cost.launchUs = 3;
  Session d(testing_models::seed001(), o);
  for (int64_t n : sizes) d.run(makeInputs(d.graph(), testing_models::seed001Sig(n), 0));
  const ModeledTime& dm = d.stats().modeled;
  double generic = 0;
  for (int64_t n : sizes) generic += c.kernelRun(key(OpKind::kAdd, {f32(n), f32(n)}), true);
  EXPECT_DOUBLE_EQ(dm.compileUs, c.kernelCompile(key(OpKind::kAdd, {f32(kAnyDim), f32(kAnyDim)})) +
                                     c.graphCompile(1));
  EXPECT_DOUBLE_EQ(dm.launchSyncUs, 7 * (3 + c.syncUs));
  EXPECT_DOUBLE_EQ(dm.hostDynamicUs, 7 * (c.hostShapeInferenceUs + c.hostTilingUs));
  EXPECT_DOUBLE_EQ(dm.computeUs, generic);
}

TEST(ModeledTime, PaddedCallRunsAtTheGearShapeAndReportsItsWaste) {
  SessionOptions o;
  o.mode = Mode::kGeared;
  gearOptions(o).json = R"({"x1": {"0": [2, 8]}, "x2": {"0": [2, 8]}})";
  gearOptions(o).fallback = GearFallback::kPad;
  Session s(testing_models::seed001(), o);
  s.run(makeInputs(s.graph(), testing_models::seed001Sig(5), 0));  // padded to 8
  const CostModel c;
  const auto f32 = [](int64_t n) { return TensorType{DType::kF32, Shape{n, 2}}; };
  const double at8 = c.kernelRun(key(OpKind::kAdd, {f32(8), f32(8)}), false);
  const double at5 = c.kernelRun(key(OpKind::kAdd, {f32(5), f32(5)}), false);
  const CallRecord& r = s.history().back();
  EXPECT_TRUE(gearedCall(r).padded);
  EXPECT_DOUBLE_EQ(r.modeled.computeUs, at8);
  EXPECT_DOUBLE_EQ(r.modeled.paddingWasteUs, at8 - at5);
  EXPECT_GT(r.modeled.paddingWasteUs, 0);
}

TEST(ModeledTime, ModelOnlyGivesTheSameCountersAndModeledFigures) {
  // Model-only sessions skip the kernels; nothing they count or model may depend on that.
  const std::vector<int64_t> sizes = {1, 3, 3, 8, 2, 7, 7, 1};
  for (Mode mode : modes(ModeSet::kWithoutGears)) {
    SessionOptions o;
    o.mode = mode;
    Session ran(testing_models::fourOps(), o);
    o.modelOnly = true;
    Session modeled(testing_models::fourOps(), o);
    for (int64_t n : sizes) {
      const InputSignature sig = {Shape{n, 4}, Shape{4, 3}};
      ran.run(makeInputs(ran.graph(), sig, 0));
      modeled.run(makeInputs(modeled.graph(), sig, 0));
    }
    const SessionStats &a = ran.stats(), &b = modeled.stats();
    EXPECT_EQ(a.graphCompiles, b.graphCompiles) << modeName(mode);
    EXPECT_EQ(a.kernelCompiles, b.kernelCompiles) << modeName(mode);
    EXPECT_EQ(a.launches, b.launches) << modeName(mode);
    EXPECT_EQ(a.syncs, b.syncs) << modeName(mode);
    EXPECT_EQ(a.allocations, b.allocations) << modeName(mode);
    EXPECT_DOUBLE_EQ(a.modeledDeviceUs, b.modeledDeviceUs) << modeName(mode);
    EXPECT_DOUBLE_EQ(a.modeled.computeUs, b.modeled.computeUs) << modeName(mode);
  }
}

// ---- Acceptance of issue 10, on the default (accelerator-class) profile ----------------------

struct TraceRun {
  ModeledTime total;
  double lastCallUs = 0;
};

TraceRun runSeed001Steady(Mode mode) {
  SessionOptions o;
  o.mode = mode;
  // Gear options only for the mode that takes them: another mode refuses them.
  if (modeInfo(mode).needsGears)
    gearOptions(o).json = R"({"x1": {"0": [2, 4]}, "x2": {"0": [2, 4]}})";
  Session s(testing_models::seed001(), o);
  const auto big = makeInputs(s.graph(), testing_models::seed001Sig(4), 0);
  const auto small = makeInputs(s.graph(), testing_models::seed001Sig(2), 0);
  for (int i = 0; i < 1000; ++i) s.run(i % 2 == 0 ? big : small);
  return {s.stats().modeled, s.history().back().modeledDeviceUs};
}

TEST(DeviceModelAcceptance, Seed001SteadyStateStaticEqualsGearedAndBothBeatDynamic) {
  const TraceRun st = runSeed001Steady(Mode::kStatic);
  const TraceRun ge = runSeed001Steady(Mode::kGeared);
  const TraceRun dy = runSeed001Steady(Mode::kDynamic);
  // Per call in steady state: static == geared < dynamic.
  EXPECT_DOUBLE_EQ(st.lastCallUs, ge.lastCallUs);
  EXPECT_LT(st.lastCallUs, dy.lastCallUs);
  // Exactly: a whole-graph launch of one kernel + one sync + the kernel, against host shape
  // inference + tiling + a launch + a sync + the generic kernel.
  const CostModel c;
  const auto f32 = [](int64_t n) { return TensorType{DType::kF32, Shape{n, 2}}; };
  const KernelKey add2 = key(OpKind::kAdd, {f32(2), f32(2)});
  EXPECT_DOUBLE_EQ(st.lastCallUs, c.graphLaunch(1) + c.syncUs + c.kernelRun(add2, false));
  EXPECT_DOUBLE_EQ(dy.lastCallUs, c.hostShapeInferenceUs + c.hostTilingUs + c.launchUs + c.syncUs +
                                      c.kernelRun(add2, true));
  // Over the whole trace, static and geared beat dynamic despite compiling twice.
  EXPECT_LT(st.total.total(), dy.total.total());
  EXPECT_LT(ge.total.total(), dy.total.total());
  EXPECT_GT(st.total.compileUs, dy.total.compileUs);
}

// The MLP serving workload: x [B, 1024] through two 1024x1024 layers. Inputs are built once
// per batch size and the weights shared, and the sessions run model-only: 20,000 calls of a
// 1024x1024 MLP would take minutes to execute, and nothing modeled depends on the data.
class MlpServing : public ::testing::Test {
 protected:
  void SetUp() override {
    graph_ = loadGraph(example("mlp.gbx"));
    trace_ = cli::loadTrace(example("mlp_serving.trace.jsonl"), graph_);
    const auto weights = makeInputs(
        graph_, {Shape{1, 1024}, Shape{1024, 1024}, Shape{1024}, Shape{1024, 1024}, Shape{1024}},
        0);
    for (int64_t b = 1; b <= 64; ++b) {
      auto in = weights;
      in[0] = Tensor(DType::kF32, Shape{b, 1024});
      inputs_.push_back(std::move(in));
    }
  }
  ModeledTime run(Mode mode, const std::vector<InputSignature>& trace,
                  const std::string& gears = "") {
    SessionOptions o;
    o.mode = mode;
    o.modelOnly = true;
    if (modeInfo(mode).needsGears) {  // gear options only for the mode that takes them
      gearOptions(o).json = gears;
      gearOptions(o).fallback = GearFallback::kPad;
    }
    Session s(graph_, o);
    for (const InputSignature& sig : trace) s.run(inputs_.at(sig[0][0] - 1));
    return s.stats().modeled;
  }
  Graph graph_;
  std::vector<InputSignature> trace_;
  std::vector<std::vector<Tensor>> inputs_;
};

TEST_F(MlpServing, PowersOfTwoGearsBeatOneAndSixtyFourOnTheServingTrace) {
  ASSERT_EQ(trace_.size(), 20000u);
  const ModeledTime pow2 = run(Mode::kGeared, trace_, R"({"x": {"0": [1, 2, 4, 8, 16, 32, 64]}})");
  const ModeledTime wide = run(Mode::kGeared, trace_, R"({"x": {"0": [1, 64]}})");
  EXPECT_LT(pow2.total(), wide.total());
  // [1, 64] compiles less but pads almost every call to 64 rows, and says how much that costs.
  EXPECT_LT(wide.compileUs, pow2.compileUs);
  EXPECT_GT(wide.paddingWasteUs, 0);
  EXPECT_GT(wide.paddingWasteUs, 2 * pow2.paddingWasteUs);
  EXPECT_GT(wide.paddingWasteUs, pow2.total() - (wide.total() - wide.paddingWasteUs));
}

TEST_F(MlpServing, DynamicBeatsStaticOnFiftyDistinctSizes) {
  std::vector<InputSignature> trace;
  for (int64_t b = 15; b < 65; ++b) trace.push_back({Shape{b, 1024}});
  for (auto& sig : trace)
    for (const ValueId v : {1, 2, 3, 4}) sig.push_back(graph_.values[graph_.inputs[v]].type.shape);
  const ModeledTime st = run(Mode::kStatic, trace);
  const ModeledTime dy = run(Mode::kDynamic, trace);
  EXPECT_LT(dy.total(), st.total());
  EXPECT_GT(st.compileUs - dy.compileUs, st.total() - st.compileUs - (dy.total() - dy.compileUs))
      << "compiles dominate";
}

Graph addChain(int nodes) {
  GraphBuilder b("chain");
  const ValueId x = b.input("x", DType::kF32, {4});
  ValueId v = b.add(x, x);
  for (int i = 1; i < nodes; ++i) v = b.add(v, x);
  b.output(v);
  return b.build();
}

TEST(DeviceModelAcceptance, GraphCompileGrowsWithNodes) {
  double compile[2];
  int i = 0;
  for (int nodes : {100, 10000}) {
    Session s(addChain(nodes));
    s.run(makeInputs(s.graph(), {Shape{4}}, 0));
    ASSERT_EQ(s.graph().nodes.size(), static_cast<size_t>(nodes));
    compile[i++] = s.stats().modeled.compileUs;
  }
  const CostModel c;
  EXPECT_GT(compile[1], compile[0]);
  // One Add kernel either way: the difference is the per-node term.
  EXPECT_DOUBLE_EQ(compile[1] - compile[0], 9900 * c.graphCompilePerNodeUs);
}

}  // namespace
}  // namespace gearbox
