// reduce-overhead mode (executor/modes/reduce_overhead.cpp): captures per distinct signature up
// to the capture limit, one launch per replayed call, the MODELED per-call time between static
// and eager, static kernels from a precompiled bundle, and the capture limit said once. Over
// seed 001's trace (examples/seed001_add.*) and the MLP serving trace. Every counter is exact.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "compiler/kernel_store.h"
#include "driver/trace.h"
#include "executor/session.h"
#include "graph/error.h"
#include "graph/text.h"
#include "tests/cli_util.h"
#include "tests/temp_dir.h"
#include "tests/warning_capture.h"

namespace gearbox {
namespace {

std::string examplePath(const std::string& file) {
  return std::string(GEARBOX_SOURCE_DIR) + "/examples/" + file;
}

int64_t modeCounter(const SessionStats& st, const std::string& name) {
  for (const ModeCounter& c : st.modeCounters)
    if (c.name == name) return c.value;
  ADD_FAILURE() << "no mode counter " << name;
  return -1;
}

std::string modeField(const CallRecord& r, const std::string& name) {
  for (const ModeField& f : r.modeFields)
    if (f.name == name) return f.value;
  return "";
}

class ReduceOverheadSeed001 : public ::testing::TestWithParam<DeviceKind> {
 protected:
  void SetUp() override {
    graph_ = loadGraph(examplePath("seed001_add.gbx"));
    trace_ = cli::loadTrace(examplePath("seed001_add.trace.jsonl"), graph_);
  }
  // Runs the trace; checks every output against the reference executor.
  std::unique_ptr<Session> run(Mode mode, SessionOptions o = {}) {
    o.mode = mode;
    o.device = GetParam();
    auto s = std::make_unique<Session>(graph_, o);
    for (size_t i = 0; i < trace_.size(); ++i) {
      const auto in = makeInputs(s->graph(), trace_[i], i);
      const auto out = s->run(in);
      EXPECT_TRUE(out.at(0).equals(referenceRun(s->graph(), in).at(0))) << "iteration " << i;
    }
    return s;
  }
  size_t distinct() const {
    const std::vector<std::string> all = signatures();
    return std::set<std::string>(all.begin(), all.end()).size();
  }
  std::vector<std::string> signatures() const {
    std::vector<std::string> out;
    for (const auto& sig : trace_) out.push_back(signatureToString(graph_, sig));
    return out;
  }
  Graph graph_;
  std::vector<InputSignature> trace_;
};

TEST_P(ReduceOverheadSeed001, CapturesEachSignatureOnceAndReplaysInOneLaunch) {
  ASSERT_EQ(trace_.size(), 7u);  // sizes 2, 3, 4, 4, 5, 5, 6
  const auto s = run(Mode::kReduceOverhead);
  const SessionStats& st = s->stats();
  EXPECT_EQ(distinct(), 5u);
  EXPECT_EQ(modeCounter(st, "captures"), 5);
  EXPECT_EQ(modeCounter(st, "replays"), 2);
  EXPECT_EQ(modeCounter(st, "eager_runs"), 0);
  EXPECT_EQ(modeCounter(st, "capture_limit"), 64);
  // A capture is counted as a graph compile; the one kernel is the eager Add, shape-generic.
  EXPECT_EQ(st.graphCompiles, 5);
  EXPECT_EQ(st.kernelCompiles, 1);
  EXPECT_EQ(st.planCacheHits, 2);
  EXPECT_EQ(st.planCacheMisses, 5);
  EXPECT_EQ(st.launches, 7);
  EXPECT_EQ(st.syncs, 7);
  EXPECT_EQ(st.allocations, 0);  // one Add: no intermediates
  for (const CallRecord& r : s->history()) {
    const bool replayed = modeField(r, "capture").starts_with("replayed");
    EXPECT_EQ(replayed, r.iteration == 3 || r.iteration == 5) << r.iteration;
    EXPECT_EQ(r.graphCompiled, !replayed);
    if (!replayed) continue;
    EXPECT_EQ(r.launches, 1);
    EXPECT_EQ(r.syncs, 1);
    EXPECT_EQ(r.modeled.hostDynamicUs, 0) << "no per-op host work on a replay";
    EXPECT_EQ(r.modeled.compileUs, 0);
  }
}

TEST_P(ReduceOverheadSeed001, ReplayedCallCostsBetweenStaticAndEager) {
  const auto ro = run(Mode::kReduceOverhead);
  const auto st = run(Mode::kStatic);
  const auto eg = run(Mode::kEager);
  // Iteration 3 repeats iteration 2's shapes: no mode compiles anything for it.
  const CostModel& c = ro->options().cost;
  const double r = ro->history()[3].modeledDeviceUs, s = st->history()[3].modeledDeviceUs,
               e = eg->history()[3].modeledDeviceUs;
  EXPECT_LT(s, r);
  EXPECT_LT(r, e);
  // The replay is the static launch with the generic Add kernel in place of the static one.
  KernelKey real = makeKernelKey(
      OpKind::kAdd, {TensorType{DType::kF32, Shape{4, 2}}, TensorType{DType::kF32, Shape{4, 2}}},
      {});
  EXPECT_NEAR(r - s, c.kernelRun(real, true) - c.kernelRun(real, false), 1e-9);
  // A capture costs the profile's graph-compile terms (MODELED), like a plan compile.
  EXPECT_DOUBLE_EQ(ro->history()[0].modeled.compileUs,
                   c.graphCompile(ro->graph().nodes.size()) +
                       c.kernelCompile(makeKernelKey(OpKind::kAdd,
                                                     {TensorType{DType::kF32, Shape{kAnyDim, 2}},
                                                      TensorType{DType::kF32, Shape{kAnyDim, 2}}},
                                                     {})));
}

TEST_P(ReduceOverheadSeed001, StaticKernelsFromABundleReplayAtStaticCost) {
  // Seed 003's workflow: record the kernels (here the static ones eager mode compiles), bundle
  // them, and run reduce-overhead with the bundle: its kernels are the static ones.
  auto bundle = std::make_shared<BundleStore>();
  {
    SessionOptions rec;
    rec.compileHooks.push_back(
        [&](const KernelSpec& spec) { bundle->add(std::make_shared<KernelSpec>(spec)); });
    run(Mode::kEager, rec);
  }
  ASSERT_EQ(bundle->size(), 5u);
  SessionOptions o;
  o.kernelStores.push_back(bundle);
  const auto ro = run(Mode::kReduceOverhead, o);
  const auto st = run(Mode::kStatic);
  EXPECT_EQ(ro->stats().kernelCompiles, 0);
  EXPECT_EQ(ro->stats().kernelStoreHits, 5);
  EXPECT_EQ(bundle->hits(), 5);
  EXPECT_EQ(modeCounter(ro->stats(), "captures"), 5);
  // A replay with static kernels costs what a static plan's cached call costs.
  EXPECT_DOUBLE_EQ(ro->history()[3].modeledDeviceUs, st->history()[3].modeledDeviceUs);
  EXPECT_DOUBLE_EQ(ro->history()[5].modeledDeviceUs, st->history()[5].modeledDeviceUs);
  // ... less than with the generic kernels.
  const auto generic = run(Mode::kReduceOverhead);
  EXPECT_LT(ro->history()[3].modeledDeviceUs, generic->history()[3].modeledDeviceUs);
}

TEST_P(ReduceOverheadSeed001, CaptureLimitRunsNewShapesEagerlyAndSaysSoOnce) {
  testing_util::WarningCapture warnings;
  SessionOptions o;
  o.modeOptions["capture_limit"] = "2";
  const auto s = run(Mode::kReduceOverhead, o);
  const SessionStats& st = s->stats();
  EXPECT_EQ(modeCounter(st, "captures"), 2);  // sizes 2 and 3
  EXPECT_EQ(modeCounter(st, "replays"), 0);
  EXPECT_EQ(modeCounter(st, "eager_runs"), 5);
  EXPECT_EQ(st.graphCompiles, 2);
  EXPECT_EQ(st.launches, 7);
  EXPECT_EQ(modeField(s->history()[2], "capture"), "eager (capture limit)");
  int said = 0;
  for (const std::string& m : warnings.messages())
    if (m.find("hit capture_limit (2)") != std::string::npos) ++said;
  EXPECT_EQ(said, 1);
}

INSTANTIATE_TEST_SUITE_P(Devices, ReduceOverheadSeed001,
                         ::testing::Values(DeviceKind::kInline, DeviceKind::kStream),
                         [](const auto& info) { return deviceKindName(info.param); });

TEST(ReduceOverheadOptions, CheckedWhenTheSessionIsBuilt) {
  const Graph g = loadGraph(examplePath("seed001_add.gbx"));
  for (const char* bad : {"0", "-1", "x", "2x", ""}) {
    SessionOptions o;
    o.mode = Mode::kReduceOverhead;
    o.modeOptions["capture_limit"] = bad;
    EXPECT_THROW(Session(g, o), Error) << bad;
  }
  // An option the mode does not take is refused, in every mode.
  for (Mode m : modes(ModeSet::kWithoutGears)) {
    SessionOptions o;
    o.mode = m;
    o.modeOptions["no_such_option"] = "1";
    EXPECT_THROW(Session(g, o), Error) << modeName(m);
  }
}

// The MLP serving trace (20,000 requests, batch 1..64), model-only as in cost_model_test.
TEST(ReduceOverheadServing, CapturesDistinctBatchesAndCostsBetweenStaticAndEager) {
  const Graph g = loadGraph(examplePath("mlp.gbx"));
  const auto trace = cli::loadTrace(examplePath("mlp_serving.trace.jsonl"), g);
  ASSERT_EQ(trace.size(), 20000u);
  std::set<int64_t> batches;
  for (const auto& sig : trace) batches.insert(sig[0][0]);
  const auto weights = makeInputs(
      g, {Shape{1, 1024}, Shape{1024, 1024}, Shape{1024}, Shape{1024, 1024}, Shape{1024}}, 0);
  std::vector<std::vector<Tensor>> inputs;
  for (int64_t b = 1; b <= 64; ++b) {
    auto in = weights;
    in[0] = Tensor(DType::kF32, Shape{b, 1024});
    inputs.push_back(std::move(in));
  }
  auto run = [&](Mode mode) {
    SessionOptions o;
    o.mode = mode;
    o.modelOnly = true;
    o.onRecompileLimit = OnRecompileLimit::kUnlimited;  // static: a plan per batch size
    auto s = std::make_unique<Session>(g, o);
    for (const InputSignature& sig : trace) s->run(inputs.at(sig[0][0] - 1));
    return s;
  };
  const auto ro = run(Mode::kReduceOverhead);
  const SessionStats& st = ro->stats();
  const int64_t captures = static_cast<int64_t>(std::min<size_t>(batches.size(), 64));
  EXPECT_EQ(modeCounter(st, "captures"), captures);
  EXPECT_EQ(modeCounter(st, "replays"), 20000 - captures);
  EXPECT_EQ(modeCounter(st, "eager_runs"), 0);
  EXPECT_EQ(st.graphCompiles, captures);
  // Two ops (each matmul with its bias add as its epilogue): a capture launches each, a replay
  // launches the graph once.
  EXPECT_EQ(st.launches, 2 * captures + (20000 - captures));
  EXPECT_EQ(st.syncs, 20000);
  // One generic kernel (MatMul with a bias) serves every batch size.
  EXPECT_EQ(st.kernelCompiles, 1);

  const auto sta = run(Mode::kStatic);
  const auto eg = run(Mode::kEager);
  auto perCall = [](const Session& s) {
    const ModeledTime& m = s.stats().modeled;
    return (m.total() - m.compileUs) / static_cast<double>(s.stats().iterations);
  };
  EXPECT_LT(perCall(*sta), perCall(*ro));
  EXPECT_LT(perCall(*ro), perCall(*eg));
  // The figures for the notes, each labelled with its mode's name from the table.
  for (const Session* s : {sta.get(), ro.get(), eg.get()})
    std::printf("MODELED per call without compiles, serving trace, %s: %.3f us\n",
                modeName(s->options().mode), perCall(*s));
}

// compare takes its columns from the mode table: reduce-overhead is one, with no change there.
TEST(ReduceOverheadCompare, IsAColumnOfCompare) {
  const auto r = testing_util::runGearbox(
      "compare " + testing_util::shellQuote(examplePath("seed001_add.gbx")) + " --trace " +
      testing_util::shellQuote(examplePath("seed001_add.trace.jsonl")));
  EXPECT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("reduce-overhead"), std::string::npos) << r.output;
}

// Seed 003's workflow with the CLI: record the op shapes (eager, --record-op-info), precompile
// a bundle, run reduce-overhead with it: every kernel is a static one from the bundle, and the
// capture limit is an option of the mode.
TEST(ReduceOverheadCli, PrecompiledBundleSuppliesStaticKernels) {
  using testing_util::runGearbox;
  using testing_util::shellQuote;
  testing_util::TempDir dir;
  const std::string model = shellQuote(examplePath("seed001_add.gbx"));
  const std::string trace = shellQuote(examplePath("seed001_add.trace.jsonl"));
  const std::string ro = std::string(modeName(Mode::kReduceOverhead));
  auto r = runGearbox("run " + model + " --trace " + trace + " --mode " +
                      std::string(modeName(Mode::kEager)) + " -q --record-op-info " +
                      shellQuote(dir.file("rec")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  r = runGearbox("precompile " + shellQuote(dir.file("rec")) + " -o " +
                 shellQuote(dir.file("k.run")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  auto report = [&](const std::string& extra) {
    const std::string json = dir.file("r.json");
    const auto run = runGearbox("run " + model + " --trace " + trace + " --mode " + ro +
                                " -q --json " + shellQuote(json) + " " + extra);
    EXPECT_EQ(run.exitCode, 0) << run.output;
    std::ifstream in(json);
    return nlohmann::json::parse(in);
  };
  const auto withBundle = report("--kernel-bundle " + shellQuote(dir.file("k.run")));
  EXPECT_EQ(withBundle["kernel_compiles"], 0);
  EXPECT_EQ(withBundle["kernel_store_hits"], 5);
  EXPECT_EQ(withBundle["mode_counters"]["captures"], 5);
  const auto generic = report("");
  EXPECT_EQ(generic["kernel_compiles"], 1);
  EXPECT_LT(withBundle["modeled"]["compute_us"].get<double>(),
            generic["modeled"]["compute_us"].get<double>());
  const auto limited = report("--mode-option " + ro + ".capture_limit=3");
  EXPECT_EQ(limited["mode_counters"]["captures"], 3);
  EXPECT_EQ(limited["mode_counters"]["replays"], 1);     // sizes 2, 3, 4 captured; 4 again
  EXPECT_EQ(limited["mode_counters"]["eager_runs"], 3);  // 5, 5, 6
  EXPECT_EQ(limited["config"]["mode_options"]["capture_limit"], "3");
  // A name the mode does not take, or a mode that does not exist, is a config error.
  r = runGearbox("run " + model + " --trace " + trace + " --mode " + ro + " -q --mode-option " +
                 ro + ".nope=1");
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_NE(r.output.find("takes no option 'nope'"), std::string::npos) << r.output;
  r = runGearbox("run " + model + " --trace " + trace + " -q --mode-option nosuchmode.x=1");
  EXPECT_EQ(r.exitCode, 2) << r.output;
}

}  // namespace
}  // namespace gearbox
