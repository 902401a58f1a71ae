// Hostile inputs at the library level (issue 15): checked size arithmetic, the tensor size
// limit, JSON depth, gears JSON at scale, regular-file-only reads, writers that keep what the
// path is, a kernel store that skips an unwritable entry, forged kernel files, and the memory
// planner's indexed overlap search against the quadratic original.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "compiler/compile_log.h"
#include "compiler/kernel_store.h"
#include "compiler/kernel_validate.h"
#include "compiler/memory_plan.h"
#include "executor/session.h"
#include "expect_error.h"
#include "gears/gear_set.h"
#include "gears/gear_spec.h"
#include "graph/checked.h"
#include "graph/file_io.h"
#include "graph/json_limits.h"
#include "graph/npy.h"
#include "graph/text.h"
#include "temp_dir.h"
#include "warning_capture.h"

namespace gearbox {
namespace {

using testing_util::WarningCapture;

namespace fs = std::filesystem;
using testing_util::errorOf;
using testing_util::TempDir;
using Json = nlohmann::ordered_json;

constexpr int64_t k2p61 = int64_t{1} << 61;
constexpr int64_t k2p62 = int64_t{1} << 62;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TensorType f32(Shape s) {
  return TensorType{DType::kF32, s};
}

// ---- checked arithmetic and the size limit ----------------------------------------------------

TEST(CheckedSize, HelpersReportOverflowInsteadOfWrapping) {
  int64_t r = 0;
  EXPECT_TRUE(checkedMul(int64_t{1} << 31, int64_t{1} << 31, &r));
  EXPECT_EQ(r, k2p62);
  EXPECT_FALSE(checkedMul(k2p62, 2, &r));
  EXPECT_FALSE(checkedAdd(k2p62, k2p62, &r));
  EXPECT_TRUE(
      contains(errorOf([] { mulOrFail(k2p62, 4, "x"); }, ErrorKind::kShape), "overflows int64"));
  EXPECT_TRUE(contains(errorOf([] { addOrFail(INT64_MAX, 1, "y"); }, ErrorKind::kShape),
                       "overflows int64"));
}

TEST(CheckedSize, NumelNearTwoToThe62ThrowsInsteadOfWrapping) {
  // 2^31 * 2^31 = 2^62 fits; times 4 does not.
  EXPECT_EQ((Shape{int64_t{1} << 31, int64_t{1} << 31}).numel(), k2p62);
  const std::string msg = errorOf(
      [] {
        (void)Shape({int64_t{1} << 31, int64_t{1} << 31, 4}).numel();
      },
      ErrorKind::kShape);
  EXPECT_TRUE(contains(msg, "element count overflows")) << msg;
}

TEST(CheckedSize, TheLimitNamesInputDimAndValue) {
  EXPECT_NO_THROW(checkTensorSize(Shape{1 << 20, 1 << 18}, DType::kF32, "t", "x"));  // 2^40
  const std::string msg = errorOf(
      [] {
        checkTensorSize(Shape{k2p61, 2}, DType::kF32, "trace.jsonl:3", "input 'x1'");
      },
      ErrorKind::kShape);
  EXPECT_EQ(msg,
            "trace.jsonl:3: input 'x1' dim 0 = 2305843009213693952: shape [2305843009213693952, "
            "2] of f32 would be more than 2^40 bytes (the limit on one tensor)");
  // Zero dims count as 1: [0, 2^61] holds nothing but its strides would still wrap.
  EXPECT_TRUE(contains(errorOf(
                           [] {
                             checkTensorSize(Shape{0, k2p61}, DType::kI64, "", "a");
                           },
                           ErrorKind::kShape),
                       "dim 1 = 2305843009213693952"));
  // Dynamic dims are checked once concrete.
  EXPECT_NO_THROW(checkTensorSize(Shape{-1, 1 << 20}, DType::kF32, "", "x"));
  EXPECT_THROW(Tensor(DType::kF32, Shape{k2p61, 2}), Error);
}

TEST(CheckedSize, CatDimsSummingPastInt64AreAnError) {
  const std::vector<TensorType> in{f32({k2p62, 1}), f32({k2p62, 1})};
  const Attrs attrs{0};
  const std::string msg = errorOf(
      [&] {
        inferNode(InferContext{OpKind::kCat, in, attrs, nullptr, -1, "cat"});
      },
      ErrorKind::kShape);
  EXPECT_TRUE(contains(msg, "overflows int64")) << msg;
  // A sum that fits int64 but not the byte limit fails the output check.
  const std::vector<TensorType> big{f32({int64_t{1} << 38, 1}), f32({int64_t{1} << 38, 1})};
  const std::string out = errorOf(
      [&] {
        inferNode(InferContext{OpKind::kCat, big, attrs, nullptr, -1, "cat"});
      },
      ErrorKind::kShape);
  EXPECT_TRUE(contains(out, "cat: output dim 0 = 549755813888")) << out;
}

TEST(CheckedSize, IndexSelectOverZeroRowsWithTwoToThe62IndicesFailsAtInference) {
  const Attrs attrs{0};
  const std::vector<TensorType> empty{f32({0, 4}), TensorType{DType::kI64, Shape{k2p62}}};
  const std::string msg = errorOf(
      [&] {
        inferNode(InferContext{OpKind::kIndexSelect, empty, attrs, nullptr, -1, "is"});
      },
      ErrorKind::kIndex);
  EXPECT_TRUE(contains(msg, "every index is out of range")) << msg;
  // Over a non-empty input the output [2^62, 4] is past the size limit.
  const std::vector<TensorType> rows{f32({5, 4}), TensorType{DType::kI64, Shape{k2p62}}};
  EXPECT_TRUE(
      contains(errorOf(
                   [&] {
                     inferNode(InferContext{OpKind::kIndexSelect, rows, attrs, nullptr, -1, "is"});
                   },
                   ErrorKind::kShape),
               "output dim 0 = 4611686018427387904"));
}

TEST(CheckedSize, GearSetBuildRefusesHugeGearsInsteadOfSummingThem) {
  const std::vector<InputDecl> decls{{"x1", Shape{-1, 2}}, {"x2", Shape{-1, 2}}};
  const GearConfig cfg = parseGearsJson(
      decls, R"({"x1": {"0": [2, 4611686018427387904]}, "x2": {"0": [2, 4611686018427387904]}})");
  const std::string msg =
      errorOf([&] { GearSet::build(cfg, MergePolicy::kZip); }, ErrorKind::kGear);
  EXPECT_TRUE(contains(msg, "gear 1: input 'x1'")) << msg;
  // Each gear fits on its own, but the two inputs together pass the limit.
  const GearConfig sum =
      parseGearsJson(decls, R"({"x1": {"0": [2, 300000000000]}, "x2": {"0": [2, 300000000000]}})");
  EXPECT_TRUE(contains(errorOf([&] { GearSet::build(sum, MergePolicy::kZip); }, ErrorKind::kGear),
                       "more than 2^40 elements together"));
}

// ---- JSON limits ------------------------------------------------------------------------------

std::string deepJson(int depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

TEST(JsonLimits, DepthIsCheckedLinearlyAndStringsDoNotCount) {
  EXPECT_NO_THROW(checkJsonDepth(deepJson(kMaxJsonDepth), "x"));
  EXPECT_EQ(errorOf([] { checkJsonDepth(deepJson(100000), "f.json"); }, ErrorKind::kParse),
            "f.json: JSON nested deeper than 64 levels at byte 64");
  EXPECT_NO_THROW(checkJsonDepth("[\"" + std::string(1000, '[') + "\\\"\"]", "x"));
}

TEST(JsonLimits, HundredThousandDeepDescriptorBundleAndGearsAreClearErrors) {
  const std::string deep = "{\"a\": " + deepJson(100000) + "}";
  EXPECT_TRUE(contains(errorOf([&] { parseKernelDescriptor(deep); }, ErrorKind::kParse),
                       "nested deeper than 64"));
  // 5,000 levels were enough to crash a descriptor load before.
  EXPECT_TRUE(contains(errorOf([&] { parseKernelDescriptor(deepJson(5000)); }, ErrorKind::kParse),
                       "nested deeper"));
  const std::vector<InputDecl> decls{{"x1", Shape{-1, 2}}};
  EXPECT_TRUE(contains(
      errorOf([&] { parseGearsJson(decls, "{\"x1\": {\"0\": " + deepJson(100000) + "}}"); },
              ErrorKind::kGear),
      "nested deeper than 64"));
  TempDir dir;
  { std::ofstream(dir.file("b.json")) << deep; }
  EXPECT_TRUE(contains(errorOf([&] { loadKernelBundle(dir.file("b.json")); }, ErrorKind::kIo),
                       "nested deeper than 64"));
}

TEST(GearsJson, HundredThousandKeysFailFastWithTheUnknownInput) {
  // Quadratic before (25 s for 100k keys): a hash set per object, and no object may hold more
  // keys than a valid document can.
  const std::vector<InputDecl> decls{{"x1", Shape{-1, 2}}, {"x2", Shape{-1, 2}}};
  std::string doc = "{";
  for (int i = 0; i < 100000; ++i) doc += fmt::format("\"k{}\": {{\"0\": [2, 4]}},", i);
  doc.back() = '}';
  const std::string msg = errorOf([&] { parseGearsJson(decls, doc); }, ErrorKind::kGear);
  EXPECT_TRUE(contains(msg, "no such input 'k0'") || contains(msg, "input 'k0'")) << msg;
  std::string dims = "{\"x1\": {";
  for (int i = 0; i < 50000; ++i) dims += fmt::format("\"{}\": [2, 4],", i);
  dims.back() = '}';
  dims += "}";
  EXPECT_TRUE(contains(errorOf([&] { parseGearsJson(decls, dims); }, ErrorKind::kGear),
                       "dim_gears has more than 6 keys"));
  // Repeated keys are still refused.
  EXPECT_TRUE(
      contains(errorOf([&] { parseGearsJson(decls, R"({"x1": {"0": [2, 4], "0": [2, 8]}})"); },
                       ErrorKind::kGear),
               "repeats the key \"0\""));
}

// ---- untrusted files --------------------------------------------------------------------------

TEST(UntrustedFiles, FifoDirectoryAndDeviceAreRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Nothing writes the FIFO: a blocking open would hang this test forever.
  EXPECT_TRUE(contains(errorOf([&] { readFile(fifo); }, ErrorKind::kIo), "it is a FIFO"));
  EXPECT_TRUE(contains(errorOf([&] { loadGraph(fifo); }, ErrorKind::kIo), "not a regular file"));
  EXPECT_TRUE(contains(errorOf([&] { loadNpy(fifo); }, ErrorKind::kIo), "it is a FIFO"));
  EXPECT_TRUE(contains(errorOf([&] { readFile(dir.path().string()); }, ErrorKind::kIo),
                       "it is a directory"));
  EXPECT_TRUE(contains(errorOf([&] { readFile("/dev/zero"); }, ErrorKind::kIo),
                       "it is a character device"));
  EXPECT_TRUE(contains(errorOf([&] { loadKernelBundle(fifo); }, ErrorKind::kIo), "FIFO"));
  // A symlink to a regular file is read through.
  { std::ofstream(dir.file("real")) << "abc"; }
  fs::create_symlink(dir.file("real"), dir.file("link"));
  EXPECT_EQ(readFile(dir.file("link")), "abc");
  EXPECT_TRUE(contains(errorOf([&] { readFile(dir.file("real"), 2); }, ErrorKind::kIo),
                       "above the limit of 2 bytes"));
}

TEST(UntrustedFiles, AKernelFileThatIsAFifoIsDamagedNotAHang) {
  TempDir dir;
  const KernelSpec spec =
      *compileKernelSpec(makeKernelKey(OpKind::kAdd, {f32({2, 4}), f32({2, 4})}, Attrs{}));
  const std::string path = (dir.path() / kernelFileName(spec.key)).string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  KernelMetaStore store(dir.path().string());
  EXPECT_EQ(store.load(spec.key), nullptr);
  EXPECT_EQ(store.stats().corrupt, 1);
}

TEST(Writers, SymlinkTargetIsReplacedAndTheLinkKept) {
  TempDir dir;
  { std::ofstream(dir.file("target.json")) << "old"; }
  fs::create_symlink("target.json", dir.file("link.json"));
  writeFileAtomic(dir.file("link.json"), "new");
  EXPECT_TRUE(fs::is_symlink(dir.file("link.json")));
  EXPECT_EQ(readFile(dir.file("target.json")), "new");
  // A dangling link creates its target.
  fs::create_symlink("made.json", dir.file("dangling.json"));
  writeFileAtomic(dir.file("dangling.json"), "x");
  EXPECT_TRUE(fs::is_symlink(dir.file("dangling.json")));
  EXPECT_EQ(readFile(dir.file("made.json")), "x");
}

TEST(Writers, CharacterDevicesAreWrittenInPlaceAndDirectoriesRefused) {
  TempDir dir;
  const std::string dev = dir.file("null");
  // Our own null device, so a regression cannot replace the system's /dev/null.
  if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) GTEST_SKIP() << "mknod needs root";
  writeFileAtomic(dev, "discarded");
  struct stat st {};
  ASSERT_EQ(::stat(dev.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  fs::create_directory(dir.file("d"));
  EXPECT_TRUE(contains(errorOf([&] { writeFileAtomic(dir.file("d"), "x"); }, ErrorKind::kIo),
                       "it is a directory"));
  // A FIFO nobody reads is an error, not a hang.
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  EXPECT_TRUE(contains(errorOf([&] { writeFileAtomic(dir.file("fifo"), "x"); }, ErrorKind::kIo),
                       "nothing is reading it"));
  struct stat fst {};
  ASSERT_EQ(::stat(dir.file("fifo").c_str(), &fst), 0);
  EXPECT_TRUE(S_ISFIFO(fst.st_mode));
}

// ---- kernel store: skip an unwritable entry, forged files ---------------------------------------

const std::string kFourOps = std::string(GEARBOX_SOURCE_DIR) + "/examples/four_ops.gbx";

SessionStats runFourOps(const std::vector<int64_t>& batches,
                        std::vector<std::shared_ptr<KernelStore>> stores,
                        Mode mode = Mode::kStatic) {
  SessionOptions o;
  o.runPasses = false;
  o.mode = mode;
  o.kernelStores = std::move(stores);
  Session s(loadGraph(kFourOps), o);
  for (size_t i = 0; i < batches.size(); ++i) {
    auto in = makeInputs(s.graph(), {Shape{batches[i], 4}, Shape{batches[i], 4}}, i);
    auto out = s.run(in);
    auto ref = referenceRun(s.graph(), in);
    EXPECT_TRUE(out[0].equals(ref[0])) << "batch " << batches[i];
  }
  return s.stats();
}

TEST(KernelMetaFaults, AnUnwritableEntryIsSkippedAndTheStoreKeepsWorking) {
  TempDir dir;
  const std::string meta = dir.file("km");
  fs::create_directories(meta);
  // A directory where the Add kernel's file should go: that one save fails, the others land.
  const KernelKey addKey = makeKernelKey(OpKind::kAdd, {f32({2, 4}), f32({2, 4})}, Attrs{});
  fs::create_directory(fs::path(meta) / kernelFileName(addKey));
  WarningCapture warnings;
  auto store = std::make_shared<KernelMetaStore>(meta);
  const SessionStats s = runFourOps({2, 4}, {store});
  EXPECT_EQ(s.kernelCompiles, 8);
  EXPECT_EQ(store->stats().saveFailures, 1);
  EXPECT_EQ(store->stats().saves, 7);
  EXPECT_TRUE(store->usable());
  size_t saveWarnings = 0;
  for (const std::string& m : warnings.messages()) saveWarnings += contains(m, "skipping");
  EXPECT_EQ(saveWarnings, 1u);
  // The next run loads the 7 and compiles only the one it could not save.
  const SessionStats again = runFourOps({2, 4}, {std::make_shared<KernelMetaStore>(meta)});
  EXPECT_EQ(again.kernelCompiles, 1);
  EXPECT_EQ(again.kernelStoreHits, 7);
}

// Re-hashes a forged descriptor the way an attacker (or a buggy tool) would.
std::string rehashed(Json j) {
  j.erase("hash");
  j["hash"] = fnv1a64Hex(j.dump());
  return j.dump(2) + "\n";
}

TEST(ForgedKernels, RowsPerTaskInt64MaxIsDamagedAndRecompiled) {
  // Large enough that the compiler splits rows over tasks, so rows_per_task is live.
  const KernelKey key = makeKernelKey(OpKind::kMatMul, {f32({256, 256}), f32({256, 256})}, Attrs{});
  const auto spec = compileKernelSpec(key);
  Json j = kernelDescriptorJson(*spec, "t");
  j["kernel"]["params"]["rows_per_task"] = INT64_MAX;
  const std::string forged = rehashed(j);
  const std::string msg = errorOf([&] { parseKernelDescriptor(forged); }, ErrorKind::kIo);
  EXPECT_TRUE(contains(msg, "rows_per_task") || contains(msg, "MatMul params")) << msg;
  TempDir dir;
  writeFileAtomic((dir.path() / kernelFileName(key)).string(), forged);
  KernelMetaStore store(dir.path().string());
  EXPECT_EQ(store.load(key), nullptr);
  EXPECT_EQ(store.stats().corrupt, 1);
}

TEST(ForgedKernels, AnAddReadingElementZeroIsRecompiledAndResultsMatchTheReference) {
  TempDir dir;
  const std::string meta = dir.file("km");
  runFourOps({3}, {std::make_shared<KernelMetaStore>(meta)});
  // The same-shape Add forged into a general broadcast that reads element 0 of each input:
  // every bound check passes (offsets stay inside the inputs), only the values are wrong.
  const fs::path file = fs::path(meta) / "Add_float_ND_3_4__3_4.json";
  ASSERT_TRUE(fs::exists(file));
  Json j = Json::parse(readFile(file.string()));
  Json& p = j["kernel"]["params"];
  p["path"] = "general";
  p["rank"] = 2;
  p["out_dims"] = Json::array({3, 4, 0, 0, 0, 0});
  p["a_strides"] = Json::array({0, 0, 0, 0, 0, 0});
  p["b_strides"] = Json::array({0, 0, 0, 0, 0, 0});
  WarningCapture warnings;
  // The two ways a kernel comes from the cache: a plan step (static) and a per-op dispatch
  // (eager); the other modes reach the store the same two ways.
  std::vector<Mode> paths;
  paths.push_back(Mode::kStatic);
  paths.push_back(Mode::kEager);
  for (Mode mode : paths) {
    writeFileAtomic(file.string(), rehashed(j));  // forged again: the last run rewrote it
    auto store = std::make_shared<KernelMetaStore>(meta);
    const SessionStats s = runFourOps({3}, {store}, mode);  // checks every output
    EXPECT_EQ(s.kernelCompiles, 1) << modeName(mode);
    EXPECT_EQ(s.kernelStoreHits, 3) << modeName(mode);
    EXPECT_EQ(store->stats().corrupt, 1) << modeName(mode);
  }
  size_t damaged = 0;
  for (const std::string& m : warnings.messages()) damaged += contains(m, "damaged kernel file");
  EXPECT_EQ(damaged, 2u);
}

TEST(ForgedKernels, EveryCompiledSpecValidatesAgainstItself) {
  const std::vector<KernelKey> keys{
      makeKernelKey(OpKind::kAdd, {f32({3, 1, 4}), f32({5, 1})}, Attrs{}),
      makeKernelKey(OpKind::kMatMul, {f32({2, 3, 4}), f32({4, 5})}, Attrs{}),
      makeKernelKey(OpKind::kCat, {f32({2, 3}), f32({2, 5})}, Attrs{1}),
      makeKernelKey(OpKind::kAdd, {f32({-1, 4}), f32({-1, 4})}, Attrs{}),
  };
  for (const KernelKey& k : keys) {
    SCOPED_TRACE(k.name());
    const auto spec = compileKernelSpec(k);
    EXPECT_EQ(validateAgainstRecompiled(spec), spec);  // the loaded spec itself is used
    auto forged = std::make_shared<KernelSpec>(*spec);
    forged->tasks = spec->tasks + 1;
    EXPECT_TRUE(contains(errorOf([&] { validateAgainstRecompiled(forged); }, ErrorKind::kIo),
                         "/kernel/tasks"));
  }
}

// ---- flat memory ------------------------------------------------------------------------------

TEST(FlatMemory, HistoryLimitKeepsTheLastRecordsAndStreamsEveryOne) {
  SessionOptions o;
  o.historyLimit = 3;
  int seen = 0;
  double runSeconds = 0;
  o.onCall = [&](const CallRecord& r) {
    EXPECT_EQ(r.iteration, seen++);
    runSeconds += r.runSeconds;
  };
  Session s(loadGraph(kFourOps), o);
  for (int i = 0; i < 10; ++i)
    s.run(makeInputs(s.graph(), {Shape{1 + i % 3, 4}, Shape{1 + i % 3, 4}}, i));
  // Trimmed in halves: 6 records become 3 (after calls 6 and 9), then one more call.
  EXPECT_EQ(seen, 10);
  ASSERT_EQ(s.history().size(), 4u);
  EXPECT_EQ(s.historyDropped(), 6);
  EXPECT_EQ(s.history().front().iteration, 6);
  EXPECT_EQ(s.history().back().iteration, 9);
  EXPECT_EQ(s.stats().iterations, 10);
  // The run-time total covers every call, not the window (compare's run column uses it); the
  // same additions in the same order, so exactly equal.
  EXPECT_EQ(s.stats().runSeconds, runSeconds);
}

// ---- memory planner -----------------------------------------------------------------------------

// The original quadratic planner, kept here as the oracle: the indexed one must place every
// buffer at exactly the same offset.
MemoryPlan quadraticPlan(const std::vector<BufferRequest>& requests) {
  auto alignUp = [](int64_t v) { return (v + 63) / 64 * 64; };
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].bytes != requests[b].bytes ? requests[a].bytes > requests[b].bytes : a < b;
  });
  std::vector<size_t> placed;
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    plan.naiveBytes += alignUp(r.bytes);
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t p : placed) {
      const BufferRequest& q = requests[p];
      if (q.last < r.first || r.last < q.first) continue;
      busy.emplace_back(plan.offsets[p], plan.offsets[p] + alignUp(q.bytes));
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    const int64_t need = alignUp(r.bytes);
    for (const auto& [lo, hi] : busy) {
      if (offset + need <= lo) break;
      offset = std::max(offset, hi);
    }
    plan.offsets[idx] = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + need);
    placed.push_back(idx);
  }
  return plan;
}

TEST(MemoryPlan, IndexedPlannerPlacesExactlyLikeTheQuadraticOne) {
  std::mt19937_64 rng(15);
  for (int trial = 0; trial < 200; ++trial) {
    const int steps = 1 + static_cast<int>(rng() % 60);
    const int n = static_cast<int>(rng() % 80);
    std::vector<BufferRequest> req(n);
    for (auto& r : req) {
      r.first = static_cast<int>(rng() % steps);
      r.last = r.first + static_cast<int>(rng() % (trial % 3 == 0 ? steps : 4));
      r.bytes = static_cast<int64_t>(rng() % 5 == 0 ? 1 : rng() % 4096);
    }
    const MemoryPlan a = planMemory(req), b = quadraticPlan(req);
    EXPECT_EQ(a.offsets, b.offsets) << "trial " << trial;
    EXPECT_EQ(a.arenaBytes, b.arenaBytes);
    EXPECT_EQ(a.naiveBytes, b.naiveBytes);
  }
}

}  // namespace
}  // namespace gearbox
