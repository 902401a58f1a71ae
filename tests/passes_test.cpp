// Graph passes (compiler/passes.h): each pass on its own, the pipeline's verification, the
// session and CLI wiring, and the differential check that fused and unfused graphs give the
// reference executor's outputs (referenceRun on the UNFUSED graph is the oracle) in every mode.
#include "compiler/passes.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>

#include "executor/kernels.h"
#include "executor/session.h"
#include "graph/error.h"
#include "graph/text.h"
#include "json_schema.h"
#include "test_models.h"
#include "tests/temp_dir.h"

namespace gearbox {
namespace {

// ---- helpers --------------------------------------------------------------------------------

// ShuffleNetV2's channel_shuffle as one permutation: range(C).reshape(g, C/g).T.flatten().
// The same recipe as scripts/shuffle_perm.py, which generated examples/shufflenet_stage.gbx.
std::vector<int64_t> shufflePerm(int64_t channels, int64_t groups) {
  const int64_t perGroup = channels / groups;
  std::vector<int64_t> p;
  for (int64_t j = 0; j < perGroup; ++j)
    for (int64_t i = 0; i < groups; ++i) p.push_back(i * perGroup + j);
  return p;
}

std::vector<int64_t> randomPerm(int64_t channels, uint32_t seed) {
  std::vector<int64_t> p(static_cast<size_t>(channels));
  std::iota(p.begin(), p.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

Tensor indexTensor(const std::vector<int64_t>& v, DType dtype) {
  Tensor t(dtype, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::kI32) {
      t.as<int32_t>()[i] = static_cast<int32_t>(v[i]);
    } else {
      t.as<int64_t>()[i] = v[i];
    }
  }
  return t;
}

int countKind(const Graph& g, OpKind k) {
  return static_cast<int>(
      std::count_if(g.nodes.begin(), g.nodes.end(), [k](const Node& n) { return n.kind == k; }));
}

// Ids are dense and consistent: every value's producer produces it, every node's output names
// it as producer, inputs are producer-less, and nodes are in topological order.
void expectConsistent(const Graph& g) {
  for (ValueId v = 0; v < static_cast<ValueId>(g.values.size()); ++v) {
    const NodeId p = g.values[v].producer;
    if (p == kNoNode) {
      EXPECT_NE(std::find(g.inputs.begin(), g.inputs.end(), v), g.inputs.end())
          << "%" << g.values[v].name << " has no producer but is not an input";
    } else {
      ASSERT_LT(p, static_cast<NodeId>(g.nodes.size()));
      EXPECT_EQ(g.nodes[p].output, v) << "%" << g.values[v].name;
    }
  }
  for (NodeId n = 0; n < static_cast<NodeId>(g.nodes.size()); ++n) {
    EXPECT_EQ(g.values[g.nodes[n].output].producer, n);
    for (ValueId in : g.nodes[n].inputs) {
      const NodeId p = g.values[in].producer;
      EXPECT_TRUE(p == kNoNode || p < n) << g.describeNode(n) << " uses a later value";
    }
  }
  EXPECT_NO_THROW(verifyGraph(static_cast<const Graph&>(g)));
}

std::vector<std::string> valueNames(const Graph& g) {
  std::vector<std::string> out;
  for (const Value& v : g.values) out.push_back(v.name);
  return out;
}

// ---- DCE ------------------------------------------------------------------------------------

TEST(DeadCodeElimination, RemovesUnreachableChainsAndCompactsIds) {
  GraphBuilder b("dce");
  auto x = b.input("x", DType::kF32, {kAnyDim, 4});
  auto unused = b.input("unused", DType::kF32, {3});
  auto a = b.add(x, x, "a");  // dead chain a -> d1 -> d2
  auto d1 = b.add(a, x, "d1");
  b.add(d1, d1, "d2");
  auto live = b.add(x, x, "live");
  Tensor w(DType::kF32, {4, 2});
  b.constant(w, "dead_const");  // a const nobody uses
  b.output(b.add(live, x, "y"));
  Graph g = b.build();
  (void)unused;

  DeadCodeElimination dce;
  EXPECT_EQ(dce.name(), "dce");
  ASSERT_TRUE(dce.run(g));
  EXPECT_EQ(valueNames(g), (std::vector<std::string>{"x", "unused", "live", "y"}));
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.inputs, (std::vector<ValueId>{0, 1}));  // the unused input stays
  EXPECT_EQ(g.outputs, (std::vector<ValueId>{3}));
  EXPECT_EQ(g.nodes[1].inputs, (std::vector<ValueId>{2, 0}));
  expectConsistent(g);
  ASSERT_EQ(dce.details().size(), 1u);
  EXPECT_EQ(dce.details()[0], "removed %a, %d1, %d2, %dead_const (4 nodes)");

  // Nothing left to remove: unchanged, and the details say nothing.
  EXPECT_FALSE(dce.run(g));
  EXPECT_TRUE(dce.details().empty());
}

TEST(DeadCodeElimination, KeepsEverythingFeedingAnyOutputIncludingReturnedInputs) {
  Graph g = testing_models::fourOps();
  g.outputs.push_back(g.findValue("s"));
  g.outputs.push_back(g.inputs[0]);
  const Graph before = g;
  DeadCodeElimination dce;
  EXPECT_FALSE(dce.run(g));
  EXPECT_EQ(printGraph(g), printGraph(before));
}

TEST(DeadCodeElimination, RemovesADeadCatAndTheNodesOnlyItUsed) {
  GraphBuilder b("dead_cat");
  auto x = b.input("x", DType::kF32, {2, 3});
  auto s = b.add(x, x, "s");
  b.cat({s, x}, 1, "c");
  b.output(b.matmul(x, b.input("w", DType::kF32, {3, 3}), "y"));
  Graph g = b.build();
  DeadCodeElimination dce;
  ASSERT_TRUE(dce.run(g));
  EXPECT_EQ(valueNames(g), (std::vector<std::string>{"x", "w", "y"}));
  EXPECT_EQ(g.inputs, (std::vector<ValueId>{0, 1}));
  expectConsistent(g);
}

// ---- fusion ---------------------------------------------------------------------------------

// cat(a, add(b, b)) along `catDim`, gathered by `users` index_selects along the given dims.
// Inputs are [N, 3, 5] and [N, 4, 5] (rank 3), so the cat dim 1 is also -2.
Graph catGraph(int64_t catDim, const std::vector<int64_t>& userDims, bool returnCat = false,
               bool extraUser = false) {
  GraphBuilder b("cat_graph");
  const int64_t N = symbolDim("N");
  auto a = b.input("a", DType::kF32, {N, 3, 5});
  auto bb = b.input("b", DType::kF32, {N, 4, 5});
  auto h = b.add(bb, bb, "h");
  auto c = b.cat({a, h}, catDim, "c");
  for (size_t i = 0; i < userDims.size(); ++i) {
    Tensor idx(DType::kI64, {2});
    idx.as<int64_t>()[0] = 1;
    idx.as<int64_t>()[1] = 0;
    auto p = b.constant(idx, fmt::format("p{}", i + 1));
    b.output(b.indexSelect(c, p, userDims[i], fmt::format("o{}", i + 1)));
  }
  if (returnCat) b.output(c);
  if (extraUser) b.output(b.add(c, c, "other"));
  return b.build();
}

TEST(CatIndexSelectFusion, FullPatternBecomesOneCatGatherReadingTheCatInputs) {
  Graph g = catGraph(1, {1});
  CatIndexSelectFusion fuse;
  EXPECT_EQ(fuse.name(), "fuse-cat-index-select");
  ASSERT_TRUE(fuse.run(g));
  ASSERT_EQ(fuse.details().size(), 1u);
  EXPECT_EQ(fuse.details()[0], "fused %c + %o1");
  const ValueId o = g.findValue("o1");
  const Node& n = g.node(g.value(o).producer);
  EXPECT_EQ(n.kind, OpKind::kCatGather);
  EXPECT_EQ(n.inputs,
            (std::vector<ValueId>{g.findValue("a"), g.findValue("h"), g.findValue("p1")}));
  EXPECT_EQ(n.attrs.dim, 1);
  EXPECT_EQ(g.value(o).type.toString(), "f32[N, 2, 5]");
  EXPECT_EQ(g.outputs, (std::vector<ValueId>{o}));  // the returned value keeps id and name
  // The Cat is left without users for DCE; it is still in the graph until then.
  EXPECT_EQ(countKind(g, OpKind::kCat), 1);
  expectConsistent(g);
  DeadCodeElimination dce;
  ASSERT_TRUE(dce.run(g));
  EXPECT_EQ(countKind(g, OpKind::kCat), 0);
  EXPECT_EQ(g.value(g.outputs[0]).name, "o1");
  expectConsistent(g);
}

TEST(CatIndexSelectFusion, HalfPatternFusesEveryUserAndWrapsNegativeDims) {
  // Cat dim -2 and users along 1 and -2 are all the same dim of a rank-3 tensor.
  Graph g = catGraph(-2, {1, -2});
  CatIndexSelectFusion fuse;
  ASSERT_TRUE(fuse.run(g));
  ASSERT_EQ(fuse.details().size(), 1u);
  EXPECT_EQ(fuse.details()[0], "fused %c + %o1, %o2");
  EXPECT_EQ(countKind(g, OpKind::kCatGather), 2);
  EXPECT_EQ(countKind(g, OpKind::kIndexSelect), 0);
  for (const Node& n : g.nodes) {
    if (n.kind == OpKind::kCatGather) {
      EXPECT_EQ(n.attrs.dim, 1);
    }
  }
  expectConsistent(g);
}

struct NoFuseCase {
  std::string name;
  Graph graph;
};

TEST(CatIndexSelectFusion, LeavesNonMatchingPatternsAlone) {
  const std::vector<NoFuseCase> cases = {
      {"cat has another user", catGraph(1, {1}, false, true)},
      {"cat is returned", catGraph(1, {1}, true)},
      {"index_select on a different dim", catGraph(1, {2})},
      {"one of two users on a different dim", catGraph(1, {1, 0})},
  };
  for (const NoFuseCase& c : cases) {
    SCOPED_TRACE(c.name);
    Graph g = c.graph;
    const std::string before = printGraph(g);
    CatIndexSelectFusion fuse;
    EXPECT_FALSE(fuse.run(g));
    EXPECT_TRUE(fuse.details().empty());
    EXPECT_EQ(printGraph(g), before);
  }
}

TEST(CatIndexSelectFusion, CatOfIndicesUsedAsAnIndexIsNotFused) {
  GraphBuilder b("cat_index");
  auto x = b.input("x", DType::kF32, {6, 2});
  auto i1 = b.input("i1", DType::kI64, {2});
  auto i2 = b.input("i2", DType::kI64, {3});
  auto idx = b.cat({i1, i2}, 0, "idx");
  b.output(b.indexSelect(x, idx, 0, "o"));
  Graph g = b.build();
  CatIndexSelectFusion fuse;
  EXPECT_FALSE(fuse.run(g));
}

TEST(CatIndexSelectFusion, RuntimeIndexIsFusedToo) {
  GraphBuilder b("runtime_index");
  auto a = b.input("a", DType::kF32, {2, 3});
  auto c = b.input("c", DType::kF32, {2, 5});
  auto i = b.input("i", DType::kI32, {4});
  b.output(b.indexSelect(b.cat({a, c}, -1, "cat"), i, 1, "o"));
  Graph g = b.build();
  CatIndexSelectFusion fuse;
  ASSERT_TRUE(fuse.run(g));
  const Node& n = g.node(g.value(g.outputs[0]).producer);
  EXPECT_EQ(n.kind, OpKind::kCatGather);
  EXPECT_EQ(n.inputs.back(), i);
}

TEST(CatIndexSelectFusion, WrapIndexSelectIsNotFused) {
  // wrap=1 takes negative indices from the end of the dim; cat_gather takes [0, total) only.
  const Graph g0 = parseGraph(
      "graph w(%a: f32[2, 3], %c: f32[2, 5], %i: i64[4]) {\n"
      "  %cat = cat(%a, %c, dim=1)\n  %o = index_select(%cat, %i, dim=1, wrap=1)\n"
      "  return %o\n}\n",
      "w.gbx");
  Graph g = g0;
  CatIndexSelectFusion fuse;
  EXPECT_FALSE(fuse.run(g));
  EXPECT_NE(printGraph(g).find("wrap=1"), std::string::npos) << printGraph(g);
}

// ---- pipeline -------------------------------------------------------------------------------

// A deliberately broken pass: declares a wrong output type.
class BreaksTypes final : public Pass {
 public:
  std::string_view name() const override { return "break-types"; }
  bool run(Graph& g) override {
    g.values[g.outputs[0]].type.shape[0] = 99;
    return true;
  }
};

TEST(PassPipeline, VerifiesTheGraphAfterEveryPassAndNamesTheCulprit) {
  Graph g = testing_models::seed001();
  PassPipeline p;
  p.add(std::make_unique<DeadCodeElimination>());
  p.add(std::make_unique<BreaksTypes>());
  std::vector<std::string> seen;
  try {
    p.run(g, [&](const PassRecord& r, const Graph&) { seen.push_back(r.name); });
    FAIL() << "expected a verification error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kShape);
    EXPECT_EQ(std::string(e.what()).rfind("after pass break-types: ", 0), 0u) << e.what();
  }
  EXPECT_EQ(seen, std::vector<std::string>{"dce"});  // observed only after verification passed
}

TEST(PassPipeline, DefaultPipelineOnTheShuffleNetStage) {
  Graph g = loadGraph(std::string(GEARBOX_SOURCE_DIR) + "/examples/shufflenet_stage.gbx");
  const std::string outName = g.value(g.outputs[0]).name;
  std::vector<std::string> observed;
  PassPipeline p = defaultPipeline();
  EXPECT_EQ(p.size(), 11u);
  const PassReport r = p.run(g, [&](const PassRecord& rec, const Graph& after) {
    observed.push_back(rec.name);
    expectConsistent(after);
  });
  EXPECT_EQ(observed, (std::vector<std::string>{
                          "dce", "fold-batch-norm", "fuse-conv-residual", "fuse-conv-activation",
                          "fuse-attention", "fuse-matmul-epilogue", "shuffle-to-index-select",
                          "slice-of-index-select", "dce", "fuse-cat-index-select", "dce"}));
  ASSERT_EQ(r.passes.size(), 11u);
  for (int i : {0, 1, 2, 3, 4, 5, 6, 7, 8}) EXPECT_FALSE(r.passes[i].changed) << i;  // gathers
  EXPECT_TRUE(r.passes[9].changed);
  EXPECT_TRUE(r.passes[10].changed);
  EXPECT_EQ(r.fired(), (std::vector<std::string>{"fuse-cat-index-select", "dce"}));
  EXPECT_EQ(r.passes[9].details,
            (std::vector<std::string>{"fused %u1_cat + %u1_out", "fused %u2_cat + %u3_x1, %u3_x2",
                                      "fused %u3_cat + %out"}));
  EXPECT_EQ(r.passes[10].details,
            std::vector<std::string>{"removed %u1_cat, %u2_cat, %u3_cat (3 nodes)"});
  EXPECT_EQ(countKind(g, OpKind::kCat), 0);
  EXPECT_EQ(countKind(g, OpKind::kCatGather), 4);
  EXPECT_EQ(g.value(g.outputs[0]).name, outName);
  EXPECT_NE(r.toString().find("fuse-cat-index-select: changed (fused %u1_cat + %u1_out; "),
            std::string::npos)
      << r.toString();
  // The optimized graph prints and parses back to itself.
  EXPECT_EQ(printGraph(parseGraph(printGraph(g))), printGraph(g));
}

// Seed 004 on a reshape/transpose shuffle: the view form becomes index_select, then the Cat it
// reads fuses, and the outputs do not change.
TEST(PassPipeline, ChannelShuffleBecomesAGatherAndFuses) {
  Graph g = loadGraph(std::string(GEARBOX_SOURCE_DIR) + "/examples/shufflenet_view.gbx");
  const Graph before = g;
  const int transposes = countKind(g, OpKind::kTranspose);
  ASSERT_GT(transposes, 0);
  PassPipeline p = defaultPipeline();
  const PassReport r = p.run(g);
  ASSERT_EQ(r.passes[6].name, "shuffle-to-index-select");
  ASSERT_TRUE(r.passes[6].changed);
  EXPECT_EQ(r.passes[6].details.size(), static_cast<size_t>(transposes));
  EXPECT_NE(r.passes[6].details[0].find("channel shuffle of %"), std::string::npos);
  EXPECT_EQ(countKind(g, OpKind::kTranspose), 0);
  EXPECT_EQ(countKind(g, OpKind::kReshape), 0);
  EXPECT_EQ(countKind(g, OpKind::kCat), 0);
  EXPECT_GT(countKind(g, OpKind::kCatGather), 0);
  for (int64_t n : {1, 3}) {
    InputSignature sig;
    for (ValueId v : before.inputs) {
      Shape s = before.values[v].type.shape;
      for (int d = 0; d < s.rank(); ++d)
        if (s[d] < 0) s[d] = n;
      sig.push_back(s);
    }
    const std::vector<Tensor> ins = makeInputs(before, sig, 7);
    const std::vector<Tensor> want = referenceRun(before, ins);
    const std::vector<Tensor> got = referenceRun(g, ins);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(want[i].equals(got[i])) << n;
  }
}

// A reshape/transpose pair that is not a channel shuffle (the transpose moves other dims) stays.
TEST(PassPipeline, NotAShuffleIsLeftAlone) {
  Graph g = parseGraph(R"(graph g(%x: f32[N, 6, 4]) {
  %r = reshape(%x, shape=[N, 2, 3, 4])
  %t = transpose(%r, perm=[0, 1, 3, 2])
  %y = reshape(%t, shape=[N, 6, 4])
  return %y
})");
  ChannelShuffleToIndexSelect pass;
  EXPECT_FALSE(pass.run(g));
  EXPECT_EQ(countKind(g, OpKind::kTranspose), 1);
}

// The seed's split_shuffle=True case: shuffle, then chunk(2) along channels. Both slices become
// gathers of the cat's inputs; outputs do not change.
TEST(PassPipeline, ShuffleThenSplitIsTwoGathers) {
  const char* text = R"(graph g(%a: f32[N, 4, 3], %b: f32[N, 4, 3]) {
  %c = cat(%a, %b, dim=1)
  %r = reshape(%c, shape=[N, 2, 4, 3])
  %t = transpose(%r, perm=[0, 2, 1, 3])
  %s = reshape(%t, shape=[N, 8, 3])
  %lo = slice(%s, starts=[0], ends=[4], axes=[1])
  %hi = slice(%s, starts=[4], ends=[8], axes=[1])
  %y = add(%lo, %hi)
  return %y
})";
  const Graph before = parseGraph(text);
  Graph g = parseGraph(text);
  const PassReport r = defaultPipeline().run(g);
  EXPECT_EQ(r.fired(), (std::vector<std::string>{"shuffle-to-index-select", "slice-of-index-select",
                                                 "dce", "fuse-cat-index-select", "dce"}))
      << r.toString();
  EXPECT_EQ(countKind(g, OpKind::kCatGather), 2);
  EXPECT_EQ(countKind(g, OpKind::kSlice) + countKind(g, OpKind::kCat) +
                countKind(g, OpKind::kTranspose) + countKind(g, OpKind::kReshape),
            0);
  for (int64_t n : {1, 2}) {
    const InputSignature sig{Shape{n, 4, 3}, Shape{n, 4, 3}};
    const std::vector<Tensor> ins = makeInputs(before, sig, 3);
    EXPECT_TRUE(referenceRun(before, ins)[0].equals(referenceRun(g, ins)[0])) << n;
  }
}

// conv2d + batch_norm with constant parameters: one conv with folded weights, same outputs
// (to float rounding).
TEST(PassPipeline, BatchNormFoldsIntoConv) {
  const char* text = R"(graph g(%x: f32[N, 2, 5, 5]) {
  %w = const f32[3, 2, 1, 1] [0.5, -1, 2, 0.25, -0.5, 1.5]
  %c = conv2d(%x, %w)
  %s = const f32[3] [1.5, -2, 0.5]
  %be = const f32[3] [0.1, 0.2, -0.3]
  %m = const f32[3] [0.5, -0.25, 1]
  %v = const f32[3] [2, 0.5, 1]
  %y = batch_norm(%c, %s, %be, %m, %v, epsilon=0.001)
  return %y
})";
  const Graph before = parseGraph(text);
  Graph g = parseGraph(text);
  const PassReport r = defaultPipeline().run(g);
  EXPECT_EQ(r.passes[1].details, std::vector<std::string>{"folded %y into %c"});
  EXPECT_EQ(countKind(g, OpKind::kBatchNorm), 0);
  EXPECT_EQ(countKind(g, OpKind::kConv2d), 1);
  const InputSignature sig{Shape{2, 2, 5, 5}};
  const std::vector<Tensor> ins = makeInputs(before, sig, 5);
  const Tensor want = referenceRun(before, ins)[0], got = referenceRun(g, ins)[0];
  ASSERT_EQ(want.shape(), got.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    EXPECT_NEAR(want.as<float>()[i], got.as<float>()[i],
                1e-5 * (1 + std::fabs(want.as<float>()[i])));
}

// ---- session wiring -------------------------------------------------------------------------

TEST(SessionPasses, StatsRecordThePassesThatFiredAndRunPassesFalseKeepsTheGraph) {
  Session fused(testing_models::fourOps());
  EXPECT_EQ(fused.stats().passesFired, (std::vector<std::string>{"fuse-cat-index-select", "dce"}));
  EXPECT_EQ(fused.passReport().passes.size(), 11u);
  EXPECT_EQ(countKind(fused.graph(), OpKind::kCatGather), 1);
  EXPECT_EQ(countKind(fused.graph(), OpKind::kCat), 0);

  SessionOptions o;
  o.runPasses = false;
  Session plain(testing_models::fourOps(), o);
  EXPECT_TRUE(plain.stats().passesFired.empty());
  EXPECT_TRUE(plain.passReport().passes.empty());
  EXPECT_EQ(countKind(plain.graph(), OpKind::kCat), 1);

  // The fused plan compiles one kernel fewer and never holds the concatenated tensor.
  for (int64_t n : {6, 6, 9}) {
    auto in = makeInputs(fused.graph(), {Shape{n, 4}, Shape{4, 3}}, static_cast<uint64_t>(n));
    EXPECT_TRUE(fused.run(in)[0].equals(plain.run(in)[0]));
  }
  EXPECT_EQ(fused.stats().kernelCompiles, 6);
  EXPECT_EQ(plain.stats().kernelCompiles, 8);
  EXPECT_LT(fused.stats().peakBytes, plain.stats().peakBytes);
}

// ---- differential: fused vs unfused vs the reference on the unfused graph --------------------

struct ShuffleCase {
  std::vector<int64_t> parts;  // channels of each cat input
  int groups;                  // channel-shuffle groups; 0 = a random permutation
  bool half;                   // two index_selects, each taking half of the permuted channels
  bool runtimeIndex;           // index tensors are graph inputs instead of consts
  DType indexType;

  int64_t channels() const { return std::accumulate(parts.begin(), parts.end(), int64_t{0}); }
  std::vector<int64_t> perm() const {
    return groups ? shufflePerm(channels(), groups) : randomPerm(channels(), 7);
  }
  std::string name() const {
    std::string s;
    for (int64_t p : parts) s += std::to_string(p) + "_";
    s += groups ? "g" + std::to_string(groups) : std::string("random");
    s += half ? "_half" : "_full";
    s += runtimeIndex ? "_runtime" : "_const";
    s += indexType == DType::kI32 ? "_i32" : "_i64";
    return s;
  }
};

constexpr int64_t kHW = 49;  // 7 x 7: 196-byte rows, the kernel's vector-block path

// The unfused graph: cat(x0, add(x1, x1), ...) along the channels, then the shuffle (full)
// or the shuffle split in two (half). No MatMul, so the optimized and reference kernels agree
// to the bit and every comparison is exact.
Graph shuffleGraph(const ShuffleCase& c) {
  GraphBuilder b("shuffle");
  const int64_t N = symbolDim("N");
  std::vector<ValueId> parts;
  for (size_t i = 0; i < c.parts.size(); ++i) {
    auto x = b.input(fmt::format("x{}", i), DType::kF32, {N, c.parts[i], kHW});
    parts.push_back(i == 1 ? b.add(x, x, "branch") : x);
  }
  auto cat = b.cat(parts, 1, "y");
  const std::vector<int64_t> perm = c.perm();
  const int64_t C = c.channels();
  std::vector<std::vector<int64_t>> indices;
  if (c.half) {
    indices = {std::vector<int64_t>(perm.begin(), perm.begin() + C / 2),
               std::vector<int64_t>(perm.begin() + C / 2, perm.end())};
  } else {
    indices = {perm};
  }
  for (size_t k = 0; k < indices.size(); ++k) {
    const std::string sfx = fmt::format("{}", k + 1);
    ValueId idx = c.runtimeIndex
                      ? b.input("idx" + sfx, c.indexType, {static_cast<int64_t>(indices[k].size())})
                      : b.constant(indexTensor(indices[k], c.indexType), "idx" + sfx);
    // The second half uses dim -2: the same dim, spelled the other way.
    b.output(b.indexSelect(cat, idx, k == 0 ? 1 : -2, "out" + sfx));
  }
  return b.build();
}

std::vector<Tensor> shuffleInputs(const Graph& g, const ShuffleCase& c, int64_t n, uint64_t seed) {
  std::vector<Tensor> in;
  for (size_t i = 0; i < c.parts.size(); ++i)
    in.push_back(randomTensor(DType::kF32, {n, c.parts[i], kHW}, seed * 31 + i));
  if (c.runtimeIndex) {
    const std::vector<int64_t> perm = c.perm();
    const int64_t C = c.channels();
    if (c.half) {
      in.push_back(indexTensor({perm.begin(), perm.begin() + C / 2}, c.indexType));
      in.push_back(indexTensor({perm.begin() + C / 2, perm.end()}, c.indexType));
    } else {
      in.push_back(indexTensor(perm, c.indexType));
    }
  }
  EXPECT_EQ(in.size(), g.inputs.size());
  return in;
}

std::vector<ShuffleCase> shuffleCases() {
  std::vector<ShuffleCase> out;
  // Equal halves as in ShuffleNet, odd unequal parts (3 + 5 = 8), and 24 channels; groups 2,
  // 4 and 8 divide each total, plus a random permutation of the same channels.
  for (const auto& parts : std::vector<std::vector<int64_t>>{{8, 8}, {3, 5}, {12, 12}, {2, 3, 3}})
    for (int groups : {2, 4, 8, 0})
      for (bool half : {false, true})
        for (bool runtime : {false, true})
          out.push_back(ShuffleCase{parts, groups, half, runtime,
                                    (groups == 4 || groups == 0) ? DType::kI32 : DType::kI64});
  return out;
}

class ShuffleDifferential : public ::testing::TestWithParam<std::tuple<ShuffleCase, Mode>> {};

TEST_P(ShuffleDifferential, FusedAndUnfusedMatchTheReferenceOnTheUnfusedGraph) {
  const auto& [c, mode] = GetParam();
  const Graph unfused = shuffleGraph(c);
  SessionOptions o;
  o.mode = mode;
  Session fused(unfused, o);
  o.runPasses = false;
  Session plain(unfused, o);
  EXPECT_EQ(fused.stats().passesFired, (std::vector<std::string>{"fuse-cat-index-select", "dce"}));
  EXPECT_EQ(countKind(fused.graph(), OpKind::kCat), 0);
  EXPECT_EQ(countKind(fused.graph(), OpKind::kCatGather), c.half ? 2 : 1);
  EXPECT_EQ(countKind(plain.graph(), OpKind::kCat), 1);
  // Batch sizes that recompile, hit the cache, specialise size 1 and go dynamic in auto.
  const std::vector<int64_t> batches = {2, 3, 3, 1, 5};
  for (size_t i = 0; i < batches.size(); ++i) {
    SCOPED_TRACE("N = " + std::to_string(batches[i]));
    const auto in = shuffleInputs(unfused, c, batches[i], i);
    const auto ref = referenceRun(unfused, in);
    const auto a = fused.run(in);
    const auto b = plain.run(in);
    ASSERT_EQ(a.size(), ref.size());
    ASSERT_EQ(b.size(), ref.size());
    for (size_t k = 0; k < ref.size(); ++k) {
      EXPECT_TRUE(a[k].equals(ref[k])) << "fused output " << k;
      EXPECT_TRUE(b[k].equals(ref[k])) << "unfused output " << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ShuffleDifferential,
                         ::testing::Combine(::testing::ValuesIn(shuffleCases()),
                                            ::testing::ValuesIn(modes(ModeSet::kWithoutGears))),
                         [](const auto& info) {
                           return std::get<0>(info.param).name() + "_" +
                                  modeIdentifier(std::get<1>(info.param));
                         });

TEST(ShuffleDifferential, ShuffleNetStageModelMatchesTheReferenceInEveryMode) {
  const Graph g = loadGraph(std::string(GEARBOX_SOURCE_DIR) + "/examples/shufflenet_stage.gbx");
  for (Mode m : modes(ModeSet::kWithoutGears)) {
    SCOPED_TRACE(modeName(m));
    SessionOptions o;
    o.mode = m;
    Session s(g, o);
    ASSERT_EQ(countKind(s.graph(), OpKind::kCatGather), 4);
    for (int64_t n : {1, 2, 4, 4, 8, 3, 8}) {
      const auto in = makeInputs(g, {Shape{n, 16, 49}}, static_cast<uint64_t>(n));
      // MatMul runs through Eigen in the session and plain loops in the reference, so the
      // stage's outputs agree to rounding, not to the bit.
      EXPECT_LE(maxAbsDiff(s.run(in)[0], referenceRun(g, in)[0]), 1e-4) << "N = " << n;
    }
  }
}

TEST(ShuffleDifferential, OutOfRangeRuntimeIndexIsAnIndexErrorInEveryMode) {
  const ShuffleCase c{{3, 5}, 2, false, true, DType::kI64};
  const Graph unfused = shuffleGraph(c);
  for (Mode m : modes(ModeSet::kWithoutGears)) {
    for (int64_t bad : {8, -1}) {
      SCOPED_TRACE(std::string(modeName(m)) + " index " + std::to_string(bad));
      SessionOptions o;
      o.mode = m;
      Session s(unfused, o);
      auto in = shuffleInputs(unfused, c, 2, 0);
      in.back().as<int64_t>()[5] = bad;
      try {
        s.run(in);
        ADD_FAILURE() << "expected an index error";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kIndex) << e.what();
        const std::string msg = e.what();
        EXPECT_NE(msg.find("op %out1 = cat_gather: input 2 (%idx1)"), std::string::npos) << msg;
        EXPECT_NE(msg.find("index value " + std::to_string(bad) + " at position 5"),
                  std::string::npos)
            << msg;
      }
    }
  }
}

// ---- the permutation is the channel shuffle ----------------------------------------------------

// channel_shuffle the long way: view [N, C, HW] as [N, g, C/g, HW], transpose dims 1 and 2,
// flatten back to [N, C, HW]. Written with loops over the 4-D view, independent of shufflePerm.
Tensor channelShuffleLongWay(const Tensor& x, int64_t groups) {
  const int64_t n = x.shape()[0], c = x.shape()[1], hw = x.shape()[2], cpg = c / groups;
  Tensor out(DType::kF32, x.shape());
  const float* src = x.as<float>();
  float* dst = out.as<float>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t j = 0; j < cpg; ++j)       // dim 1 of the transposed view [N, C/g, g, HW]
      for (int64_t i = 0; i < groups; ++i)  // dim 2 of the transposed view
        for (int64_t p = 0; p < hw; ++p) {
          // transposed[b, j, i, p] = view[b, i, j, p]; the flattened channel is j * g + i.
          const int64_t from = ((b * groups + i) * cpg + j) * hw + p;
          const int64_t to = ((b * cpg + j) * groups + i) * hw + p;
          dst[to] = src[from];
        }
  return out;
}

TEST(ShufflePermutation, IndexSelectByThePermutationIsTheChannelShuffle) {
  for (int64_t channels : {16, 24, 232}) {
    for (int64_t groups : {2, 4, 8}) {
      SCOPED_TRACE(std::to_string(channels) + " channels, groups " + std::to_string(groups));
      const Tensor x = randomTensor(DType::kF32, {2, channels, 7}, static_cast<uint64_t>(groups));
      const Tensor perm = indexTensor(shufflePerm(channels, groups), DType::kI64);
      Tensor viaIndex(DType::kF32, x.shape());
      kernels::ref::indexSelect(x.view(), perm.view(), 1, viaIndex.view());
      EXPECT_TRUE(viaIndex.equals(channelShuffleLongWay(x, groups)));
    }
  }
}

TEST(ShufflePermutation, TheStageModelUsesTheGroupsOfTwoPermutation) {
  const Graph g = loadGraph(std::string(GEARBOX_SOURCE_DIR) + "/examples/shufflenet_stage.gbx");
  const std::vector<int64_t> perm = shufflePerm(16, 2);
  auto constOf = [&](const char* name) {
    const ValueId v = g.findValue(name);
    EXPECT_GE(v, 0) << name;
    const Tensor& t = *g.node(g.value(v).producer).constant;
    return std::vector<int64_t>(t.as<int64_t>(), t.as<int64_t>() + t.numel());
  };
  EXPECT_EQ(constOf("shuffle"), perm);
  EXPECT_EQ(constOf("shuffle_lo"), std::vector<int64_t>(perm.begin(), perm.begin() + 8));
  EXPECT_EQ(constOf("shuffle_hi"), std::vector<int64_t>(perm.begin() + 8, perm.end()));
}

// ---- CLI ------------------------------------------------------------------------------------

// Runs a shell command line and returns its exit code (-1 if it did not exit normally).
int runShell(const std::string& command) {
  const int status = std::system(command.c_str());
  return (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
}

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::string kStage = std::string(GEARBOX_SOURCE_DIR) + "/examples/shufflenet_stage";

TEST(PassesCli, PrintPassesShowsADiffPerPassAndTheFinalIr) {
  testing_util::TempDir dir;
  const std::string out = dir.file("out.txt");
  ASSERT_EQ(runShell(std::string(GEARBOX_BINARY) + " print '" + kStage + ".gbx' --passes > '" +
                     out + "' 2>&1"),
            0)
      << readFile(out);
  const std::string text = readFile(out);
  const size_t h1 = text.find("# after dce: unchanged\n");
  const size_t h2 = text.find("# after fuse-cat-index-select: changed\n");
  const size_t h3 = text.find("# after dce: changed\n", h2 == std::string::npos ? 0 : h2);
  ASSERT_NE(h1, std::string::npos) << text;
  ASSERT_NE(h2, std::string::npos) << text;
  ASSERT_NE(h3, std::string::npos) << text;
  EXPECT_LT(h1, h2);
  EXPECT_LT(h2, h3);
  EXPECT_NE(text.find("#   fused %u2_cat + %u3_x1, %u3_x2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("%out = cat_gather(%u3_x1, %u3_h4, %shuffle, dim=1)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("# passes that changed the graph: fuse-cat-index-select, dce\n"),
            std::string::npos)
      << text;
  // Each pass section is a diff: the fused line added, the cat removed.
  EXPECT_NE(text.find("\n-  %u2_cat = cat("), std::string::npos) << text;
  // The last section is the final graph and parses on its own.
  const size_t final = text.find("# after all passes:\n");
  ASSERT_NE(final, std::string::npos) << text;
  const Graph last = parseGraph(text.substr(final, text.rfind("# passes that") - final));
  EXPECT_EQ(countKind(last, OpKind::kCat), 0);

  // Without --passes: the model as written.
  ASSERT_EQ(runShell(std::string(GEARBOX_BINARY) + " print '" + kStage + ".gbx' > '" + out + "'"),
            0);
  EXPECT_EQ(readFile(out).find("cat_gather"), std::string::npos);
}

TEST(PassesCli, RunReportsPassesFiredAndNoPassesTurnsThemOff) {
  testing_util::TempDir dir;
  const std::string base = std::string(GEARBOX_BINARY) + " run '" + kStage + ".gbx' --trace '" +
                           kStage + ".trace.jsonl' -q --mode static";
  ASSERT_EQ(runShell(base + " --json '" + dir.file("on.json") + "' > /dev/null"), 0);
  ASSERT_EQ(runShell(base + " --no-passes --json '" + dir.file("off.json") + "' > /dev/null"), 0);
  const auto on = nlohmann::json::parse(readFile(dir.file("on.json")));
  const auto off = nlohmann::json::parse(readFile(dir.file("off.json")));
  EXPECT_TRUE(testing_util::conformsToReportSchema(on));
  EXPECT_TRUE(testing_util::conformsToReportSchema(off));
  EXPECT_EQ(on["passes_fired"], nlohmann::json::array({"fuse-cat-index-select", "dce"}));
  EXPECT_EQ(off["passes_fired"], nlohmann::json::array());
  // Same trace, same plan compiles; the fused plans never hold a concatenated tensor, so their
  // arenas are smaller. (Kernel compiles happen to tie here: per batch size the stage needs 5
  // distinct kernels either way, cat + index_select by 16 becoming two cat_gather shapes.)
  EXPECT_EQ(on["graph_compiles"], off["graph_compiles"]);
  EXPECT_EQ(on["kernel_compiles"], off["kernel_compiles"]);
  EXPECT_LT(on["peak_bytes"].get<int64_t>(), off["peak_bytes"].get<int64_t>());
}

}  // namespace
}  // namespace gearbox
