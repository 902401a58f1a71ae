// The fuse-attention pass (compiler/passes.h, docs/passes.md): which chains it rewrites into one
// `attention` node and which it leaves alone, the three ways it gets k from k^T, the pipeline
// option that turns it off, and the differential check -- fused and unfused sessions against
// referenceRun on the UNFUSED graph, in static, eager and dynamic modes, over shapes with sizes
// 1 and odd, with and without a mask -- plus the exact eager launch counts per call that the
// fusion saves. Kept small: every case also runs under ASan. The same differential check covers
// the fuse-conv-activation pass (conv2d + relu / clip: the epilogue fusion) at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "compiler/passes.h"
#include "executor/modes/geared.h"
#include "executor/modes/mode_table.h"
#include "executor/session.h"
#include "gears/padding.h"
#include "graph/error.h"
#include "graph/text.h"
#include "json_schema.h"
#include "tests/temp_dir.h"

namespace gearbox {
namespace {

int countKind(const Graph& g, OpKind k) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.kind == k;
  return n;
}

// Nodes that launch a kernel in eager mode (every node but constants).
int kernelNodes(const Graph& g) {
  return static_cast<int>(g.nodes.size()) - countKind(g, OpKind::kConst);
}

const Node& onlyNodeOf(const Graph& g, OpKind k) {
  for (const Node& n : g.nodes)
    if (n.kind == k) return n;
  throw std::runtime_error("no such node");
}

std::string inputNames(const Graph& g, const Node& n) {
  std::string s;
  for (ValueId v : n.inputs) s += (s.empty() ? "%" : ", %") + g.value(v).name;
  return s;
}

// The torch form, scaled by a constant on the left and masked by a mask on the left:
// k.transpose(-1, -2) is a transpose of only the last two dims.
constexpr const char* kTorchForm = R"(graph torch_form(%q: f32[B, 2, S, 4], %k: f32[B, 2, S, 4],
                                 %v: f32[B, 2, S, 3], %mask: f32[S, S]) {
  %kt = transpose(%k, perm=[0, 1, 3, 2])
  %s = matmul(%q, %kt)
  %c = const f32[] [0.25]
  %y = mul(%c, %s)
  %x = add(%mask, %y)
  %p = softmax(%x, axis=3)
  %o = matmul(%p, %v)
  return %o
})";

// k^T given as an input (no transpose to fold), no scale and no mask.
constexpr const char* kBareForm = R"(graph bare(%q: f32[B, 5, 4], %kt: f32[B, 4, T],
                                 %v: f32[B, T, 2]) {
  %s = matmul(%q, %kt)
  %p = softmax(%s)
  %o = matmul(%p, %v)
  return %o
})";

// An export's split of the heads: k^T is transpose(k4, perm=[0, 2, 3, 1]) of [B, S, H, D], and
// (as gpt_prefill returns present_k) k4 also has a transpose by [0, 2, 1, 3]; a division scales.
constexpr const char* kExportForm = R"(graph export_form(%q4: f32[B, S, 2, 4],
                                 %k4: f32[B, S, 2, 4], %v4: f32[B, S, 2, 4]) {
  %qh = transpose(%q4, perm=[0, 2, 1, 3])
  %kh = transpose(%k4, perm=[0, 2, 1, 3])
  %vh = transpose(%v4, perm=[0, 2, 1, 3])
  %kt = transpose(%k4, perm=[0, 2, 3, 1])
  %s = matmul(%qh, %kt)
  %c = const f32[] [2]
  %y = div(%s, %c)
  %p = softmax(%y)
  %o = matmul(%p, %vh)
  return %o, %kh
})";

PassReport fuse(Graph& g, std::span<const std::string> disabled = {}) {
  return defaultPipeline(disabled).run(g);
}

const PassRecord& record(const PassReport& r, std::string_view name) {
  for (const PassRecord& p : r.passes)
    if (p.name == name) return p;
  throw std::runtime_error("no such pass");
}

TEST(AttentionFusion, TorchFormBecomesOneNodeAndTheTransposeGoes) {
  Graph g = parseGraph(kTorchForm);
  const PassReport r = fuse(g);
  EXPECT_EQ(r.fired(), (std::vector<std::string>{"fuse-attention", "dce"}));
  EXPECT_EQ(record(r, "fuse-attention").details,
            std::vector<std::string>{
                "%o = attention(%q, %k, %v, %mask, scale=0.25) replaces matmul %s, mul %y, add "
                "%x, softmax %p, matmul %o (mul 0.25); k^T %kt's transpose removed"});
  // Six kernels (transpose, matmul, mul, add, softmax, matmul) become one.
  ASSERT_EQ(kernelNodes(g), 1);
  const Node& a = onlyNodeOf(g, OpKind::kAttention);
  EXPECT_EQ(inputNames(g, a), "%q, %k, %v, %mask");
  EXPECT_EQ(a.attrs.f(attr::Attention::scale), 0.25);
  EXPECT_EQ(g.value(g.outputs[0]).name, "o");
  // The fused graph prints and parses back to itself.
  EXPECT_EQ(printGraph(parseGraph(printGraph(g))), printGraph(g));
}

TEST(AttentionFusion, BareFormTurnsTheFirstMatmulIntoTheTranspose) {
  Graph g = parseGraph(kBareForm);
  const PassReport r = fuse(g);
  EXPECT_EQ(record(r, "fuse-attention").details,
            std::vector<std::string>{
                "%o = attention(%q, %kt.k, %v, scale=1) replaces matmul %s, softmax %p, matmul "
                "%o (no scale); k = %kt.k, a transpose of k^T %kt"});
  EXPECT_EQ(kernelNodes(g), 2);
  EXPECT_EQ(g.value(onlyNodeOf(g, OpKind::kTranspose).output).type.toString(), "f32[B, T, 4]");
}

TEST(AttentionFusion, ExportFormReusesTheSiblingTransposeOfK) {
  Graph g = parseGraph(kExportForm);
  const PassReport r = fuse(g);
  EXPECT_EQ(record(r, "fuse-attention").details,
            std::vector<std::string>{
                "%o = attention(%qh, %kh, %vh, scale=0.5) replaces matmul %s, div %y, softmax %p, "
                "matmul %o (div 2); k^T %kt's transpose removed (%kh holds k)"});
  EXPECT_EQ(countKind(g, OpKind::kTranspose), 3);
  EXPECT_EQ(kernelNodes(g), 4);
  // Without the sibling, the transpose keeps the heads' split and drops only the swap.
  Graph alone = parseGraph(R"(graph g(%q: f32[B, 2, S, 4], %k4: f32[B, S, 2, 4],
                                      %v: f32[B, 2, S, 4]) {
    %kt = transpose(%k4, perm=[0, 2, 3, 1])
    %s = matmul(%q, %kt)
    %p = softmax(%s)
    %o = matmul(%p, %v)
    return %o
  })");
  const PassReport r2 = fuse(alone);
  EXPECT_EQ(record(r2, "fuse-attention").details.size(), 1u);
  EXPECT_NE(record(r2, "fuse-attention")
                .details[0]
                .find("k^T %kt's transpose now writes k (perm=[0, 2, 1, 3])"),
            std::string::npos)
      << record(r2, "fuse-attention").details[0];
  EXPECT_EQ(kernelNodes(alone), 2);
}

TEST(AttentionFusion, LeavesChainsItCannotFuseAlone) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // The scores are returned: they must be written anyway.
      {"scores returned", R"(graph g(%q: f32[2, 5, 4], %kt: f32[2, 4, 6], %v: f32[2, 6, 3]) {
         %s = matmul(%q, %kt)
         %p = softmax(%s)
         %o = matmul(%p, %v)
         return %o, %s
       })"},
      // A softmax over the queries, not the keys.
      {"other axis", R"(graph g(%q: f32[2, 5, 4], %kt: f32[2, 4, 5], %v: f32[2, 5, 3]) {
         %s = matmul(%q, %kt)
         %p = softmax(%s, axis=1)
         %o = matmul(%p, %v)
         return %o
       })"},
      // A per-key weight is no scalar scale.
      {"vector scale", R"(graph g(%q: f32[2, 5, 4], %kt: f32[2, 4, 6], %v: f32[2, 6, 3]) {
         %s = matmul(%q, %kt)
         %w = const f32[6] [1, 2, 3, 4, 5, 6]
         %y = mul(%s, %w)
         %p = softmax(%y)
         %o = matmul(%p, %v)
         return %o
       })"},
      // Dividing by a denormal: its reciprocal (1e45) is no f32, so no finite scale.
      {"denormal divisor", R"(graph g(%q: f32[2, 5, 4], %kt: f32[2, 4, 6], %v: f32[2, 6, 3]) {
         %s = matmul(%q, %kt)
         %c = const f32[] [1e-45]
         %y = div(%s, %c)
         %p = softmax(%y)
         %o = matmul(%p, %v)
         return %o
       })"},
      // The mask broadcasts the scores up to more heads.
      {"mask broadcasts up", R"(graph g(%q: f32[1, 5, 4], %kt: f32[1, 4, 6],
                                        %v: f32[1, 6, 3], %m: f32[3, 5, 6]) {
         %s = matmul(%q, %kt)
         %x = add(%s, %m)
         %p = softmax(%x)
         %o = matmul(%p, %v)
         return %o
       })"},
      // k^T broadcast over the batch: the kernel walks q, k and v in step.
      {"broadcast batch", R"(graph g(%q: f32[2, 5, 4], %kt: f32[1, 4, 6], %v: f32[2, 6, 3]) {
         %s = matmul(%q, %kt)
         %p = softmax(%s)
         %o = matmul(%p, %v)
         return %o
       })"},
  };
  for (const auto& [name, text] : cases) {
    SCOPED_TRACE(name);
    Graph g = parseGraph(text);
    const PassReport r = fuse(g);
    EXPECT_FALSE(record(r, "fuse-attention").changed);
    EXPECT_EQ(countKind(g, OpKind::kAttention), 0);
    EXPECT_EQ(countKind(g, OpKind::kSoftmax), 1);
  }
}

TEST(AttentionFusion, DisablePassKeepsTheChainAndUnknownNamesAreConfigErrors) {
  Graph g = parseGraph(kTorchForm);
  const std::vector<std::string> off = {"fuse-attention"};
  const PassReport r = fuse(g, off);
  for (const PassRecord& p : r.passes) EXPECT_NE(p.name, "fuse-attention");
  EXPECT_EQ(kernelNodes(g), 6);
  try {
    (void)defaultPipeline(std::vector<std::string>{"fuse-attenton"});
    FAIL() << "expected a config error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_NE(std::string(e.what()).find(
                  "unknown pass 'fuse-attenton' to disable (the passes: "
                  "dce, fold-batch-norm, fuse-conv-residual, fuse-conv-activation, "
                  "fuse-attention, "),
              std::string::npos)
        << e.what();
  }
}

// ---- differential and launch counts ---------------------------------------------------------

// Fused and unfused sessions of `g` in every mode that needs no gears (the geared modes run the
// same static plans, with gear specs these graphs do not carry) against referenceRun on the
// unfused graph, over `calls`; in eager mode a fused call launches exactly `saved` kernels fewer
// than an unfused one.
void expectFusedMatchesUnfused(const Graph& g, const std::vector<InputSignature>& calls,
                               int64_t saved, const std::string& pass = "fuse-attention") {
  for (const ModeInfo& info : modeTable()) {
    const Mode m = info.mode;
    SCOPED_TRACE(modeName(m));
    SessionOptions fusedOptions, plainOptions;
    fusedOptions.mode = plainOptions.mode = m;
    if (info.needsGears)
      gearOptions(fusedOptions).merge = gearOptions(plainOptions).merge = MergePolicy::kProduct;
    plainOptions.disabledPasses = {pass};
    Session fused(g, fusedOptions), plain(g, plainOptions);
    // Modes with gears: every size the calls use, on the first dim of each symbol (the dims that
    // share it follow), product-merged, so every call is a gear: the fused gear plans against
    // the unfused ones and the reference.
    if (info.needsGears) {
      std::set<int64_t> symbols;  // geared already, on an earlier input or dim
      std::map<std::string, DimGearList> gears;
      for (size_t i = 0; i < g.inputs.size(); ++i) {
        const Value& in = g.values[g.inputs[i]];
        for (size_t d = 0; d < static_cast<size_t>(in.type.shape.rank()); ++d) {
          const int64_t dim = in.type.shape[d];
          if (isStaticDim(dim) || !symbols.insert(dim).second) continue;
          std::vector<int64_t> sizes;
          for (const InputSignature& c : calls)
            if (std::find(sizes.begin(), sizes.end(), c[i][d]) == sizes.end())
              sizes.push_back(c[i][d]);
          gears[in.name].push_back({int(d), sizes});
        }
      }
      for (const auto& [name, list] : gears) {
        set_dim_gears(fused, name, list);
        set_dim_gears(plain, name, list);
      }
      compileGears(fused, calls.front());
      compileGears(plain, calls.front());
    }
    if (pass == "fuse-attention") {
      ASSERT_GE(countKind(fused.graph(), OpKind::kAttention), 1);
      ASSERT_EQ(countKind(plain.graph(), OpKind::kAttention), 0);
    } else {
      ASSERT_LT(fused.graph().nodes.size(), plain.graph().nodes.size());
    }
    for (size_t i = 0; i < calls.size(); ++i) {
      SCOPED_TRACE(i);
      const auto in = makeInputs(g, calls[i], 100 + i);
      const auto want = referenceRun(g, in);
      const auto a = fused.run(in), b = plain.run(in);
      ASSERT_EQ(a.size(), want.size());
      for (size_t k = 0; k < want.size(); ++k) {
        // f32 GEMMs and softmax against the reference's loops: rounding, not bits.
        EXPECT_LE(maxAbsDiff(a[k], want[k]), 1e-4) << "output " << k;
        EXPECT_LE(maxAbsDiff(a[k], b[k]), 1e-4) << "output " << k;
      }
      if (info.needsGears) {
        // A gear ran each call, exactly (no pad, no fallback).
        EXPECT_GE(gearedCall(fused.history().back()).gear, 0);
        EXPECT_GE(gearedCall(plain.history().back()).gear, 0);
        EXPECT_FALSE(gearedCall(fused.history().back()).padded);
      }
      if (m == Mode::kEager) {
        EXPECT_EQ(fused.history().back().launches + saved, plain.history().back().launches);
      }
    }
  }
}

InputSignature sig(std::initializer_list<Shape> shapes) {
  return InputSignature(shapes);
}

TEST(AttentionFusionDifferential, TorchFormWithMask) {
  // B x S: sizes 1 and odd; 6 kernels per call become 1.
  std::vector<InputSignature> calls;
  for (auto [b, s] : {std::pair<int64_t, int64_t>{1, 1}, {2, 7}, {3, 5}, {1, 16}})
    calls.push_back(sig({Shape{b, 2, s, 4}, Shape{b, 2, s, 4}, Shape{b, 2, s, 3}, Shape{s, s}}));
  expectFusedMatchesUnfused(parseGraph(kTorchForm), calls, 5);
}

TEST(AttentionFusionDifferential, BareFormWithoutMaskOrScale) {
  std::vector<InputSignature> calls;
  for (auto [b, t] : {std::pair<int64_t, int64_t>{1, 1}, {2, 9}, {3, 2}})
    calls.push_back(sig({Shape{b, 5, 4}, Shape{b, 4, t}, Shape{b, t, 2}}));
  expectFusedMatchesUnfused(parseGraph(kBareForm), calls, 1);
}

TEST(AttentionFusionDifferential, TransformerBlockWithCausalMask) {
  // examples/transformer_block.gbx: a division by 2 and trilu's causal -inf mask; the transpose
  // of k keeps the heads' split (4 kernels fewer per call: matmul, div, add, softmax, matmul
  // become one).
  const Graph g = loadGraph(std::string(GEARBOX_SOURCE_DIR) + "/examples/transformer_block.gbx");
  expectFusedMatchesUnfused(g, {{Shape{2, 7}}, {Shape{1, 1}}, {Shape{3, 5}}}, 4);
}

// ---- CLI --------------------------------------------------------------------------------------

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(AttentionFusionCli, DisablePassRunsTheUnfusedGraphAndSaysSo) {
  testing_util::TempDir dir;
  const std::string model = std::string(GEARBOX_SOURCE_DIR) + "/examples/transformer_block";
  using testing_util::runBounded;
  using testing_util::shellQuote;
  const std::string base = "run " + shellQuote(model + ".gbx") + " --trace " +
                           shellQuote(model + ".trace.jsonl") + " -q --mode eager";
  // Bounded (timeout(1)): a hung CLI fails the test instead of the suite's time limit.
  const auto runOn = runBounded(base + " --json " + shellQuote(dir.file("on.json")));
  ASSERT_EQ(runOn.exitCode, 0) << runOn.output;
  const auto runOff = runBounded(base + " --disable-pass fuse-attention --json " +
                                 shellQuote(dir.file("off.json")));
  ASSERT_EQ(runOff.exitCode, 0) << runOff.output;
  const auto on = nlohmann::json::parse(readFile(dir.file("on.json")));
  const auto off = nlohmann::json::parse(readFile(dir.file("off.json")));
  EXPECT_TRUE(testing_util::conformsToReportSchema(on));
  EXPECT_TRUE(testing_util::conformsToReportSchema(off));
  // The block's two residual adds after a matmul fold into it (fuse-matmul-epilogue) either
  // way; dce removes the matmuls they replaced. (The scale constant 2 is still read by the
  // gate's pow.)
  EXPECT_EQ(on["passes_fired"],
            nlohmann::json::array({"fuse-attention", "fuse-matmul-epilogue", "dce"}));
  EXPECT_EQ(off["passes_fired"], nlohmann::json::array({"fuse-matmul-epilogue", "dce"}));
  EXPECT_FALSE(on["config"].contains("disabled_passes"));
  EXPECT_EQ(off["config"]["disabled_passes"], nlohmann::json::array({"fuse-attention"}));
  const auto& a = on["per_iteration"];
  const auto& b = off["per_iteration"];
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i]["launches"].get<int64_t>() + 4, b[i]["launches"].get<int64_t>()) << i;

  // An unknown pass is bad input: exit 2, naming it and the passes there are.
  const auto bad = runBounded(base + " --disable-pass fuse-attn");
  EXPECT_EQ(bad.exitCode, 2) << bad.output;
  EXPECT_NE(bad.output.find("unknown pass 'fuse-attn' to disable"), std::string::npos)
      << bad.output;
}

// ---- conv2d + relu / clip (fuse-conv-activation) ----------------------------------------------

// A relu after a conv, a clip (relu6-like) after a conv, a conv whose output has two users (its
// relu stays apart) and a returned conv followed by a relu (both kept).
constexpr const char* kConvActs = R"(graph g(%x: f32[N, 2, H, 5]) {
  %w = const f32[3, 2, 1, 1] [0.5, -1, 2, 0.25, -0.5, 1.5]
  %b = const f32[3] [0.1, -0.2, 0.3]
  %c1 = conv2d(%x, %w, %b)
  %r1 = relu(%c1)
  %w2 = const f32[3, 3, 1, 1] [1, -0.5, 0.25, -1, 2, 0.5, 0.75, -0.25, -2]
  %c2 = conv2d(%r1, %w2, pads=[1, 0, 0, 1])
  %k = clip(%c2, min=-0.25, max=0.5)
  %c3 = conv2d(%k, %w2)
  %r3 = relu(%c3)
  %y = add(%r3, %c3)
  %c4 = conv2d(%y, %w2, %b)
  %r4 = relu(%c4)
  return %r4, %c4
})";

// The reference executor's results for `g` (after passes) are bit for bit `before`'s, on two
// input shapes of the [N, 2, H, 5] conv graphs below.
void expectReferenceBitsMatch(const Graph& before, const Graph& g,
                              const std::vector<InputSignature>& sigs = {
                                  InputSignature{Shape{1, 2, 1, 5}}, {Shape{3, 2, 4, 5}}}) {
  for (const InputSignature& s : sigs) {
    const auto ins = makeInputs(before, s, 7);
    const auto want = referenceRun(before, ins), got = referenceRun(g, ins);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(want[i].equals(got[i])) << i;
  }
}

TEST(ConvActivationFusion, ReluAndClipBecomeTheConvsEpilogue) {
  Graph g = parseGraph(kConvActs);
  const Graph before = g;
  const PassReport r = defaultPipeline().run(g);
  ASSERT_EQ(r.passes[3].name, "fuse-conv-activation");
  EXPECT_EQ(r.passes[3].details,
            (std::vector<std::string>{"fused %r1 (relu) into %c1", "fused %k (clip) into %c2"}));
  EXPECT_EQ(countKind(g, OpKind::kRelu), 2);  // r3 (c3 has two users) and r4 (c4 is returned)
  EXPECT_EQ(countKind(g, OpKind::kClip), 0);
  EXPECT_EQ(countKind(g, OpKind::kConv2d), 4);
  // The names the graph returns stay; %r1 and %k are now convs with their clamps.
  EXPECT_EQ(printGraph(g).find("%c1 ="), std::string::npos);
  EXPECT_NE(printGraph(g).find("%r1 = conv2d(%x, %w, %b, act_min=0)"), std::string::npos)
      << printGraph(g);
  EXPECT_NE(printGraph(g).find("act_min=-0.25, act_max=0.5)"), std::string::npos);
  // The clamp is Clip's and Relu's own arithmetic: the reference results are bit for bit those
  // of the unfused graph.
  expectReferenceBitsMatch(before, g);
}

TEST(ConvActivationFusion, EveryModeMatchesUnfusedAndSavesTwoLaunches) {
  expectFusedMatchesUnfused(parseGraph(kConvActs),
                            {{Shape{2, 2, 3, 5}}, {Shape{1, 2, 1, 5}}, {Shape{3, 2, 7, 5}}}, 2,
                            "fuse-conv-activation");
}

// ---- conv2d + add [+ relu / clip] (fuse-conv-residual) ---------------------------------------

// ResNet's basic block (conv, add of the block's input, relu), a conv without a bias on the
// add's right (a zero bias is inserted; the add's output is returned and read thrice, so it
// keeps no activation), a conv with a clamp (its add stays), an add that broadcasts (stays) and
// a residual with a clip after it.
constexpr const char* kConvResidual = R"(graph g(%x: f32[N, 2, H, 5]) {
  %w = const f32[2, 2, 3, 3] [0.5, -1, 2, 0.25, -0.5, 1.5, 0.1, 0.2, -0.3, 1, -0.5, 0.25, -1, 2, 0.5, 0.75, -0.25, -2, 0.3, 0.1, -0.1, 0.2, 0.4, -0.6, 0.8, -0.2, 0.05, 0.5, -0.5, 1, 0.25, 0.75, -1, 0.6, 0.3, -0.9]
  %b = const f32[2] [0.1, -0.2]
  %c1 = conv2d(%x, %w, %b, pads=[1, 1, 1, 1])
  %s1 = add(%c1, %x)
  %r1 = relu(%s1)
  %c2 = conv2d(%r1, %w, pads=[1, 1, 1, 1])
  %s2 = add(%r1, %c2)
  %c3 = conv2d(%s2, %w, %b, pads=[1, 1, 1, 1], act_min=0)
  %s3 = add(%c3, %s2)
  %w4 = const f32[2, 2, 1, 1] [1, -0.5, 0.25, 2]
  %c4 = conv2d(%s3, %w4, %b)
  %bc = const f32[1, 2, 1, 1] [1, 2]
  %s4 = add(%c4, %bc)
  %c5 = conv2d(%s4, %w4)
  %s5 = add(%c5, %s2)
  %k = clip(%s5, min=-1, max=1.5)
  return %k, %s2
})";

TEST(ConvResidualFusion, AddsAndTheirActivationsBecomeTheConvsEpilogue) {
  Graph g = parseGraph(kConvResidual);
  const Graph before = g;
  const PassReport r = defaultPipeline().run(g);
  ASSERT_EQ(r.passes[2].name, "fuse-conv-residual");
  EXPECT_EQ(r.passes[2].details,
            (std::vector<std::string>{"fused %r1 (add, relu) into %c1", "fused %s2 (add) into %c2",
                                      "fused %k (add, clip) into %c5"}));
  EXPECT_EQ(countKind(g, OpKind::kAdd), 2);  // s3 (c3 has a clamp) and s4 (broadcasts)
  EXPECT_EQ(countKind(g, OpKind::kRelu), 0);
  EXPECT_EQ(countKind(g, OpKind::kClip), 0);
  EXPECT_EQ(countKind(g, OpKind::kConv2d), 5);
  const std::string text = printGraph(g);
  EXPECT_NE(text.find("%r1 = conv2d(%x, %w, %b, %x, pads=[1, 1, 1, 1], act_min=0)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("%s2 = conv2d(%r1, %w, %c2.zero_bias, %r1, pads=[1, 1, 1, 1])"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("%k = conv2d(%s4, %w4, %c5.zero_bias, %s2, act_min=-1, act_max=1.5)"),
            std::string::npos)
      << text;
  // The residual is added in float to the conv's float sums and the clamp is Clip's and
  // Relu's: the reference results are bit for bit those of the unfused graph.
  expectReferenceBitsMatch(before, g);
}

TEST(ConvResidualFusion, EveryModeMatchesUnfusedAndSavesFiveLaunches) {
  // r1: add and relu, s2: add, k: add and clip.
  expectFusedMatchesUnfused(parseGraph(kConvResidual),
                            {{Shape{2, 2, 3, 5}}, {Shape{1, 2, 1, 5}}, {Shape{3, 2, 7, 5}}}, 5,
                            "fuse-conv-residual");
}

// Gears may pad the batch dim through a fused residual conv as through the add it replaced: the
// padded images stay their own (the residual's padded rows meet the conv's), and the output
// keeps the padded dim to slice back; a padded spatial dim is refused as before.
TEST(ConvResidualFusion, PaddingTheBatchPassesThroughAResidualConv) {
  Graph fused = parseGraph(kConvResidual);
  (void)defaultPipeline().run(fused);
  ASSERT_EQ(countKind(fused, OpKind::kAdd), 2);
  const std::vector<InputDim> batch = {InputDim{0, 0}};
  const PaddingPlan plan = analyzePadding(fused, batch);
  ASSERT_EQ(plan.outputs.size(), 2u);
  for (const auto& out : plan.outputs) {
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dim, 0);
    EXPECT_EQ(out[0].origin, (InputDim{0, 0}));
  }
  const std::vector<InputDim> height = {InputDim{0, 2}};
  try {
    (void)analyzePadding(fused, height);
    FAIL() << "expected a gear error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kGear);
    EXPECT_NE(std::string(e.what()).find("it is a spatial dim"), std::string::npos) << e.what();
  }
}

TEST(ConvResidualFusion, AResidualOfAnotherShapeIsAShapeError) {
  try {
    (void)parseGraph(R"(graph g(%x: f32[1, 2, 4, 5], %r: f32[1, 2, 4, 4]) {
  %w = const f32[2, 2, 1, 1] [1, -0.5, 0.25, 2]
  %b = const f32[2] [0.1, -0.2]
  %y = conv2d(%x, %w, %b, %r)
  return %y
})");
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kShape);
    EXPECT_NE(std::string(e.what()).find("(residual) dim 3 is 4 but the output's is 5"),
              std::string::npos)
        << e.what();
  }
}

// ---- matmul + add [+ add] [+ relu / clip] (fuse-matmul-epilogue) -----------------------------

// A linear layer with its bias on the add's left and a relu; one with a bias, a residual and a
// clip; a residual without a bias (a zero bias is inserted); a [1, N] bias (broadcasts: stays);
// a returned product (keeps its relu apart); a product by a 1-D b (no dim N: stays).
constexpr const char* kMatMulEpilogue = R"(graph g(%x: f32[N, 3]) {
  %w1 = const f32[3, 4] [0.5, -1, 2, 0.25, -0.5, 1.5, 0.1, 0.2, -0.3, 1, -0.5, 0.25]
  %b1 = const f32[4] [0.1, -0.2, 0.3, -0.4]
  %m1 = matmul(%x, %w1)
  %a1 = add(%b1, %m1)
  %h = relu(%a1)
  %w2 = const f32[4, 3] [1, -0.5, 0.25, -1, 2, 0.5, 0.75, -0.25, -2, 0.3, 0.1, -0.1]
  %b2 = const f32[3] [0.2, 0.4, -0.6]
  %m2 = matmul(%h, %w2)
  %a2 = add(%m2, %b2)
  %s2 = add(%x, %a2)
  %k = clip(%s2, min=-1, max=1.5)
  %w3 = const f32[3, 3] [0.8, -0.2, 0.05, 0.5, -0.5, 1, 0.25, 0.75, -1]
  %m3 = matmul(%k, %w3)
  %s3 = add(%m3, %k)
  %m4 = matmul(%s3, %w3)
  %bb = const f32[1, 3] [1, 2, 3]
  %s4 = add(%m4, %bb)
  %m5 = matmul(%s4, %w3)
  %r5 = relu(%m5)
  %v = const f32[3] [0.5, -1, 2]
  %d = matmul(%s4, %v)
  %rd = relu(%d)
  return %r5, %m5, %s3, %rd
})";

TEST(MatMulEpilogueFusion, BiasesResidualsAndActivationsBecomeTheMatMulsEpilogue) {
  Graph g = parseGraph(kMatMulEpilogue);
  const Graph before = g;
  const PassReport r = defaultPipeline().run(g);
  ASSERT_EQ(r.passes[5].name, "fuse-matmul-epilogue");
  EXPECT_EQ(r.passes[5].details,
            (std::vector<std::string>{
                "fused %a1 (add: bias) into %m1", "fused %h (relu) into %a1",
                "fused %a2 (add: bias) into %m2", "fused %s2 (add: residual) into %a2",
                "fused %k (clip) into %s2", "fused %s3 (add: residual) into %m3"}));
  EXPECT_EQ(countKind(g, OpKind::kMatMul), 6);
  EXPECT_EQ(countKind(g, OpKind::kAdd), 1);   // s4 (broadcasts a [1, 3])
  EXPECT_EQ(countKind(g, OpKind::kRelu), 2);  // r5 (m5 is returned) and rd (d has no dim N)
  EXPECT_EQ(countKind(g, OpKind::kClip), 0);
  const std::string text = printGraph(g);
  for (const char* line : {"%h = matmul(%x, %w1, %b1, act_min=0)",
                           "%k = matmul(%h, %w2, %b2, %x, act_min=-1, act_max=1.5)",
                           "%s3 = matmul(%k, %w3, %m3.zero_bias, %k)"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  // Bias, then residual, in float, then Clip's and Relu's comparisons: the reference results
  // are bit for bit those of the unfused graph.
  expectReferenceBitsMatch(before, g, {InputSignature{Shape{1, 3}}, {Shape{5, 3}}});
}

TEST(MatMulEpilogueFusion, EveryModeMatchesUnfusedAndSavesSixLaunches) {
  // a1 + h, a2 + s2 + k, s3.
  expectFusedMatchesUnfused(parseGraph(kMatMulEpilogue),
                            {{Shape{2, 3}}, {Shape{1, 3}}, {Shape{7, 3}}}, 6,
                            "fuse-matmul-epilogue");
}

// The fused kernel on shapes the GEMM paths split: rows per task, columns per task (few rows on
// two threads), batches, and every path's blocks, against the unfused graph's compiled plan.
TEST(MatMulEpilogueFusion, FusedPlansMatchUnfusedOnEveryGemmPath) {
  GraphBuilder gb("g");
  const int64_t B = symbolDim("B"), M = symbolDim("M");
  const ValueId x = gb.input("x", DType::kF32, Shape{B, M, 64});
  const ValueId r = gb.input("r", DType::kF32, Shape{B, M, 80});
  uint64_t state = 5;
  auto filled = [&](Shape shape) {
    Tensor t(DType::kF32, shape);
    for (int64_t i = 0; i < t.numel(); ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      t.as<float>()[i] = static_cast<float>(static_cast<int64_t>(state >> 40) % 2001 - 1000) / 2e3f;
    }
    return t;
  };
  const ValueId w = gb.constant(filled(Shape{64, 80}), "w");
  const ValueId b = gb.constant(filled(Shape{80}), "b");
  const ValueId s = gb.add(gb.add(gb.matmul(x, w), b), r);
  gb.output(gb.op(OpKind::kRelu, {s}, {}, "y"));
  const Graph g = gb.build();
  for (int threads : {1, 2}) {
    SessionOptions fo, po;
    fo.threads = po.threads = threads;
    po.disabledPasses = {"fuse-matmul-epilogue"};
    Session fused(g, fo), plain(g, po);
    ASSERT_EQ(countKind(fused.graph(), OpKind::kAdd), 0);
    ASSERT_EQ(countKind(plain.graph(), OpKind::kAdd), 2);
    for (const auto& [nb, nm] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {1, 3}, {2, 5}, {1, 8}, {3, 17}, {1, 200}, {2, 600}}) {
      SCOPED_TRACE(fmt::format("threads {} B {} M {}", threads, nb, nm));
      const auto in = makeInputs(g, {Shape{nb, nm, 64}, Shape{nb, nm, 80}}, 11);
      const auto want = plain.run(in), got = fused.run(in);
      // The same GEMM sums, then the same adds and comparisons: bit for bit.
      EXPECT_TRUE(want[0].equals(got[0]));
      EXPECT_LE(maxAbsDiff(got[0], referenceRun(g, in)[0]), 1e-4);
    }
  }
}

// Gears may pad the rows through a fused linear layer as through the adds and activations it
// replaced: the bias is added to the padded rows too (they stop being zero) and the clamp maps
// what they hold, but rows stay their own, so every output keeps the padded dim to slice back.
TEST(MatMulEpilogueFusion, PaddingTheRowsPassesThroughTheEpilogue) {
  Graph fused = parseGraph(kMatMulEpilogue);
  (void)defaultPipeline().run(fused);
  ASSERT_EQ(countKind(fused, OpKind::kAdd), 1);
  const PaddingPlan plan = analyzePadding(fused, std::vector<InputDim>{InputDim{0, 0}});
  ASSERT_EQ(plan.outputs.size(), 4u);
  for (const auto& out : plan.outputs) {
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dim, 0);
    EXPECT_EQ(out[0].origin, (InputDim{0, 0}));
  }
  // A sum over the rows after a fused bias would add the bias of every padded row: refused, as
  // it is for the unfused add.
  Graph summed = parseGraph(R"(graph g(%x: f32[N, 3]) {
  %w = const f32[3, 2] [0.5, -1, 2, 0.25, -0.5, 1.5]
  %b = const f32[2] [0.1, -0.2]
  %m = matmul(%x, %w)
  %a = add(%m, %b)
  %s = reduce_sum(%a, axes=[0])
  return %s
})");
  (void)defaultPipeline().run(summed);
  ASSERT_EQ(countKind(summed, OpKind::kAdd), 0);
  try {
    (void)analyzePadding(summed, std::vector<InputDim>{InputDim{0, 0}});
    FAIL() << "expected a gear error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kGear);
    EXPECT_NE(std::string(e.what()).find("reduce_sum"), std::string::npos) << e.what();
  }
}

TEST(MatMulEpilogueFusion, ABiasOrResidualOfAnotherShapeIsAShapeError) {
  auto expectShapeError = [](const char* text, const char* what) {
    try {
      (void)parseGraph(text);
      ADD_FAILURE() << "expected a shape error: " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kShape);
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expectShapeError(R"(graph g(%x: f32[2, 3], %w: f32[3, 4], %b: f32[5]) {
  %y = matmul(%x, %w, %b)
  return %y
})",
                   "input 2 (%b) dim 0 is 5 but input 1 (%w) dim 1 is 4 (one bias per column N)");
  expectShapeError(R"(graph g(%x: f32[2, 3], %w: f32[3, 4], %b: f32[4], %r: f32[2, 5]) {
  %y = matmul(%x, %w, %b, %r)
  return %y
})",
                   "input 3 (%r) (residual) dim 1 is 5 but the output's is 4");
  expectShapeError(R"(graph g(%x: f32[2, 3], %v: f32[3], %b: f32[1]) {
  %y = matmul(%x, %v, %b)
  return %y
})",
                   "input 1 (%v) is 1-D, so the product has no dim N for an epilogue");
  expectShapeError(R"(graph g(%x: i32[2, 3], %w: i32[3, 4]) {
  %y = matmul(%x, %w, act_min=0)
  return %y
})",
                   "input 0 (%x) must be f32, got i32");
}

}  // namespace
}  // namespace gearbox
