// Issue 24's ops beyond the kernel differential tests (kernels_test.cpp): the IR text round
// trip, shape inference on symbolic dims and the errors that name op, input, dim and
// attribute; a reshape or expand target naming the graph inputs' symbols; attention-shaped
// batched matmuls through every mode; each op's padding rule (gears/padding.cpp); the MODELED
// cost terms, exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "compiler/kernel_cost.h"
#include "compiler/kernel_spec.h"
#include "compiler/specialize.h"
#include "executor/modes/mode_table.h"
#include "executor/session.h"
#include "expect_error.h"
#include "gears/padding.h"
#include "graph/text.h"

namespace gearbox {
namespace {

using testing_util::errorOf;

Graph graphOf(const std::string& inputs, const std::string& body) {
  return parseGraph("graph g(" + inputs + ") {\n" + body + "\n}\n", "m.gbx");
}

// The inferred type of %y in `%y = <stmt>` over the given inputs.
std::string typeOf(const std::string& inputs, const std::string& stmt) {
  const Graph g = graphOf(inputs, "  %y = " + stmt + "\n  return %y");
  return g.value(g.outputs[0]).type.toString();
}

std::string shapeError(const std::string& inputs, const std::string& stmt) {
  return errorOf([&] { typeOf(inputs, stmt); }, ErrorKind::kShape);
}

TEST(TransformerOps, TextRoundTripLeavesDefaultsOut) {
  const std::string text =
      "graph g(%ids: i64[B, S], %t: f32[1000, 8]) {\n"
      "  %x = gather(%t, %ids)\n"
      "  %s = softmax(%x)\n"
      "  %s0 = softmax(%s, axis=0)\n"
      "  %n = layer_norm(%s0, epsilon=1e-12)\n"
      "  %m = layer_norm(%n, axis=1)\n"
      "  %g = gelu(%m, approximate=1)\n"
      "  %e = gelu(%g)\n"
      "  %r = reduce_sum(%e, axes=[-1], keepdims=0)\n"
      "  %c = cast(%r, to=7)\n"
      "  %w = where(%c, %r, %r)\n"
      "  %u = trilu(%w, upper=0, k=-1)\n"
      "  %v = trilu(%u)\n"
      "  %f = expand(%v, shape=[2, B, S])\n"
      "  return %f\n"
      "}\n";
  const Graph g = parseGraph(text, "m.gbx");
  EXPECT_EQ(printGraph(g), text);
  EXPECT_EQ(g.value(g.outputs[0]).type.toString(), "f32[2, B, S]");
}

TEST(TransformerOps, ExpressionsWithAFactorRoundTrip) {
  // The printer writes a * S as `4*B`; the parser reads an expression that starts with one.
  const std::string text =
      "graph g(%x: f32[S, B, 128]) {\n"
      "  %y = reshape(%x, shape=[S, 4*B, 32])\n"
      "  return %y\n"
      "}\n";
  const Graph g = parseGraph(text, "m.gbx");
  EXPECT_EQ(g.value(g.outputs[0]).type.toString(), "f32[S, 4*B, 32]");
  EXPECT_EQ(printGraph(g), text);
  EXPECT_EQ(typeOf("%x: f32[2*B + 1]", "relu(%x)"), "f32[2*B + 1]");
}

TEST(TransformerOps, SymbolicShapes) {
  // An embedding: [B, S] ids into a [V, D] table give [B, S, D]; a 0-D id drops the dim.
  EXPECT_EQ(typeOf("%t: f32[1000, 128], %x: i64[B, S]", "gather(%t, %x)"), "f32[B, S, 128]");
  EXPECT_EQ(typeOf("%t: f32[4, 5], %x: i32[]", "gather(%t, %x, axis=-1)"), "f32[4]");
  EXPECT_EQ(typeOf("%t: f32[3, 9, 2], %x: i64[2, 2]", "gather(%t, %x, axis=1)"), "f32[3, 2, 2, 2]");
  // Attention: [B, H, S, D] x [B, H, D, S] and the broadcast of a [S, S] mask.
  EXPECT_EQ(typeOf("%q: f32[B, 4, S, 32], %k: f32[B, 4, 32, S]", "matmul(%q, %k)"),
            "f32[B, 4, S, S]");
  EXPECT_EQ(typeOf("%q: f32[B, 4, S, 32], %k: f32[32, S]", "matmul(%q, %k)"), "f32[B, 4, S, S]");
  EXPECT_EQ(typeOf("%c: i32[1, S], %x: f32[B, S], %z: f32[]", "where(%c, %x, %z)"), "f32[B, S]");
  EXPECT_EQ(typeOf("%x: f32[B, S, 8]", "reduce_sum(%x, axes=[0, 2])"), "f32[1, S, 1]");
  EXPECT_EQ(typeOf("%x: f32[B, S, 8], %z: f32[8]", "sub(%x, %z)"), "f32[B, S, 8]");
  EXPECT_EQ(typeOf("%x: f32[B, S, 8], %z: f32[]", "pow(%x, %z)"), "f32[B, S, 8]");
  EXPECT_EQ(typeOf("%x: i32[B, S]", "cast(%x, to=1)"), "f32[B, S]");
  // Expand: a name in the target is a graph input's symbol; 1 keeps the input's dim.
  EXPECT_EQ(typeOf("%x: f32[], %ids: i64[B, S]", "expand(%x, shape=[S, S])"), "f32[S, S]");
  EXPECT_EQ(typeOf("%x: f32[3, 1], %ids: i64[B, S]", "expand(%x, shape=[1, 1, S])"),
            "f32[1, 3, S]");
  EXPECT_EQ(typeOf("%x: f32[H], %ids: i64[H]", "expand(%x, shape=[2, (H - 1) / 2 + 1, H])"),
            "f32[2, (H + 1) / 2, H]");
}

TEST(TransformerOps, ErrorsNameOpInputDimAndAttribute) {
  EXPECT_EQ(shapeError("%x: f32[2, 3], %s: f32[4]", "layer_norm(%x, %s)"),
            "m.gbx:2: op %y = layer_norm: input 0 (%x) dim 1 is 3 but input 1 (%s) dim 0 is 4 "
            "(scale has the normalised dims' shape)");
  EXPECT_EQ(shapeError("%x: f32[2, 3], %s: f32[2, 3]", "layer_norm(%x, %s)"),
            "m.gbx:2: op %y = layer_norm: input 1 (%s) has rank 2 but the normalised dims [1, 2) "
            "of input 0 (%x) are [3]; scale must have their shape");
  EXPECT_EQ(shapeError("%x: f32[2, 3]", "layer_norm(%x, epsilon=-1)"),
            "m.gbx:2: op %y = layer_norm: attribute epsilon is -1, expected a number >= 0 that is "
            "finite as an f32 (at most 3.4028235e+38; the kernels add it as one)");
  // A finite double that is inf as the f32 the kernels add (every output would be 0).
  EXPECT_EQ(shapeError("%x: f32[2, 3]", "layer_norm(%x, epsilon=1e300)"),
            "m.gbx:2: op %y = layer_norm: attribute epsilon is 1e+300, expected a number >= 0 that "
            "is finite as an f32 (at most 3.4028235e+38; the kernels add it as one)");
  EXPECT_NE(shapeError("%x: f32[2, 3]", "layer_norm(%x, epsilon=inf)").find("epsilon is inf"),
            std::string::npos);
  EXPECT_NE(shapeError("%x: f32[2, 3]", "layer_norm(%x, epsilon=3.4028236e38)").find("epsilon"),
            std::string::npos);
  // FLT_MAX as the importer spells it (the shortest f32 text, above FLT_MAX as a double).
  EXPECT_EQ(typeOf("%x: f32[2, 3]", "layer_norm(%x, epsilon=3.4028235e38)"), "f32[2, 3]");
  // attention multiplies by scale as an f32: the same cut-off, for either sign.
  EXPECT_EQ(shapeError("%x: f32[2, 3]", "attention(%x, %x, %x, scale=-1e300)"),
            "m.gbx:2: op %y = attention: attribute scale is -1e+300; it must be finite as an f32 "
            "(magnitude at most 3.4028235e+38)");
  EXPECT_NE(shapeError("%x: f32[2, 3]", "attention(%x, %x, %x, scale=inf)").find("scale is inf"),
            std::string::npos);
  EXPECT_EQ(typeOf("%x: f32[2, 3]", "attention(%x, %x, %x, scale=-3.4028235e38)"), "f32[2, 3]");
  EXPECT_EQ(shapeError("%x: f32[2, 3]", "softmax(%x, axis=2)"),
            "m.gbx:2: op %y = softmax: attribute axis: axis 2 is out of range for input 0 (%x) of "
            "rank 2 (expected [-2, 1])");
  EXPECT_EQ(shapeError("%x: i32[2, 3]", "softmax(%x)"),
            "m.gbx:2: op %y = softmax: input 0 (%x) is i32; softmax takes f32");
  EXPECT_EQ(shapeError("%x: i32[2, 3], %z: i32[3]", "div(%x, %z)"),
            "m.gbx:2: op %y = div: input 0 (%x) is i32; div takes f32");
  EXPECT_EQ(shapeError("%x: f32[2, 3], %z: f32[4]", "sub(%x, %z)"),
            "m.gbx:2: op %y = sub: input 0 (%x) dim 1 (size 3) and input 1 (%z) dim 0 (size 4) "
            "cannot be broadcast");
  EXPECT_EQ(shapeError("%t: f32[10, 4], %i: f32[3]", "gather(%t, %i)"),
            "m.gbx:2: op %y = gather: input 1 (%i) must be i32 or i64, got f32");
  EXPECT_EQ(shapeError("%t: f32[10, 4, 2, 2], %i: i64[2, 2, 2, 2]", "gather(%t, %i)"),
            "m.gbx:2: op %y = gather: input 0 (%t) of rank 4 gathered by input 1 (%i) of rank 4 "
            "would have rank 7, above the maximum 6");
  EXPECT_EQ(
      errorOf([&] { typeOf("%t: f32[0, 4], %i: i64[2, 3]", "gather(%t, %i)"); }, ErrorKind::kIndex),
      "m.gbx:2: op %y = gather: input 1 (%i) has 6 entries but input 0 (%t) dim 0 is 0, so "
      "every index is out of range");
  EXPECT_EQ(shapeError("%c: i32[2], %x: f32[3], %z: f32[3]", "where(%c, %x, %z)"),
            "m.gbx:2: op %y = where: input 0 (%c) dim 0 (size 2) and input 1 (%x) dim 0 (size 3) "
            "cannot be broadcast");
  EXPECT_EQ(shapeError("%c: i32[3], %x: f32[3], %z: i32[3]", "where(%c, %x, %z)"),
            "m.gbx:2: op %y = where: input 1 (%x) is f32 but input 2 (%z) is i32; where needs one "
            "dtype for x and y");
  EXPECT_EQ(shapeError("%x: f32[3, 2]", "expand(%x, shape=[4, 3])"),
            "m.gbx:2: op %y = expand: input 0 (%x) dim 0 (size 3) cannot be broadcast to "
            "attribute shape [4, 3] dim 0 (size 4)");
  EXPECT_EQ(shapeError("%x: f32[3]", "expand(%x, shape=[T, 3])"),
            "m.gbx:2: op %y = expand: attribute shape [T, 3]: dim 0 is named (T), but neither "
            "input 0 (%x) nor a graph input declares that name");
  EXPECT_EQ(shapeError("%x: f32[3]", "cast(%x, to=9)"),
            "m.gbx:2: op %y = cast: attribute to is 9; expected an ONNX element type gearbox has: "
            "1 (f32), 6 (i32) or 7 (i64)");
  EXPECT_EQ(shapeError("%x: f32[3]", "trilu(%x)"),
            "m.gbx:2: op %y = trilu: input 0 (%x) has rank 1; trilu needs rank >= 2 (a matrix or "
            "a batch of them)");
  EXPECT_EQ(shapeError("%x: f32[3, 3]", "gelu(%x, approximate=2)"),
            "m.gbx:2: op %y = gelu: attribute approximate is 2, expected 0 (erf) or 1 (tanh)");
  EXPECT_EQ(shapeError("%x: f32[3, 3]", "reduce_sum(%x, axes=[1, -1])"),
            "m.gbx:2: op %y = reduce_sum: attribute axes names dim 1 twice");
}

// The shape error of specialising `%y = <stmt>` over the given inputs to the call's shapes.
std::string specializeError(const std::string& inputs, const std::string& stmt,
                            const InputSignature& call) {
  const Graph g = graphOf(inputs, "  %y = " + stmt + "\n  return %y");
  return errorOf([&] { specializeTypes(g, call); }, ErrorKind::kShape);
}

TEST(TransformerOps, ATargetExpressionPastInt64OrBelowZeroIsAShapeErrorNamingTheDim) {
  // Symbolic, the graph is fine; at B = 2 the factor 2^62 overflows int64. It used to become the
  // unknown dim -1 (f32[-1, 2, 2]) and fail later without saying where or why.
  EXPECT_EQ(typeOf("%x: f32[B, 2]", "expand(%x, shape=[4611686018427387904*B, B, 2])"),
            "f32[4611686018427387904*B, B, 2]");
  EXPECT_EQ(
      specializeError("%x: f32[B, 2]", "expand(%x, shape=[4611686018427387904*B, B, 2])", {{2, 2}}),
      "m.gbx:2: op %y = expand: attribute shape [4611686018427387904*B, B, 2]: dim 0 "
      "(4611686018427387904*B) overflows int64 at B = 2");
  EXPECT_EQ(
      specializeError("%x: f32[B, 2]", "reshape(%x, shape=[4611686018427387904*B, -1])", {{2, 2}}),
      "m.gbx:2: op %y = reshape: attribute shape [4611686018427387904*B, -1]: dim 0 "
      "(4611686018427387904*B) overflows int64 at B = 2");
  // Below zero: -2 would have read as a named symbol.
  EXPECT_EQ(specializeError("%x: f32[B, 2]", "expand(%x, shape=[B - 3, B, 2])", {{1, 2}}),
            "m.gbx:2: op %y = expand: attribute shape [B - 3, B, 2]: dim 0 (B - 3) is -2 at B = 1, "
            "below 0");
  // A graph input's symbol the node's input does not carry takes the same check.
  EXPECT_EQ(specializeError("%x: f32[], %ids: i64[S]", "expand(%x, shape=[4611686018427387904*S])",
                            {{}, {4}}),
            "m.gbx:2: op %y = expand: attribute shape [4611686018427387904*S]: dim 0 "
            "(4611686018427387904*S) overflows int64 at S = 4");
  const Graph n = graphOf("%x: f32[B, 2]", "  %y = expand(%x, shape=[B - 3, B, 2])\n  return %y");
  EXPECT_EQ(specializeTypes(n, {{4, 2}})[n.outputs[0]].toString(), "f32[1, 4, 2]");
}

// Runs `g` in every mode (geared with exact gears on every geared dim of `shapes`) and checks
// each call against the reference executor.
void expectEveryModeMatches(const Graph& g, const std::vector<InputSignature>& calls) {
  for (Mode mode : modes(ModeSet::kWithoutGears)) {
    SessionOptions o;
    o.mode = mode;
    Session s(g, o);
    for (size_t i = 0; i < calls.size(); ++i) {
      const auto in = makeInputs(g, calls[i], 7 + i);
      const auto out = s.run(in);
      const auto ref = referenceRun(g, in);
      ASSERT_EQ(out.size(), ref.size());
      for (size_t k = 0; k < out.size(); ++k) {
        ASSERT_EQ(out[k].shape(), ref[k].shape()) << modeName(mode) << " call " << i;
        EXPECT_LE(maxAbsDiff(out[k], ref[k]), 1e-5) << modeName(mode) << " call " << i;
      }
    }
  }
}

TEST(TransformerOps, ReshapeTakesGraphSymbolsBackFromAProduct) {
  // MultiheadAttention's out_proj: [S, B, 8] flattened to [S * B, 8] rows, a matmul, then back
  // to [S, B, 8]. The product of two symbols has no dim of its own; each symbol is a graph
  // input's, so the target names them.
  const Graph g = graphOf("%x: f32[S, B, 8], %w: f32[8, 8]",
                          "  %rows = reshape(%x, shape=[-1, 8])\n"
                          "  %m = matmul(%rows, %w)\n"
                          "  %y = reshape(%m, shape=[S, B, 8])\n"
                          "  return %y");
  EXPECT_EQ(g.value(g.outputs[0]).type.toString(), "f32[S, B, 8]");
  expectEveryModeMatches(g, {{{3, 2, 8}, {8, 8}}, {{5, 2, 8}, {8, 8}}, {{3, 1, 8}, {8, 8}}});
  // The key holds the sizes the names resolved to: no symbol, whatever the spelling.
  const auto types = specializeTypes(g, {{3, 2, 8}, {8, 8}});
  KernelKey key;
  makeKernelKeyInto(key, g, types, 2);
  EXPECT_EQ(key.attrs.shape->toString(), "[3, 2, 8]");
}

TEST(TransformerOps, ExpandOfAGraphSymbolMakesACausalMask) {
  const Graph g = graphOf("%x: f32[B, S, S]",
                          "  %ninf = const f32[] [-inf]\n"
                          "  %full = expand(%ninf, shape=[S, S])\n"
                          "  %mask = trilu(%full, k=1)\n"
                          "  %y = add(%x, %mask)\n"
                          "  return %y");
  EXPECT_EQ(g.value(g.outputs[0]).type.toString(), "f32[B, S, S]");
  expectEveryModeMatches(g, {{{2, 4, 4}}, {{2, 7, 7}}, {{1, 1, 1}}});
  SessionOptions o;
  Session s(g, o);
  Tensor x(DType::kF32, {1, 3, 3});
  for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] = 1;
  const std::vector<Tensor> in{x};
  const auto out = s.run(in);
  const float* y = out[0].as<float>();
  const float inf = std::numeric_limits<float>::infinity();
  const float expected[] = {1, -inf, -inf, 1, 1, -inf, 1, 1, 1};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(y[i], expected[i]) << i;
}

TEST(TransformerOps, AttentionScoresInEveryMode) {
  // [B, H, S, D] x [B, H, D, S]: the batch (B * H) of GEMMs, the static plan's offsets and the
  // generic kernel's agree with the reference; softmax over the keys.
  const Graph g = graphOf("%q: f32[B, 4, S, 8], %k: f32[B, 4, 8, S], %v: f32[B, 4, S, 8]",
                          "  %s = matmul(%q, %k)\n"
                          "  %p = softmax(%s)\n"
                          "  %y = matmul(%p, %v)\n"
                          "  return %y");
  std::vector<InputSignature> calls;
  for (auto [b, s] : {std::pair{2, 5}, {2, 9}, {1, 1}, {3, 5}})
    calls.push_back({{b, 4, s, 8}, {b, 4, 8, s}, {b, 4, s, 8}});
  expectEveryModeMatches(g, calls);
  const auto spec = compileKernelSpec(makeKernelKey(
      OpKind::kMatMul, {{DType::kF32, {2, 4, 5, 8}}, {DType::kF32, {2, 4, 8, 5}}}, {}));
  const auto& p = std::get<MatMulParams>(spec->params);
  EXPECT_EQ(p.batch, 8);
  EXPECT_EQ(p.m, 5);
  EXPECT_EQ(p.n, 5);
  EXPECT_EQ(p.k, 8);
  EXPECT_EQ(p.aOffsets[7], 7 * 40);
  EXPECT_EQ(p.bOffsets[7], 7 * 40);
}

// ---- padding rules ---------------------------------------------------------------------------

std::string paddingError(const Graph& g, std::vector<InputDim> padded) {
  return errorOf([&] { analyzePadding(g, padded); }, ErrorKind::kGear);
}

TEST(TransformerOps, SoftmaxAndNormsRefuseAPaddedReducedDim) {
  const Graph attention = graphOf("%s: f32[B, S, S]", "  %y = softmax(%s)\n  return %y");
  EXPECT_EQ(paddingError(attention, {{0, 2}}),
            "m.gbx:2: op %y = softmax: cannot pad input 's' dim 2: input 0 (%s) dim 2 is padded "
            "and softmax normalises along it, but its padding holds zeros, not scores hidden by "
            "an additive key mask (<= -10000: the model's 0/1 attention mask, zero-padded, as "
            "(1 - mask) * -10000), so the padded positions would enter every real result along "
            "it");
  // The batch and the query rows may be padded: each row is normalised on its own.
  const PaddingPlan rows = analyzePadding(attention, std::vector<InputDim>{{0, 0}, {0, 1}});
  ASSERT_EQ(rows.outputs[0].size(), 2u);
  const Graph norm =
      graphOf("%x: f32[B, S, 8], %g: f32[8]", "  %y = layer_norm(%x, %g)\n  return %y");
  EXPECT_EQ(analyzePadding(norm, std::vector<InputDim>{{0, 1}}).outputs[0][0].dim, 1);
  EXPECT_EQ(paddingError(norm, {{0, 2}}),
            "m.gbx:2: op %y = layer_norm: cannot pad input 'x' dim 2: input 0 (%x) dim 2 is "
            "padded and layer_norm normalises over it, so the padded positions would enter every "
            "real result along it (no key mask can hide them there)");
}

// BERT's extended attention mask, (1 - valid) * big, from a 0/1 `valid` input [B, S] whose
// padding (zeros) means "pad": scores [B, H, S, S] plus it, softmax over the keys, times v.
std::string maskedAttention(const std::string& big, const std::string& tail) {
  return "  %u = unsqueeze(%valid, axes=[1, 2])\n  %one = const f32[] [1]\n"
         "  %inv = sub(%one, %u)\n  %big = const f32[] [" +
         big + "]\n  %mask = mul(%inv, %big)\n" + tail;
}

TEST(TransformerOps, SoftmaxOverKeysHiddenByAZeroPaddedAttentionMaskIsLegal) {
  const std::string in = "%s: f32[B, H, S, S], %valid: f32[B, S], %v: f32[B, H, S, 8]";
  const std::string body =
      "  %x = add(%s, %mask)\n  %p = softmax(%x)\n  %y = matmul(%p, %v)\n  return %y";
  const std::vector<InputDim> padded{{0, 2}, {0, 3}, {1, 1}, {2, 2}};
  const PaddingPlan plan = analyzePadding(graphOf(in, maskedAttention("-10000", body)), padded);
  // The query rows stay padded (sliced back); the keys are contracted away, their weights 0.
  ASSERT_EQ(plan.outputs[0].size(), 1u);
  EXPECT_EQ(plan.outputs[0][0].dim, 2);
  EXPECT_EQ(plan.outputs[0][0].origin, (InputDim{0, 2}));
  // -inf hides as well; a mask of -100 does not (exp(-100) is not 0 in f32).
  analyzePadding(graphOf(in, maskedAttention("-inf", body)), padded);
  EXPECT_EQ(paddingError(graphOf(in, maskedAttention("-100", body)), padded),
            "m.gbx:8: op %p = softmax: cannot pad input 's' dim 3: input 0 (%x) dim 3 is padded "
            "and softmax normalises along it, but its padding holds the constant -100, not scores "
            "hidden by an additive key mask (<= -10000: the model's 0/1 attention mask, "
            "zero-padded, as (1 - mask) * -10000), so the padded positions would enter every real "
            "result along it");
  // A mask that is not padded along the keys meets the padded scores: refused there.
  EXPECT_NE(paddingError(graphOf(in, maskedAttention("-10000", body)), {{0, 2}, {0, 3}, {2, 2}})
                .find("op %x = add: cannot pad input 's' dim 3"),
            std::string::npos);
  // An additive mask fed in ready-made is zero-padded, and 0 means "attend": refused.
  const std::string ones = "  %x = add(%s, %m2)\n  %p = softmax(%x)\n  return %p";
  const Graph onesMask = graphOf("%s: f32[B, S, S], %m2: f32[B, 1, S]", ones);
  EXPECT_NE(paddingError(onesMask, {{0, 2}, {1, 2}}).find("its padding holds zeros"),
            std::string::npos);
}

TEST(TransformerOps, FusedAttentionWithAHidingMaskMayPadTheKeys) {
  const std::string in =
      "%q: f32[B, H, S, 8], %k: f32[B, H, S, 8], %v: f32[B, H, S, 8], %valid: f32[B, S]";
  const std::vector<InputDim> padded{{0, 2}, {1, 2}, {2, 2}, {3, 1}};
  const PaddingPlan plan = analyzePadding(
      graphOf(in, maskedAttention("-10000",
                                  "  %y = attention(%q, %k, %v, %mask, scale=0.5)\n  return %y")),
      padded);
  ASSERT_EQ(plan.outputs[0].size(), 1u);
  EXPECT_EQ(plan.outputs[0][0].dim, 2);
  // The keys' real sizes are tied to the mask's.
  EXPECT_FALSE(plan.sameRealSize.empty());
  EXPECT_EQ(
      paddingError(graphOf(in, "  %y = attention(%q, %k, %v, scale=0.5)\n  return %y"),
                   {{0, 2}, {1, 2}, {2, 2}}),
      "m.gbx:2: op %y = attention: cannot pad input 'k' dim 2: input 1 (%k) dim 2 is padded and "
      "holds the keys S_k, which the attention's softmax normalises over, and there is no mask "
      "to hide them, so the padded keys would enter every real result");
  EXPECT_NE(paddingError(graphOf(in, maskedAttention("-10",
                                                     "  %y = attention(%q, %k, %v, "
                                                     "%mask, scale=0.5)\n  return %y")),
                         padded)
                .find("the mask's padding holds the constant -10, not a key mask"),
            std::string::npos);
}

TEST(TransformerOps, ReduceSumOverZeroPaddingIsLegalAndOverOtherPaddingNot) {
  const Graph sum = graphOf("%x: f32[B, S]", "  %y = reduce_sum(%x, axes=[1])\n  return %y");
  EXPECT_TRUE(analyzePadding(sum, std::vector<InputDim>{{0, 1}}).outputs[0].empty());
  const Graph shifted = graphOf("%x: f32[B, S], %c: f32[]",
                                "  %e = erf(%x)\n  %s = sub(%e, %c)\n"
                                "  %y = reduce_sum(%s, axes=[1])\n  return %y");
  EXPECT_EQ(paddingError(shifted, {{0, 1}}),
            "m.gbx:4: op %y = reduce_sum: cannot pad input 'x' dim 1: input 0 (%s) dim 1 is "
            "padded and reduce_sum adds it up, but its padding holds finite values, not zeros "
            "(an op before wrote into it)");
}

TEST(TransformerOps, GatherExpandAndTriluPaddingRules) {
  // Padded ids read real row 0: padded, not zero, so a contraction of it against non-zero
  // padding (sigmoid(0) = 0.5) is refused; against zeros it is legal.
  const std::string embedIn = "%t: f32[10, 4], %ids: i64[B, S], %w: f32[S, 3]";
  const std::string gathered = "  %x = gather(%t, %ids)\n  %xt = transpose(%x, perm=[0, 2, 1])\n";
  EXPECT_NE(paddingError(graphOf(embedIn, gathered + "  %h = sigmoid(%w)\n  %y = matmul(%xt, %h)\n"
                                                     "  return %y"),
                         {{1, 1}, {2, 0}})
                .find("neither's padding is zero"),
            std::string::npos);
  analyzePadding(graphOf(embedIn, gathered + "  %y = matmul(%xt, %w)\n  return %y"),
                 std::vector<InputDim>{{1, 1}, {2, 0}});
  const Graph table =
      graphOf("%t: f32[V, 4], %ids: i64[S]", "  %y = gather(%t, %ids)\n  return %y");
  EXPECT_EQ(paddingError(table, {{0, 0}}),
            "m.gbx:2: op %y = gather: cannot pad input 't' dim 0: input 0 (%t) is read by index "
            "along dim 0, which is padded; an index >= the real size would read padding instead "
            "of failing");
  // Expand of a size-1 dim to a padded symbol: padded there, its real part what the unpadded
  // run computes.
  const Graph mask = graphOf("%x: f32[B, S, S]",
                             "  %one = const f32[] [1]\n  %m = expand(%one, shape=[S, S])\n"
                             "  %y = add(%x, %m)\n  return %y");
  EXPECT_EQ(analyzePadding(mask, std::vector<InputDim>{{0, 1}, {0, 2}}).outputs[0].size(), 2u);
  const Graph tri = graphOf("%x: f32[B, S, S]", "  %y = trilu(%x, k=1)\n  return %y");
  EXPECT_EQ(analyzePadding(tri, std::vector<InputDim>{{0, 1}, {0, 2}}).outputs[0].size(), 2u);
}

// A batched matmul keeps a zero-padded batch slice zero (0 times finite), so summing over the
// batch is legal -- unless K is padded too: the slices' doubly padded corners then enter.
TEST(TransformerOps, BatchedMatMulKeepsZeroBatchPaddingOnlyWithoutPaddedK) {
  const std::string sum = "  %m = matmul(%x, %w)\n  %y = reduce_sum(%m, axes=[0])\n  return %y";
  analyzePadding(graphOf("%x: f32[B, 2, 4], %w: f32[B, 4, 3]", sum),
                 std::vector<InputDim>{{0, 0}, {1, 0}});
  EXPECT_NE(paddingError(graphOf("%x: f32[B, 2, K], %w: f32[B, K, 3]", sum),
                         {{0, 0}, {1, 0}, {0, 2}, {1, 1}})
                .find("op %y = reduce_sum: cannot pad input 'x' dim 0: input 0 (%m) dim 0 is "
                      "padded and reduce_sum adds it up, but its padding holds finite values"),
            std::string::npos);
}

// Graphs a review found the analysis accepted although padding changed their real outputs;
// each must be refused, at the op named.
TEST(TransformerOps, PaddingRefusesWhatChangesRealResults) {
  auto refusedAt = [](const std::string& in, const std::string& body, std::vector<InputDim> padded,
                      const std::string& op) {
    const std::string e = paddingError(graphOf(in, body), padded);
    EXPECT_NE(e.find(op), std::string::npos) << op << " | " << body << " | " << e;
  };
  // A constant <= -10000 added to every key is no key mask: the real keys get it too.
  refusedAt("%x: f32[S]",
            "  %c = const f32[] [-10000]\n  %s = add(%x, %c)\n  %p = softmax(%s)\n  return %p",
            {{0, 0}}, "op %p = softmax");
  // triu(big, 0) masks the diagonal, so row 0 has no real key: padded keys would share it.
  const std::string causal =
      "  %xt = transpose(%x, perm=[1, 0])\n  %s = matmul(%x, %xt)\n"
      "  %c = const f32[] [-10000]\n  %full = expand(%c, shape=[S, S])\n"
      "  %mask = trilu(%full, k=K)\n  %sm = add(%s, %mask)\n  %p = softmax(%sm)\n  return %p";
  auto withK = [&](const char* k) {
    std::string b = causal;
    b.replace(b.find("k=K"), 3, std::string("k=") + k);
    return b;
  };
  refusedAt("%x: f32[S, 4]", withK("0"), {{0, 0}}, "op %p = softmax");
  analyzePadding(graphOf("%x: f32[S, 4]", withK("1")), std::vector<InputDim>{{0, 0}});
  // pow(negative, 0.5) is NaN, and 0 * NaN is not 0.
  refusedAt("%a: f32[S, 1], %z: f32[S, 3]",
            "  %aa = mul(%a, %a)\n  %w = const f32[1, 2] [-1, -2]\n  %s = add(%aa, %w)\n"
            "  %half = const f32[] [0.5]\n  %p = pow(%s, %half)\n"
            "  %t = transpose(%p, perm=[1, 0])\n  %m = matmul(%t, %z)\n  return %m",
            {{0, 0}, {1, 0}}, "op %m = matmul");
  const std::string mask =
      "  %one = const f32[] [1]\n  %big = const f32[] [-10000]\n  %inv = sub(%one, %m)\n"
      "  %mask = mul(%inv, %big)\n";
  // v padded with 1 / 0 = inf: a masked key's weight 0 times inf is NaN.
  refusedAt("%q: f32[2, 4], %k: f32[S, 4], %v0: f32[S, 4], %m: f32[S]",
            "  %minus1 = const f32[] [-1]\n  %v = pow(%v0, %minus1)\n" + mask +
                "  %o = attention(%q, %k, %v, %mask, scale=0.5)\n  return %o",
            {{1, 0}, {2, 0}, {3, 0}}, "op %o = attention");
  // A padded mask against unpadded keys: real size 1 broadcasts, padded it does not.
  refusedAt("%q: f32[2, 4], %k: f32[4, 4], %v: f32[4, 4], %m: f32[S]",
            mask + "  %o = attention(%q, %k, %v, %mask, scale=0.5)\n  return %o", {{3, 0}},
            "op %o = attention: cannot pad input 'm' dim 0: input 3 (%mask) is padded along "
            "the keys but input 1 (%k) is not");
  // A rank-0 mask has no key dim (read out of bounds before).
  refusedAt("%q: f32[2, 4], %k: f32[S, 4], %v: f32[S, 4]",
            "  %mask = const f32[] [0]\n  %o = attention(%q, %k, %v, %mask, scale=0.5)\n"
            "  return %o",
            {{1, 0}, {2, 0}}, "the mask is not padded there to hide them");
  // trilu zeroes part of a padded batch dim: its key mask is one no more.
  refusedAt("%x: f32[S, 2, 2], %m: f32[S]",
            mask +
                "  %u = unsqueeze(%mask, axes=[1, 2])\n  %e = expand(%u, shape=[S, 2, 2])\n"
                "  %t = trilu(%e, k=0)\n  %sm = add(%x, %t)\n  %p = softmax(%sm, axis=0)\n"
                "  return %p",
            {{0, 0}, {1, 0}}, "op %p = softmax");
  // A second review: summing two padded dims brings in their corner (an identity here).
  refusedAt("%x: f32[S]",
            "  %one = const f32[1, 1] [1]\n  %ones = expand(%one, shape=[S, S])\n"
            "  %u = trilu(%ones, k=0)\n  %i = trilu(%u, upper=0, k=0)\n"
            "  %s = reduce_sum(%i, axes=[0, 1], keepdims=0)\n  %y = add(%x, %s)\n  return %y",
            {{0, 0}}, "op %s = reduce_sum");
  // Masks that keep no key: the kept keys of (m + 1) * big are masked too; a mask plus a
  // data-derived constant moves the kept keys; two masks picked per key, or averaged over
  // rows, may each keep a different key.
  const std::string tail = "  %s = add(%x, %mk)\n  %p = softmax(%s)\n  return %p";
  refusedAt("%x: f32[2, S], %m: f32[S]",
            "  %one = const f32[] [1]\n  %big = const f32[] [-10000]\n  %inv = add(%m, %one)\n"
            "  %mk = mul(%inv, %big)\n" +
                tail,
            {{0, 1}, {1, 0}}, "op %p = softmax");
  refusedAt(
      "%x: f32[2, S], %m: f32[S]",
      mask + "  %c = const f32[] [-20000]\n  %t = mul(%m, %c)\n  %mk = add(%mask, %t)\n" + tail,
      {{0, 1}, {1, 0}}, "op %p = softmax");
  refusedAt("%x: f32[2, S], %m: f32[S], %m2: f32[S], %c: f32[S]",
            mask +
                "  %i2 = sub(%one, %m2)\n  %k2 = mul(%i2, %big)\n"
                "  %mk = where(%c, %mask, %k2)\n" +
                tail,
            {{0, 1}, {1, 0}, {2, 0}, {3, 0}}, "op %p = softmax");
  refusedAt("%x: f32[2, S], %m: f32[4, S]",
            mask + "  %mk = mean(%mask, axes=[0], keepdims=0)\n" + tail, {{0, 1}, {1, 1}},
            "op %p = softmax");
  // Expanding a padded dim to another size: a real size of 1 broadcasts.
  refusedAt("%x: f32[S], %y: f32[T]", "  %e = expand(%x, shape=[T])\n  return %e, %y", {{0, 0}},
            "op %e = expand");
}

// The importer's position rows, pos[:S] as arange(S) from ones: expand, a strictly lower
// triangle (k = -1), summed per row. The padded columns of a real row are zeroed by the
// triangle, so the sum is legal and the real rows' indices are 0..S-1 as unpadded.
TEST(TransformerOps, ArangeFromATriangleOfOnesMayPadItsSize) {
  auto arange = [](const std::string& trilu) {
    return "  %one = const f32[] [1]\n  %sq = expand(%one, shape=[S, S])\n  %low = " + trilu +
           "\n  %ar = reduce_sum(%low, axes=[1], keepdims=0)\n  %idx = cast(%ar, to=7)\n"
           "  %rows = index_select(%pos, %idx, dim=0)\n  %y = add(%x, %rows)\n  return %y";
  };
  const std::string in = "%x: f32[S, 4], %pos: f32[16, 4]";
  const PaddingPlan plan = analyzePadding(graphOf(in, arange("trilu(%sq, upper=0, k=-1)")),
                                          std::vector<InputDim>{{0, 0}});
  ASSERT_EQ(plan.outputs[0].size(), 1u);
  EXPECT_EQ(plan.outputs[0][0].dim, 0);
  // k = 1 keeps column S of row S - 1: the padding would be counted.
  EXPECT_EQ(paddingError(graphOf(in, arange("trilu(%sq, upper=0, k=1)")), {{0, 0}}),
            "m.gbx:5: op %ar = reduce_sum: cannot pad input 'x' dim 0: input 0 (%low) dim 1 is "
            "padded and reduce_sum adds it up, but its padding holds finite values, not zeros (an "
            "op before wrote into it)");
  // The upper triangle with k >= 0 zeroes the padded rows of real columns instead.
  analyzePadding(graphOf(in,
                         "  %one = const f32[] [1]\n  %sq = expand(%one, shape=[S, S])\n"
                         "  %up = trilu(%sq, k=0)\n  %ar = reduce_sum(%up, axes=[0], keepdims=0)\n"
                         "  %y = unsqueeze(%ar, axes=[1])\n  %z = add(%x, %y)\n  return %z"),
                 std::vector<InputDim>{{0, 0}});
}

// ---- MODELED cost terms -----------------------------------------------------------------------

KernelCost costOf(OpKind k, std::vector<TensorType> in, Attrs a = {}) {
  return kernelCost(makeKernelKey(k, std::move(in), a));
}

TEST(TransformerOps, CostTermsAreBandwidthAndTranscendentalCounts) {
  const TensorType x{DType::kF32, {2, 4, 8, 8}};  // 512 elements, 2048 bytes
  // Softmax: (max, sub, exp, add, scale) per element + a division per row of 8.
  KernelCost c = costOf(OpKind::kSoftmax, {x});
  EXPECT_EQ(c.flops, 512 * (4 + flops::kExp) + 64);
  EXPECT_EQ(c.bytes, 2 * 2048);
  // LayerNorm with scale and bias over rows of 8: 8 flops per element, 5 per row.
  const TensorType row{DType::kF32, {8}};
  c = costOf(OpKind::kLayerNorm, {x, row, row});
  EXPECT_EQ(c.flops, 512 * 8 + 64 * 5);
  EXPECT_EQ(c.bytes, 2048 + 32 + 32 + 2048);
  c = costOf(OpKind::kErf, {x});
  EXPECT_EQ(c.flops, 512 * flops::kErf);
  EXPECT_EQ(c.bytes, 4096);
  Attrs tanhForm;
  tanhForm.setInt(attr::Gelu::approximate, 1);
  EXPECT_EQ(costOf(OpKind::kGelu, {x}).flops, 512 * (flops::kErf + 4));
  EXPECT_EQ(costOf(OpKind::kGelu, {x}, tanhForm).flops, 512 * (flops::kTanh + 8));
  // A gather of [2, 7] ids from a [1000, 16] table copies 14 rows of 64 bytes.
  c = costOf(OpKind::kGather,
             {TensorType{DType::kF32, {1000, 16}}, TensorType{DType::kI64, {2, 7}}});
  EXPECT_EQ(c.flops, 0);
  EXPECT_EQ(c.bytes, 2 * 14 * 64 + 14 * 8);
  // Expand writes its output: [1, 8] to [6, 8].
  Attrs to;
  to.shape = Shape{6, 8};
  c = costOf(OpKind::kExpand, {TensorType{DType::kF32, {1, 8}}}, to);
  EXPECT_EQ(c.bytes, 32 + 6 * 32);
  // Every new op's compile cost states its source.
  for (OpKind k :
       {OpKind::kSub, OpKind::kDiv, OpKind::kPow, OpKind::kSqrt, OpKind::kErf, OpKind::kTanh,
        OpKind::kGelu, OpKind::kSoftmax, OpKind::kLayerNorm, OpKind::kReduceSum, OpKind::kWhere,
        OpKind::kExpand, OpKind::kCast, OpKind::kGather, OpKind::kTrilu}) {
    const CompileCostTerms t = compileCostTerms(k);
    EXPECT_GT(t.baseUs, 0) << opKernelName(k);
    EXPECT_GT(t.baseSource.size(), 10u) << opKernelName(k);
  }
}

}  // namespace
}  // namespace gearbox
