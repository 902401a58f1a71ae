// Tests for compiler/kernel_store.h: kernel descriptors, the kernel_meta directory, op-info
// records (seed 003's layout and file names), precompile and bundles.
#include "compiler/kernel_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>

#include "compiler/compile_log.h"
#include "executor/session.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "graph/text.h"
#include "temp_dir.h"
#include "warning_capture.h"

namespace gearbox {
namespace {

using testing_util::WarningCapture;

namespace fs = std::filesystem;
using testing_util::TempDir;
using Json = nlohmann::ordered_json;

const std::string kFourOps = std::string(GEARBOX_SOURCE_DIR) + "/examples/four_ops.gbx";

size_t countEntries(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

std::set<std::string> fileNames(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

InputSignature batch(int64_t b) {
  return {Shape{b, 4}, Shape{b, 4}};
}

// Runs four_ops over `batches` in `mode` with `stores`, checking every output against the
// reference executor. Returns the session's stats.
SessionStats runFourOps(const std::vector<int64_t>& batches,
                        std::vector<std::shared_ptr<KernelStore>> stores,
                        Mode mode = Mode::kStatic) {
  SessionOptions o;
  o.runPasses = false;  // count the four ops as written; CatGather is covered by round trips
  o.mode = mode;
  o.kernelStores = std::move(stores);
  Session s(loadGraph(kFourOps), o);
  for (size_t i = 0; i < batches.size(); ++i) {
    auto in = makeInputs(s.graph(), batch(batches[i]), i);
    auto out = s.run(in);
    auto ref = referenceRun(s.graph(), in);
    EXPECT_TRUE(out[0].equals(ref[0])) << "batch " << batches[i];
  }
  return s.stats();
}

// ---- descriptor round trips ---------------------------------------------------------------

// Field by field, written out rather than through the serializer, so a field the serializer
// forgets is a failure here and not a silent agreement.
void expectSameSpec(const KernelSpec& a, const KernelSpec& b) {
  EXPECT_TRUE(a.key == b.key);
  EXPECT_EQ(a.name, b.name);
  EXPECT_TRUE(a.output == b.output);
  EXPECT_EQ(a.generic, b.generic);
  EXPECT_EQ(a.tasks, b.tasks);
  EXPECT_EQ(a.work, b.work);
  ASSERT_EQ(a.params.index(), b.params.index());
  if (auto* x = std::get_if<AddParams>(&a.params)) {
    const auto& y = std::get<AddParams>(b.params);
    EXPECT_EQ(x->path, y.path);
    EXPECT_EQ(x->numel, y.numel);
    EXPECT_EQ(x->rows, y.rows);
    EXPECT_EQ(x->cols, y.cols);
    EXPECT_EQ(x->rank, y.rank);
    for (int i = 0; i < kMaxRank; ++i) {
      EXPECT_EQ(x->outDims[i], y.outDims[i]);
      EXPECT_EQ(x->aStrides[i], y.aStrides[i]);
      EXPECT_EQ(x->bStrides[i], y.bStrides[i]);
    }
  } else if (auto* m = std::get_if<MatMulParams>(&a.params)) {
    const auto& n = std::get<MatMulParams>(b.params);
    EXPECT_EQ(m->batch, n.batch);
    EXPECT_EQ(m->m, n.m);
    EXPECT_EQ(m->n, n.n);
    EXPECT_EQ(m->k, n.k);
    EXPECT_EQ(m->aOffsets, n.aOffsets);
    EXPECT_EQ(m->bOffsets, n.bOffsets);
    EXPECT_EQ(m->rowsPerTask, n.rowsPerTask);
  } else if (auto* g = std::get_if<GatherParams>(&a.params)) {
    const auto& h = std::get<GatherParams>(b.params);
    EXPECT_EQ(g->outer, h.outer);
    EXPECT_EQ(g->dimSize, h.dimSize);
    EXPECT_EQ(g->count, h.count);
    EXPECT_EQ(g->inner, h.inner);
    EXPECT_EQ(g->indexType, h.indexType);
  } else if (auto* c = std::get_if<CatParams>(&a.params)) {
    const auto& d = std::get<CatParams>(b.params);
    EXPECT_EQ(c->outer, d.outer);
    EXPECT_EQ(c->rowElems, d.rowElems);
    EXPECT_EQ(c->outRowElems, d.outRowElems);
  } else if (auto* c = std::get_if<CatGatherParams>(&a.params)) {
    const auto& d = std::get<CatGatherParams>(b.params);
    EXPECT_EQ(c->outer, d.outer);
    EXPECT_EQ(c->inner, d.inner);
    EXPECT_EQ(c->count, d.count);
    EXPECT_EQ(c->dimSizes, d.dimSizes);
    EXPECT_EQ(c->indexType, d.indexType);
  } else if (auto* e = std::get_if<ElementwiseParams>(&a.params)) {
    EXPECT_EQ(e->numel, std::get<ElementwiseParams>(b.params).numel);
  } else if (auto* r = std::get_if<ReduceParams>(&a.params)) {
    EXPECT_TRUE(*r == std::get<ReduceParams>(b.params));
  } else if (auto* n = std::get_if<NormParams>(&a.params)) {
    const auto& o = std::get<NormParams>(b.params);
    EXPECT_EQ(n->outer, o.outer);
    EXPECT_EQ(n->n, o.n);
    EXPECT_EQ(n->inner, o.inner);
    EXPECT_EQ(n->scale, o.scale);
    EXPECT_EQ(n->bias, o.bias);
  } else if (auto* w = std::get_if<WhereParams>(&a.params)) {
    const auto& v = std::get<WhereParams>(b.params);
    EXPECT_EQ(w->rank, v.rank);
    EXPECT_EQ(w->numel, v.numel);
    for (int i = 0; i < kMaxRank; ++i) {
      EXPECT_EQ(w->outDims[i], v.outDims[i]);
      EXPECT_EQ(w->condStrides[i], v.condStrides[i]);
      EXPECT_EQ(w->xStrides[i], v.xStrides[i]);
      EXPECT_EQ(w->yStrides[i], v.yStrides[i]);
    }
  } else if (auto* x = std::get_if<ExpandParams>(&a.params)) {
    const auto& y = std::get<ExpandParams>(b.params);
    EXPECT_EQ(x->rank, y.rank);
    EXPECT_EQ(x->numel, y.numel);
    for (int i = 0; i < kMaxRank; ++i) {
      EXPECT_EQ(x->outDims[i], y.outDims[i]);
      EXPECT_EQ(x->inStrides[i], y.inStrides[i]);
    }
  } else if (auto* t = std::get_if<TriluParams>(&a.params)) {
    const auto& u = std::get<TriluParams>(b.params);
    EXPECT_EQ(t->batch, u.batch);
    EXPECT_EQ(t->rows, u.rows);
    EXPECT_EQ(t->cols, u.cols);
    EXPECT_EQ(t->k, u.k);
    EXPECT_EQ(t->upper, u.upper);
  }
}

struct KeyCase {
  std::string name;
  KernelKey key;
};

TensorType f32(Shape s) {
  return TensorType{DType::kF32, s};
}

std::vector<KeyCase> keyCases() {
  auto key = [](OpKind k, std::vector<TensorType> in, std::optional<int64_t> dim = {}) {
    Attrs a;
    a.dim = dim;
    return makeKernelKey(k, in, a);
  };
  return {
      {"AddSameShape", key(OpKind::kAdd, {f32({2, 4}), f32({2, 4})})},
      {"AddScalarB", key(OpKind::kAdd, {f32({2, 4}), f32({1})})},
      {"AddScalarA", key(OpKind::kAdd, {f32({}), f32({3, 5})})},
      {"AddRowB", key(OpKind::kAdd, {f32({3, 5}), f32({5})})},
      {"AddRowA", key(OpKind::kAdd, {f32({1, 5}), f32({3, 5})})},
      {"AddGeneral", key(OpKind::kAdd, {f32({3, 1, 5}), f32({4, 1})})},
      {"MatMulFolded", key(OpKind::kMatMul, {f32({6, 8, 4}), f32({4, 3})})},
      {"MatMulBroadcastBatch", key(OpKind::kMatMul, {f32({2, 1, 8, 4}), f32({3, 4, 5})})},
      // Large enough to be split across tasks, so rows_per_task and tasks are non-trivial.
      // Split by rows on every ISA's path (N = 64 has no second column block).
      {"MatMulRowSplit", key(OpKind::kMatMul, {f32({1024, 256}), f32({256, 64})})},
      {"IndexSelectI64", key(OpKind::kIndexSelect, {f32({4, 7}), {DType::kI64, {3}}}, -1)},
      {"IndexSelectI32", key(OpKind::kIndexSelect, {f32({4, 7, 2}), {DType::kI32, {5}}}, 1)},
      {"Cat", key(OpKind::kCat, {f32({2, 3}), f32({2, 4}), f32({2, 1})}, 1)},
      {"CatGather",
       key(OpKind::kCatGather, {f32({2, 3, 2}), f32({2, 4, 2}), {DType::kI64, {5}}}, 1)},
      {"GenericSymbolic", key(OpKind::kAdd, {f32({symbolDim("B"), 4}), f32({symbolDim("B"), 4})})},
      {"GenericAnyDim", key(OpKind::kMatMul, {f32({kAnyDim, 4}), f32({4, 3})})},
      {"MulGeneral", key(OpKind::kMul, {f32({3, 1, 5}), f32({4, 1})})},
      {"MulRowB", key(OpKind::kMul, {f32({3, 5}), f32({5})})},
      {"Relu", key(OpKind::kRelu, {f32({3, 5})})},
      {"MatMulVecMat", key(OpKind::kMatMul, {f32({5}), f32({2, 5, 3})})},
      {"MatMulDot", key(OpKind::kMatMul, {f32({7}), f32({7})})},
      {"Transpose",
       makeKernelKey(OpKind::kTranspose, {f32({2, 3, 4, 5})}, Attrs{{}, {}, Shape{0, 2, 3, 1}})},
      {"TransposeCopy",
       makeKernelKey(OpKind::kTranspose, {f32({1, 4})}, Attrs{{}, {}, Shape{1, 0}})},
      {"Reshape", makeKernelKey(OpKind::kReshape, {f32({4, 16, 7})},
                                Attrs{{}, Shape{symbolDim("B"), 8, -1}, {}})},
      {"ReshapeGeneric", makeKernelKey(OpKind::kReshape, {f32({symbolDim("B"), 16})},
                                       Attrs{{}, Shape{symbolDim("B"), -1, 4}, {}})},
      // Transformer ops (issue 24): every new params kind.
      {"Sub", key(OpKind::kSub, {f32({3, 1, 5}), f32({4, 1})})},
      {"Div", key(OpKind::kDiv, {f32({2, 8, 8}), f32({})})},
      {"Pow", key(OpKind::kPow, {f32({3, 5}), f32({5})})},
      {"Sqrt", key(OpKind::kSqrt, {f32({7})})},
      {"Erf", key(OpKind::kErf, {f32({2, 3})})},
      {"Tanh", key(OpKind::kTanh, {f32({2, 3})})},
      {"GeluTanh", makeKernelKey(OpKind::kGelu, {f32({4, 5})},
                                 [] {
                                   Attrs a;
                                   a.setInt(attr::Gelu::approximate, 1);
                                   return a;
                                 }())},
      {"Softmax", key(OpKind::kSoftmax, {f32({2, 4, 9, 9})})},
      {"SoftmaxMiddle", makeKernelKey(OpKind::kSoftmax, {f32({2, 5, 3})},
                                      [] {
                                        Attrs a;
                                        a.setInt(attr::Softmax::axis, 1);
                                        return a;
                                      }())},
      {"LayerNorm", key(OpKind::kLayerNorm, {f32({2, 7, 16}), f32({16}), f32({16})})},
      {"LayerNormPlain", key(OpKind::kLayerNorm, {f32({5, 3})})},
      {"ReduceSum", makeKernelKey(OpKind::kReduceSum, {f32({2, 3, 4})},
                                  [] {
                                    Attrs a;
                                    a.setInts(attr::ReduceSum::axes, {0, 2});
                                    return a;
                                  }())},
      {"WhereBroadcast",
       key(OpKind::kWhere, {{DType::kI32, {1, 1, 5, 5}}, f32({2, 3, 5, 5}), f32({})})},
      {"WhereFlat", key(OpKind::kWhere, {{DType::kI64, {6}}, f32({6}), f32({6})})},
      {"Expand", makeKernelKey(OpKind::kExpand, {f32({3, 1})}, Attrs{{}, Shape{2, 3, 4}, {}})},
      {"Cast", makeKernelKey(OpKind::kCast, {f32({4, 4})},
                             [] {
                               Attrs a;
                               a.setInt(attr::Cast::to, 7);
                               return a;
                             }())},
      {"Gather", key(OpKind::kGather, {f32({50, 8}), {DType::kI64, {2, 7}}})},
      {"Trilu", makeKernelKey(OpKind::kTrilu, {f32({3, 4, 4})},
                              [] {
                                Attrs a;
                                a.setInt(attr::Trilu::k, -1);
                                a.setInt(attr::Trilu::upper, 0);
                                return a;
                              }())},
      // The fused attention (fuse-attention): a padding mask broadcast over heads and rows.
      {"AttentionMasked",
       makeKernelKey(OpKind::kAttention,
                     {f32({2, 3, 5, 4}), f32({2, 3, 7, 4}), f32({2, 3, 7, 6}), f32({2, 1, 1, 7})},
                     [] {
                       Attrs a;
                       a.setFloat(attr::Attention::scale, 0.5);
                       return a;
                     }())},
  };
}

class DescriptorRoundTrip : public ::testing::TestWithParam<KeyCase> {};

TEST_P(DescriptorRoundTrip, ParsesToTheCompiledSpec) {
  const KernelKey& key = GetParam().key;
  const auto compiled = compileKernelSpec(key);
  const std::string text = serializeKernelDescriptor(*compiled, "2024-01-02T03:04:05.000006Z");
  const KernelDescriptor d = parseKernelDescriptor(text);
  EXPECT_EQ(d.created, "2024-01-02T03:04:05.000006Z");
  expectSameSpec(*d.spec, *compiled);
}

INSTANTIATE_TEST_SUITE_P(KernelStore, DescriptorRoundTrip, ::testing::ValuesIn(keyCases()),
                         [](const auto& info) { return info.param.name; });

TEST(KernelStore, MatMulRowSplitCaseReallySplits) {
  // Guards the case list: if the thresholds change and this key stops splitting, the round
  // trip no longer covers rows_per_task.
  const auto spec = compileKernelSpec(
      makeKernelKey(OpKind::kMatMul, {f32({1024, 256}), f32({256, 64})}, Attrs{}));
  if (spec->tasks > 1) {
    EXPECT_GT(std::get<MatMulParams>(spec->params).rowsPerTask, 0);
  } else {
    GTEST_SKIP() << "one core: no split to cover";
  }
}

KernelSpec addSpec() {
  return *compileKernelSpec(makeKernelKey(OpKind::kAdd, {f32({2, 4}), f32({2, 4})}, Attrs{}));
}

void expectIoError(const std::string& text, const std::string& needle) {
  try {
    parseKernelDescriptor(text);
    ADD_FAILURE() << "accepted a damaged descriptor; expected: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(KernelStore, DescriptorDamageIsDetected) {
  const std::string good = serializeKernelDescriptor(addSpec(), "t");
  expectIoError(good.substr(0, good.size() / 2), "not valid JSON");
  std::string flipped = good;
  flipped.replace(flipped.find("\"numel\": 8"), 10, "\"numel\": 9");
  expectIoError(flipped, "hash mismatch");
  // A consistent hash over inconsistent params is still refused: the kernel would write past
  // its output.
  Json j = Json::parse(good);
  j.erase("hash");
  j["kernel"]["params"]["numel"] = 800;
  j["hash"] = fnv1a64Hex(j.dump());
  expectIoError(j.dump(), "Add params do not fit the key");
  Json v = Json::parse(good);
  v["version"] = 99;
  expectIoError(v.dump(), "version 99 is not supported");
}

// The new ops' params are checked like the old ones': a transpose stride that reads past its
// input, and params of another op's kind, are refused even under a correct hash.
TEST(KernelStore, InconsistentTransposeParamsAreRefused) {
  const auto spec = compileKernelSpec(
      makeKernelKey(OpKind::kTranspose, {f32({3, 5})}, Attrs{{}, {}, Shape{1, 0}}));
  auto rehash = [](Json j) {
    j.erase("hash");
    j["hash"] = fnv1a64Hex(j.dump());
    return j.dump();
  };
  Json j = Json::parse(serializeKernelDescriptor(*spec, "t"));
  j["kernel"]["params"]["in_strides"][1] = 6;
  expectIoError(rehash(j), "Transpose params do not fit the key: strides read past the input");
  Json k = Json::parse(serializeKernelDescriptor(*spec, "t"));
  k["kernel"]["params"]["kind"] = "Relu";
  expectIoError(rehash(k), "params kind does not match op Transpose");
}

TEST(KernelStore, InconsistentMatMulOffsetsAreRefused) {
  const auto spec =
      compileKernelSpec(makeKernelKey(OpKind::kMatMul, {f32({2, 1, 8, 4}), f32({3, 4, 5})}, {}));
  Json j = kernelDescriptorJson(*spec, "t");
  j.erase("hash");
  j["kernel"]["params"]["a_offsets"][0] = 1000;
  j["hash"] = fnv1a64Hex(j.dump());
  expectIoError(j.dump(), "batch offset out of range");
}

TEST(KernelStore, LongKernelNamesGetHashedFileNames) {
  std::vector<TensorType> in(60, f32({2, 1}));
  const KernelKey key = makeKernelKey(OpKind::kCat, in, Attrs{1});
  ASSERT_GT(key.name().size(), 255u);
  const std::string file = kernelFileName(key);
  EXPECT_LE(file.size(), 255u);
  EXPECT_TRUE(file.starts_with(key.name().substr(0, 200) + "_")) << file;
  TempDir dir;
  KernelMetaStore store(dir.path().string());
  store.save(*compileKernelSpec(key));
  EXPECT_EQ(fileNames(dir.path()), std::set<std::string>{file});
  ASSERT_NE(store.load(key), nullptr);
  // A short static name is used as is.
  const KernelKey small = makeKernelKey(OpKind::kAdd, {f32({2, 4}), f32({2, 4})}, {});
  EXPECT_EQ(kernelFileName(small), "Add_float_ND_2_4__2_4.json");
}

// ---- kernel_meta directory --------------------------------------------------------------------

constexpr int64_t kFourOpsKernelsForTwoBatches = 8;  // 4 ops x batches {2, 4}

TEST(KernelMeta, SecondSessionLoadsEverythingAndCompilesNothing) {
  TempDir dir;
  const std::string meta = dir.file("kernel_meta");
  auto first = std::make_shared<KernelMetaStore>(meta);
  const SessionStats a = runFourOps({2, 4, 2}, {first});
  EXPECT_EQ(a.kernelCompiles, kFourOpsKernelsForTwoBatches);
  EXPECT_EQ(a.kernelStoreHits, 0);
  // `ls kernel_meta | wc -l`: one entry per distinct kernel, no temp or index files.
  EXPECT_EQ(countEntries(meta), static_cast<size_t>(kFourOpsKernelsForTwoBatches));
  EXPECT_EQ(first->stats().saves, kFourOpsKernelsForTwoBatches);
  for (const std::string& f : fileNames(meta)) EXPECT_TRUE(f.ends_with(".json")) << f;

  // A separate store and session over the same directory: a new process in all but name.
  auto second = std::make_shared<KernelMetaStore>(meta);
  const SessionStats b = runFourOps({2, 4}, {second});
  EXPECT_EQ(b.kernelCompiles, 0);
  EXPECT_EQ(b.kernelStoreHits, kFourOpsKernelsForTwoBatches);
  EXPECT_EQ(second->stats().loads, kFourOpsKernelsForTwoBatches);
  EXPECT_EQ(second->stats().saves, 0);
  EXPECT_EQ(countEntries(meta), static_cast<size_t>(kFourOpsKernelsForTwoBatches));

  // A new shape adds exactly its own kernels.
  const SessionStats c = runFourOps({2, 3}, {std::make_shared<KernelMetaStore>(meta)});
  EXPECT_EQ(c.kernelCompiles, 4);
  EXPECT_EQ(c.kernelStoreHits, 4);
  EXPECT_EQ(countEntries(meta), static_cast<size_t>(kFourOpsKernelsForTwoBatches + 4));
}

TEST(KernelMeta, LoadedKernelsEqualCompiledOnes) {
  TempDir dir;
  KernelMetaStore store(dir.path().string());
  for (const KeyCase& c : keyCases()) store.save(*compileKernelSpec(c.key));
  KernelMetaStore reader(dir.path().string());
  for (const KeyCase& c : keyCases()) {
    SCOPED_TRACE(c.name);
    auto loaded = reader.load(c.key);
    ASSERT_NE(loaded, nullptr);
    expectSameSpec(*loaded, *compileKernelSpec(c.key));
  }
  EXPECT_EQ(reader.stats().corrupt, 0);
}

TEST(KernelMeta, DamagedFilesAreWarnedOnceRecompiledAndRewritten) {
  TempDir dir;
  const std::string meta = dir.file("kernel_meta");
  runFourOps({2}, {std::make_shared<KernelMetaStore>(meta)});
  const fs::path truncated = fs::path(meta) / "MatMul_float_ND_2_4__4_3.json";
  const fs::path flipped = fs::path(meta) / "Add_float_ND_2_4__2_4.json";
  ASSERT_TRUE(fs::exists(truncated) && fs::exists(flipped));
  const std::string matmulText = readFile(truncated.string());
  fs::resize_file(truncated, matmulText.size() / 3);
  std::string addText = readFile(flipped.string());
  addText.replace(addText.find("\"numel\": 8"), 10, "\"numel\": 7");
  writeFileAtomic(flipped.string(), addText);

  WarningCapture warnings;
  auto store = std::make_shared<KernelMetaStore>(meta);
  const SessionStats s = runFourOps({2, 2}, {store});
  EXPECT_EQ(s.kernelCompiles, 2);
  EXPECT_EQ(s.kernelStoreHits, 2);
  EXPECT_EQ(store->stats().corrupt, 2);
  const auto msgs = warnings.messages();
  ASSERT_EQ(msgs.size(), 2u);
  std::set<std::string> named;
  for (const std::string& m : msgs) {
    if (m.find(truncated.string()) != std::string::npos) named.insert("truncated");
    if (m.find(flipped.string()) != std::string::npos) named.insert("flipped");
  }
  EXPECT_EQ(named, (std::set<std::string>{"truncated", "flipped"}));
  // Rewritten: both parse again, and the directory still holds one file per kernel.
  EXPECT_NO_THROW(parseKernelDescriptor(readFile(truncated.string())));
  EXPECT_NO_THROW(parseKernelDescriptor(readFile(flipped.string())));
  EXPECT_EQ(countEntries(meta), 4u);
  const SessionStats again = runFourOps({2}, {std::make_shared<KernelMetaStore>(meta)});
  EXPECT_EQ(again.kernelCompiles, 0);
  EXPECT_EQ(warnings.messages().size(), 2u);
}

TEST(KernelMeta, ADamagedFileIsReportedOncePerFile) {
  TempDir dir;
  const KernelSpec spec = addSpec();
  const fs::path file = dir.path() / kernelFileName(spec.key);
  { std::ofstream(file) << "{\"format\": \"gearbox-kernel\""; }
  WarningCapture warnings;
  KernelMetaStore store(dir.path().string());
  EXPECT_EQ(store.load(spec.key), nullptr);
  EXPECT_EQ(store.load(spec.key), nullptr);
  EXPECT_EQ(store.stats().corrupt, 1);
  ASSERT_EQ(warnings.messages().size(), 1u);
  EXPECT_NE(warnings.messages()[0].find(file.string()), std::string::npos);
  // A kernel file holding a different kernel under this key's name is damaged too.
  const KernelSpec other =
      *compileKernelSpec(makeKernelKey(OpKind::kAdd, {f32({3, 4}), f32({3, 4})}, Attrs{}));
  writeFileAtomic(file.string(), serializeKernelDescriptor(other, "t"));
  KernelMetaStore fresh(dir.path().string());
  EXPECT_EQ(fresh.load(spec.key), nullptr);
  ASSERT_EQ(warnings.messages().size(), 2u);
  EXPECT_NE(warnings.messages()[1].find("not the requested"), std::string::npos);
}

TEST(KernelMeta, UnusableDirectoryIsOneWarningAndTheRunGoesOn) {
  TempDir dir;
  { std::ofstream(dir.file("plain_file")) << "x"; }
  WarningCapture warnings;
  auto store = std::make_shared<KernelMetaStore>(dir.file("plain_file") + "/kernel_meta");
  EXPECT_FALSE(store->usable());
  const SessionStats s = runFourOps({2, 4}, {store});
  EXPECT_EQ(s.kernelCompiles, kFourOpsKernelsForTwoBatches);
  EXPECT_EQ(s.kernelStoreHits, 0);
  ASSERT_EQ(warnings.messages().size(), 1u);
  EXPECT_NE(warnings.messages()[0].find("continuing without kernel persistence"),
            std::string::npos);
  EXPECT_EQ(store->stats().saves, 0);
}

TEST(KernelMeta, EagerAndGearedModesShareTheDirectory) {
  TempDir dir;
  const std::string meta = dir.file("km");
  const SessionStats eager =
      runFourOps({2, 4}, {std::make_shared<KernelMetaStore>(meta)}, Mode::kEager);
  EXPECT_EQ(eager.kernelCompiles, kFourOpsKernelsForTwoBatches);
  // Static mode compiles the same per-op kernels, so it finds all of them on disk.
  const SessionStats st = runFourOps({4, 2}, {std::make_shared<KernelMetaStore>(meta)});
  EXPECT_EQ(st.kernelCompiles, 0);
  EXPECT_EQ(st.kernelStoreHits, kFourOpsKernelsForTwoBatches);
}

TEST(KernelMeta, ListingDecodesFilesAndFlagsDamage) {
  TempDir dir;
  const std::string meta = dir.file("km");
  runFourOps({2}, {std::make_shared<KernelMetaStore>(meta)});
  { std::ofstream(fs::path(meta) / "Cat_float_ND_2_3__2_4__dim1.json", std::ios::trunc) << "{"; }
  { std::ofstream(fs::path(meta) / "x.json.tmp.1.0") << "partial"; }
  const auto files = listKernelDir(meta);
  ASSERT_EQ(files.size(), 5u);
  int damaged = 0;
  for (const KernelFileInfo& f : files) {
    if (!f.spec) {
      ++damaged;
      EXPECT_FALSE(f.problem.empty());
      continue;
    }
    EXPECT_EQ(kernelFileName(f.spec->key), f.file);
    EXPECT_GT(f.bytes, 0);
    EXPECT_TRUE(
        std::regex_match(f.created, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)")))
        << f.created;
  }
  EXPECT_EQ(damaged, 2);
  EXPECT_THROW(listKernelDir(dir.file("missing")), Error);
}

// ---- op-info records
// ------------------------------------------------------------------------------

fs::path onlyRunDir(const fs::path& top) {
  std::vector<fs::path> runs;
  for (const auto& e : fs::directory_iterator(top / kOpInfoTopDir)) runs.push_back(e.path());
  EXPECT_EQ(runs.size(), 1u);
  return runs.empty() ? fs::path() : runs[0];
}

SessionStats runRecorded(const std::string& dir, const std::vector<int64_t>& batches,
                         Mode mode = Mode::kStatic,
                         std::vector<std::shared_ptr<KernelStore>> more = {}) {
  auto recorder = std::make_shared<OpInfoRecorder>(dir);
  std::vector<std::shared_ptr<KernelStore>> stores{recorder->observer()};
  for (auto& s : more) stores.push_back(s);
  return runFourOps(batches, stores, mode);
}

TEST(OpInfo, LayoutFileNamesAndFieldsFollowSeed003) {
  TempDir dir;
  runRecorded(dir.path().string(), {2, 2});
  const fs::path run = onlyRunDir(dir.path());
  const std::string pid = std::to_string(::getpid());
  EXPECT_TRUE(
      std::regex_match(run.filename().string(), std::regex("ts\\d{20}_pid" + pid + "_outputs")))
      << run;
  EXPECT_EQ(fileNames(run), (std::set<std::string>{pid, pid + "_debug"}));
  const std::set<std::string> expected = {"Add_float_ND_2_4_0.json", "MatMul_float_ND_2_4_1.json",
                                          "Cat_float_ND_2_3_2.json",
                                          "IndexSelect_float_ND_2_7_3.json"};
  EXPECT_EQ(fileNames(run / pid), expected);
  EXPECT_EQ(fileNames(run / (pid + "_debug")), expected);

  const Json matmul = Json::parse(readFile((run / pid / "MatMul_float_ND_2_4_1.json").string()));
  const Json expectedMatmul = Json::parse(R"({
    "op_type": "MatMul",
    "inputs": [
      {"name": "self", "index": 0, "dtype": "float", "shape": [2, 4], "format": "ND",
       "origin_shape": [2, 4], "origin_format": "ND"},
      {"name": "mat2", "index": 1, "dtype": "float", "shape": [4, 3], "format": "ND",
       "origin_shape": [4, 3], "origin_format": "ND"}],
    "outputs": [
      {"name": "out", "index": 0, "dtype": "float", "shape": [2, 3], "format": "ND",
       "origin_shape": [2, 3], "origin_format": "ND"}],
    "attrs": []})");
  EXPECT_EQ(matmul, expectedMatmul) << matmul.dump(2);
  const Json gather =
      Json::parse(readFile((run / pid / "IndexSelect_float_ND_2_7_3.json").string()));
  // Every declared attribute, defaults included (wrap=0: PyTorch's index_select range).
  EXPECT_EQ(gather["attrs"], Json::parse(R"([{"name": "dim", "dtype": "int64", "index": 0,
                                               "value": 1},
                                              {"name": "wrap", "dtype": "int64", "index": 1,
                                               "value": 0}])"));
  EXPECT_EQ(gather["inputs"][1]["dtype"], "int64");
  EXPECT_EQ(gather["inputs"][1]["name"], "index");
}

TEST(OpInfo, RecordsAreDeduplicatedAndCountersRunPerDirectory) {
  TempDir dir;
  runRecorded(dir.path().string(), {2, 4, 2, 4});
  const fs::path run = onlyRunDir(dir.path());
  const std::string pid = std::to_string(::getpid());
  const auto names = fileNames(run / pid);
  EXPECT_EQ(names.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const std::string suffix = "_" + std::to_string(i) + ".json";
    EXPECT_EQ(std::count_if(names.begin(), names.end(),
                            [&](const std::string& n) { return n.ends_with(suffix); }),
              1)
        << suffix;
  }
  EXPECT_TRUE(names.count("Add_float_ND_4_4_4.json"));
}

TEST(OpInfo, RunsServedFromDiskStillRecord) {
  TempDir dir;
  const std::string meta = dir.file("km");
  runFourOps({2}, {std::make_shared<KernelMetaStore>(meta)});
  const SessionStats s =
      runRecorded(dir.file("rec"), {2}, Mode::kStatic, {std::make_shared<KernelMetaStore>(meta)});
  EXPECT_EQ(s.kernelCompiles, 0);
  EXPECT_EQ(fileNames(onlyRunDir(dir.file("rec")) / std::to_string(::getpid())).size(), 4u);
}

TEST(OpInfo, DynamicModeRecordsOnlyIntoDebug) {
  TempDir dir;
  runRecorded(dir.path().string(), {2, 4}, Mode::kDynamic);
  const fs::path run = onlyRunDir(dir.path());
  const std::string pid = std::to_string(::getpid());
  EXPECT_TRUE(fileNames(run / pid).empty());
  EXPECT_EQ(
      fileNames(run / (pid + "_debug")),
      (std::set<std::string>{"Add_float_ND_-1_4_0.json", "MatMul_float_ND_-1_4_1.json",
                             "Cat_float_ND_-1_3_2.json", "IndexSelect_float_ND_-1_7_3.json"}));
}

TEST(OpInfo, TwoRecordersOfOneProcessGetTheirOwnFolders) {
  TempDir dir;
  auto a = std::make_shared<OpInfoRecorder>(dir.path().string());
  auto b = std::make_shared<OpInfoRecorder>(dir.path().string());
  EXPECT_NE(a->runDir(), b->runDir());
}

TEST(OpInfo, FileNameWithoutInputsAndForScalars) {
  KernelKey none;
  none.kind = OpKind::kAdd;
  EXPECT_EQ(opInfoFileName(none, 3), "Add_3.json");
  const KernelKey scalar = makeKernelKey(OpKind::kAdd, {f32({}), f32({2})}, {});
  EXPECT_EQ(opInfoFileName(scalar, 0), "Add_float_ND_0.json");
}

void expectRefused(const std::string& path, const std::string& needle) {
  try {
    OpInfoRecorder r(path);
    ADD_FAILURE() << "accepted " << path;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(OpInfo, RefusesDotDotNulAndSymlinksBeforeWriting) {
  TempDir dir;
  fs::create_directories(dir.path() / "real");
  expectRefused(dir.file("real/../out"), "'..'");
  expectRefused(dir.file("out") + std::string(1, '\0') + "x", "NUL");
  fs::create_directory_symlink(dir.path() / "real", dir.path() / "link");
  expectRefused(dir.file("link/out"), "symlink");
  expectRefused(dir.file("link"), "symlink");
  // A symlinked aclnn_static_shape_kernel_outputs inside a real directory is refused too.
  fs::create_directories(dir.path() / "build");
  fs::create_directory_symlink(dir.path() / "real", dir.path() / "build" / kOpInfoTopDir);
  expectRefused(dir.file("build"), "symlink");
  // Nothing was written anywhere.
  EXPECT_TRUE(fs::is_empty(dir.path() / "real"));
  EXPECT_FALSE(fs::exists(dir.path() / "out"));
}

// ---- precompile and bundles
// ------------------------------------------------------------------------

TEST(Precompile, RecordPrecompileRunCompilesNothing) {
  TempDir dir;
  const SessionStats recorded = runRecorded(dir.path().string(), {2, 4, 2});
  const PrecompileResult r = precompileBundle(dir.path().string());
  EXPECT_EQ(r.records, 8);
  EXPECT_EQ(r.kernels, recorded.kernelCompiles);
  EXPECT_GE(r.threads, 1);
  EXPECT_GE(r.seconds, 0);
  const fs::path run = onlyRunDir(dir.path());
  EXPECT_EQ(fs::path(r.bundlePath).parent_path(), run);
  EXPECT_TRUE(std::regex_match(fs::path(r.bundlePath).filename().string(),
                               std::regex(R"(static_kernel_\d{14}\.run)")))
      << r.bundlePath;

  auto bundle = std::make_shared<BundleStore>(r.bundlePath);
  EXPECT_EQ(bundle->size(), 8u);
  const SessionStats s = runFourOps({4, 2, 4}, {bundle});
  EXPECT_EQ(s.kernelCompiles, 0);
  EXPECT_EQ(s.kernelStoreHits, 8);
  EXPECT_EQ(bundle->hits(), 8);
  // A shape that was not recorded still compiles.
  EXPECT_EQ(runFourOps({3}, {bundle}).kernelCompiles, 4);
}

TEST(Precompile, TransformerBlockRecordPrecompileRunCompilesNothing) {
  // Issue 24's ops through op-info records, precompile and a bundle: the second run compiles
  // no kernel, and its outputs are the reference executor's.
  const Graph g = loadGraph(std::string(GEARBOX_SOURCE_DIR) + "/examples/transformer_block.gbx");
  const std::vector<InputSignature> calls = {{Shape{2, 7}}, {Shape{3, 5}}};
  auto run = [&](std::vector<std::shared_ptr<KernelStore>> stores) {
    SessionOptions o;
    o.kernelStores = std::move(stores);
    Session s(g, o);
    for (size_t i = 0; i < calls.size(); ++i) {
      const auto in = makeInputs(g, calls[i], i);
      const auto out = s.run(in);
      EXPECT_LE(maxAbsDiff(out[0], referenceRun(g, in)[0]), 1e-5);
    }
    return s.stats();
  };
  TempDir dir;
  auto recorder = std::make_shared<OpInfoRecorder>(dir.path().string());
  const SessionStats recorded = run({recorder->observer()});
  // The two static plans ((B, S) = (2, 7), (3, 5)) compile 56 kernels (as `gearbox compare`
  // reports for the same calls): 66 unfused, and the fuse-attention pass makes 5 of each plan's
  // kernels (matmul, div, add, softmax, matmul) one attention, whose k now comes from the same
  // transpose kernel as q and v.
  EXPECT_EQ(recorded.kernelCompiles, 56);
  const PrecompileResult r = precompileBundle(dir.path().string());
  EXPECT_EQ(r.kernels, recorded.kernelCompiles);
  auto bundle = std::make_shared<BundleStore>(r.bundlePath);
  const SessionStats again = run({bundle});
  EXPECT_EQ(again.kernelCompiles, 0);
  EXPECT_EQ(again.kernelStoreHits, recorded.kernelCompiles);
}

TEST(Precompile, BundledKernelsEqualCompiledOnes) {
  std::vector<std::shared_ptr<const KernelSpec>> specs;
  for (const KeyCase& c : keyCases()) specs.push_back(compileKernelSpec(c.key));
  TempDir dir;
  writeFileAtomic(dir.file("b.run"), serializeKernelBundle(specs, "t"));
  BundleStore store(dir.file("b.run"));
  for (const KeyCase& c : keyCases()) {
    SCOPED_TRACE(c.name);
    auto loaded = store.load(c.key);
    ASSERT_NE(loaded, nullptr);
    expectSameSpec(*loaded, *compileKernelSpec(c.key));
  }
}

TEST(Precompile, AcceptsEveryLevelOfTheLayout) {
  TempDir dir;
  runRecorded(dir.path().string(), {2});
  const fs::path run = onlyRunDir(dir.path());
  const fs::path selected = run / std::to_string(::getpid());
  for (const fs::path& p : {dir.path() / kOpInfoTopDir, run, selected}) {
    SCOPED_TRACE(p.string());
    EXPECT_EQ(findOpInfoDir(p.string()), selected.string());
    const PrecompileResult r = precompileBundle(p.string(), dir.file("out.run"));
    EXPECT_EQ(r.kernels, 4);
    EXPECT_EQ(r.bundlePath, dir.file("out.run"));
  }
}

TEST(Precompile, TakesTheNewestRun) {
  TempDir dir;
  runRecorded(dir.path().string(), {2});
  runRecorded(dir.path().string(), {2, 4});
  std::string runDir;
  findOpInfoDir(dir.path().string(), &runDir);
  std::vector<std::string> runs;
  for (const auto& e : fs::directory_iterator(dir.path() / kOpInfoTopDir))
    runs.push_back(e.path().string());
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runDir, *std::max_element(runs.begin(), runs.end()));
  EXPECT_EQ(precompileBundle(dir.path().string(), dir.file("b.run")).kernels, 8);
}

void expectParseError(const fs::path& dir, const std::string& needle) {
  try {
    precompileBundle(dir.string(), (dir / "out.run").string());
    ADD_FAILURE() << "accepted; expected " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kParse);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Precompile, BadRecordsNameTheFileAndField) {
  TempDir dir;
  Json rec = opInfoJson(makeKernelKey(OpKind::kAdd, {f32({2, 4}), f32({2, 4})}, {}));
  const fs::path file = dir.path() / "Add_float_ND_2_4_0.json";
  auto write = [&](const Json& j) { writeFileAtomic(file.string(), j.dump()); };

  Json noShape = rec;
  noShape["inputs"][1].erase("shape");
  write(noShape);
  expectParseError(dir.path(), file.string());
  expectParseError(dir.path(), "missing field 'inputs[1].shape'");

  Json badDtype = rec;
  badDtype["inputs"][0]["dtype"] = "bfloat99";
  write(badDtype);
  expectParseError(dir.path(), "field 'inputs[0].dtype': unknown dtype 'bfloat99'");

  Json badOp = rec;
  badOp["op_type"] = "Conv2D";
  write(badOp);
  expectParseError(dir.path(), "field 'op_type'");

  Json mismatched = rec;
  mismatched["inputs"][1]["shape"] = Json::array({3, 5});
  write(mismatched);
  expectParseError(dir.path(), "not a valid kernel");

  writeFileAtomic(file.string(), "{\"op_type\": ");
  expectParseError(dir.path(), "not valid JSON");
  EXPECT_FALSE(fs::exists(dir.path() / "out.run"));
}

TEST(Bundle, BadBundleIsAnIoErrorNamingTheFile) {
  TempDir dir;
  std::vector<std::shared_ptr<const KernelSpec>> specs{
      compileKernelSpec(makeKernelKey(OpKind::kAdd, {f32({2, 4}), f32({2, 4})}, {}))};
  const std::string good = serializeKernelBundle(specs, "t");
  auto expectBad = [&](const std::string& contents, const std::string& needle) {
    writeFileAtomic(dir.file("b.run"), contents);
    try {
      BundleStore store(dir.file("b.run"));
      ADD_FAILURE() << "accepted; expected " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kIo);
      EXPECT_NE(std::string(e.what()).find(dir.file("b.run")), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expectBad(good.substr(0, good.size() - 20), "not valid JSON");
  std::string flipped = good;
  flipped.replace(flipped.find("\"numel\":8"), 9, "\"numel\":4");
  expectBad(flipped, "bundle hash mismatch");
  expectBad(serializeKernelDescriptor(*specs[0], "t"), "format is 'gearbox-kernel'");
  EXPECT_THROW(BundleStore(dir.file("missing.run")), Error);
  writeFileAtomic(dir.file("b.run"), good);
  EXPECT_EQ(BundleStore(dir.file("b.run")).size(), 1u);
}

}  // namespace
}  // namespace gearbox
