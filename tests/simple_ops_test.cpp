// Clip, sigmoid, flatten, squeeze, unsqueeze, slice, pad and batch_norm beyond the kernel
// differential tests (kernels_test.cpp): the IR text round trip, shape inference on symbolic
// dims, the errors that name op, input, dim and attribute, NaN through clip, and each op's
// padding rule (gears/padding.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "compiler/kernel_spec.h"
#include "compiler/kernel_store.h"
#include "executor/kernels.h"
#include "expect_error.h"
#include "gears/padding.h"
#include "graph/text.h"

namespace gearbox {
namespace {

using testing_util::errorOf;

Graph graphOf(const std::string& input, const std::string& body) {
  return parseGraph("graph g(" + input + ") {\n" + body + "\n}\n", "m.gbx");
}

// The inferred type of %y in `%y = <stmt>` over input %x.
std::string typeOf(const std::string& input, const std::string& stmt) {
  const Graph g = graphOf("%x: " + input, "  %y = " + stmt + "\n  return %y");
  return g.value(g.outputs[0]).type.toString();
}

std::string shapeError(const std::string& input, const std::string& stmt) {
  return errorOf([&] { typeOf(input, stmt); }, ErrorKind::kShape);
}

TEST(SimpleOps, TextRoundTripLeavesDefaultsOut) {
  const std::string text =
      "graph g(%x: f32[B, 3, 4, 5]) {\n"
      "  %c = clip(%x, min=-0.5)\n"
      "  %d = clip(%c)\n"
      "  %s = sigmoid(%d)\n"
      "  %p = pad(%s, pads=[0, 0, 1, -1, 0, 0, 2, 1], value=1.5)\n"
      "  %l = slice(%p, starts=[-1, 1], ends=[-9223372036854775808, 6], axes=[2, 3], "
      "steps=[-2, 2])\n"
      "  %u = unsqueeze(%l, axes=[1])\n"
      "  %q = squeeze(%u, axes=[1])\n"
      "  %f = flatten(%q)\n"
      "  %g = flatten(%q, axis=-1)\n"
      "  return %f, %g\n"
      "}\n";
  const Graph g = parseGraph(text, "m.gbx");
  EXPECT_EQ(printGraph(g), text);
  EXPECT_EQ(g.value(g.outputs[0]).type.toString(), "f32[B, 24]");
  EXPECT_EQ(g.value(g.outputs[1]).type.toString(), "f32[-1, 2]");
}

TEST(SimpleOps, SymbolicShapes) {
  // Flatten: a lone symbol times static 1s stays the symbol; 0 wins; else unknown.
  EXPECT_EQ(typeOf("f32[B, 1, 3]", "flatten(%x, axis=2)"), "f32[B, 3]");
  EXPECT_EQ(typeOf("f32[B, 3]", "flatten(%x, axis=0)"), "f32[1, -1]");
  EXPECT_EQ(typeOf("f32[B, 0, C]", "flatten(%x, axis=1)"), "f32[B, 0]");
  EXPECT_EQ(typeOf("f32[]", "flatten(%x, axis=0)"), "f32[1, 1]");
  EXPECT_EQ(typeOf("f32[2, 3, 4]", "flatten(%x, axis=3)"), "f32[24, 1]");
  // Slice: the whole dim keeps its symbol, any other range is unknown until specialised.
  EXPECT_EQ(typeOf("f32[B, 8]", "slice(%x, starts=[0, 2], ends=[9223372036854775807, -1])"),
            "f32[B, 5]");
  EXPECT_EQ(typeOf("f32[B, 8]", "slice(%x, starts=[1], ends=[9223372036854775807])"), "f32[-1, 8]");
  EXPECT_EQ(typeOf("f32[B, 8]", "slice(%x, starts=[-1], ends=[-9223372036854775808], steps=[-1])"),
            "f32[B, 8]");
  EXPECT_EQ(typeOf("f32[10]", "slice(%x, starts=[8], ends=[1], steps=[-3])"), "f32[3]");
  // Pad: zero pads keep a symbol; others make it unknown; a crop shrinks a static dim.
  EXPECT_EQ(typeOf("f32[B, 8]", "pad(%x, pads=[0, -2, 0, 3])"), "f32[B, 9]");
  EXPECT_EQ(typeOf("f32[B, 8]", "pad(%x, pads=[1, 0, 0, 0])"), "f32[-1, 8]");
  // Squeeze accepts a symbol (checked once concrete); unsqueeze counts axes in the output.
  EXPECT_EQ(typeOf("f32[B, 1, C]", "squeeze(%x, axes=[-2, 0])"), "f32[C]");
  EXPECT_EQ(typeOf("f32[B, C]", "unsqueeze(%x, axes=[-1, 1])"), "f32[B, 1, C, 1]");
  EXPECT_EQ(typeOf("i32[B, 3]", "clip(%x, min=1, max=2)"), "i32[B, 3]");
}

TEST(SimpleOps, ErrorsNameOpInputDimAndAttribute) {
  EXPECT_EQ(shapeError("f32[1, 3, 1]", "squeeze(%x, axes=[0, 1])"),
            "m.gbx:2: op %y = squeeze: attribute axes: input 0 (%x) dim 1 has size 3, and only a "
            "dim of size 1 can be squeezed");
  EXPECT_EQ(shapeError("f32[2, 3]", "flatten(%x, axis=3)"),
            "m.gbx:2: op %y = flatten: attribute axis: axis 3 is out of range for input 0 (%x) of "
            "rank 2 (expected [-2, 2])");
  EXPECT_EQ(shapeError("f32[2, 3]", "squeeze(%x, axes=[2])"),
            "m.gbx:2: op %y = squeeze: attribute axes: axis 2 is out of range for input 0 (%x) of "
            "rank 2 (expected [-2, 1])");
  EXPECT_EQ(shapeError("f32[2, 3]", "unsqueeze(%x, axes=[1, -3])"),
            "m.gbx:2: op %y = unsqueeze: attribute axes names axis 1 twice");
  EXPECT_EQ(shapeError("f32[2, 3]", "slice(%x, starts=[0], ends=[1], steps=[0])"),
            "m.gbx:2: op %y = slice: attribute steps: step 0 is not allowed (non-zero, > "
            "INT64_MIN)");
  EXPECT_EQ(shapeError("f32[2, 3]", "slice(%x, starts=[0, 1], ends=[1])"),
            "m.gbx:2: op %y = slice: attribute ends has 1 entries but starts has 2");
  EXPECT_EQ(shapeError("f32[2, 3]", "slice(%x, starts=[0, 0, 0], ends=[1, 1, 1])"),
            "m.gbx:2: op %y = slice: attribute starts has 3 entries but input 0 (%x) has rank 2 "
            "(and no axes)");
  EXPECT_EQ(shapeError("f32[2, 3]", "pad(%x, pads=[1, 1])"),
            "m.gbx:2: op %y = pad: attribute pads has 2 entries but input 0 (%x) has rank 2 "
            "(expected 4: begins, then ends)");
  EXPECT_EQ(shapeError("f32[2, 3]", "pad(%x, pads=[0, -2, 0, -2])"),
            "m.gbx:2: op %y = pad: attribute pads: input 0 (%x) dim 1 of size 3 with pads -2 "
            "(begin) and -2 (end) would have size -1");
  EXPECT_EQ(shapeError("i32[2, 3]", "sigmoid(%x)"),
            "m.gbx:2: op %y = sigmoid: input 0 (%x) is i32; sigmoid takes f32");
  const std::string bn = errorOf(
      [&] {
        graphOf("%x: f32[2, 3, 4], %s: f32[4], %b: f32[3], %m: f32[3], %v: f32[3]",
                "  %y = batch_norm(%x, %s, %b, %m, %v)\n  return %y");
      },
      ErrorKind::kShape);
  EXPECT_EQ(bn,
            "m.gbx:2: op %y = batch_norm: input 0 (%x) dim 1 is 3 but input 1 (%s) dim 0 is 4 "
            "(one value per channel)");
}

TEST(SimpleOps, ClipKeepsNaNAndRoundsIntegerBoundsInward) {
  Tensor x(DType::kF32, {4});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  x.as<float>()[0] = nan;
  x.as<float>()[1] = -3;
  x.as<float>()[2] = 0.25f;
  x.as<float>()[3] = 9;
  Attrs a;
  a.setFloat(attr::Clip::min, -1);
  a.setFloat(attr::Clip::max, 1);
  auto spec = compileKernelSpec(makeKernelKey(OpKind::kClip, {{DType::kF32, {4}}}, a));
  Tensor got(DType::kF32, {4}), ref(DType::kF32, {4});
  const TensorView xv[] = {x.view()};
  kernels::runViews(*spec, xv, got.view());
  kernels::ref::runOp(OpKind::kClip, spec->key.attrs, xv, ref.view());
  for (const Tensor* t : {&got, &ref}) {
    EXPECT_TRUE(std::isnan(t->as<float>()[0]));
    EXPECT_EQ(t->as<float>()[1], -1);
    EXPECT_EQ(t->as<float>()[2], 0.25f);
    EXPECT_EQ(t->as<float>()[3], 1);
  }
  Tensor xi(DType::kI64, {3});
  xi.as<int64_t>()[0] = -5;
  xi.as<int64_t>()[1] = 2;
  xi.as<int64_t>()[2] = 7;
  a.setFloat(attr::Clip::min, -1.5);   // -1 for integers
  a.setFloat(attr::Clip::max, 1e300);  // beyond int64: no upper bound
  auto ispec = compileKernelSpec(makeKernelKey(OpKind::kClip, {{DType::kI64, {3}}}, a));
  Tensor igot(DType::kI64, {3});
  const TensorView xiv[] = {xi.view()};
  kernels::runViews(*ispec, xiv, igot.view());
  EXPECT_EQ(igot.as<int64_t>()[0], -1);
  EXPECT_EQ(igot.as<int64_t>()[1], 2);
  EXPECT_EQ(igot.as<int64_t>()[2], 7);
}

// The padding rules: input 0's dim 0 (or the named dim) padded, plus `more`, then the op under
// test.
std::string padRefusal(const std::string& input, const std::string& body, int dim = 0,
                       std::vector<InputDim> more = {}) {
  const Graph g = graphOf(input, body);
  more.insert(more.begin(), InputDim{0, dim});
  return errorOf([&] { analyzePadding(g, more); }, ErrorKind::kGear);
}

PaddingPlan padPlan(const std::string& input, const std::string& body, int dim = 0,
                    std::vector<InputDim> more = {}) {
  const Graph g = graphOf(input, body);
  more.insert(more.begin(), InputDim{0, dim});
  return analyzePadding(g, more);
}

TEST(SimpleOps, PaddingRules) {
  // Elementwise ops keep the padded dim; flatten keeps it when its group is otherwise 1s.
  for (const char* stmt :
       {"clip(%x, min=-1, max=1)", "sigmoid(%x)", "flatten(%x, axis=1)", "unsqueeze(%x, axes=[0])",
        "squeeze(%x, axes=[1])", "slice(%x, starts=[0, 0], ends=[9223372036854775807, 1])",
        "pad(%x, pads=[0, 1, 0, 0], value=2)"}) {
    const PaddingPlan p = padPlan("%x: f32[B, 1]", "  %y = " + std::string(stmt) + "\n  return %y");
    ASSERT_EQ(p.outputs[0].size(), 1u) << stmt;
    EXPECT_EQ(p.outputs[0][0].origin, (InputDim{0, 0})) << stmt;
  }
  EXPECT_EQ(
      padPlan("%x: f32[B, 3]", "  %y = unsqueeze(%x, axes=[0])\n  return %y").outputs[0][0].dim, 1);
  // Zero padding: clip around 0 keeps it, sigmoid does not; a matmul contracting it against
  // the other side's non-zero padding (sigmoid(0) = 0.5) tells. One zero side is enough.
  const std::string in2 = "%x: f32[3, K], %v: f32[K, 2]";
  const std::string mm = "  %u = sigmoid(%v)\n  %m = matmul(%t, %u)\n  return %m";
  padPlan(in2, "  %t = clip(%x, min=-1, max=1)\n" + mm, 1, {{1, 0}});
  padPlan(in2, "  %t = sigmoid(%x)\n  %u = clip(%v)\n  %m = matmul(%t, %u)\n  return %m", 1,
          {{1, 0}});
  EXPECT_EQ(padRefusal(in2, "  %t = sigmoid(%x)\n" + mm, 1, {{1, 0}}),
            "m.gbx:4: op %m = matmul: cannot pad input 'x' dim 1: the contraction dim K is padded "
            "in both inputs but neither's padding is zero against a finite other (input 0 (%t) "
            "holds the constant 0.5, input 1 (%u) holds the constant 0.5: a broadcast add or an "
            "index wrote into it), so it would add to the real sums");
  EXPECT_NE(padRefusal(in2, "  %t = clip(%x, min=0.5)\n" + mm, 1, {{1, 0}})
                .find("input 0 (%t) holds the constant 0.5"),
            std::string::npos);
  // Refusals name the op, the input and the dim.
  EXPECT_EQ(padRefusal("%x: f32[B, 3]", "  %y = flatten(%x, axis=2)\n  return %y"),
            "m.gbx:2: op %y = flatten: cannot pad input 'x' dim 0: input 0 (%x) dim 0 is padded, "
            "and flatten (axis 2) merges it with dim 1 (size 3), so padded elements would mix with "
            "real ones");
  EXPECT_NE(padRefusal("%x: f32[B, 3]",
                       "  %y = slice(%x, starts=[1], ends=[9223372036854775807])"
                       "\n  return %y")
                .find("slice takes [1, 9223372036854775807) step 1"),
            std::string::npos);
  EXPECT_NE(padRefusal("%x: f32[B, 3]", "  %y = pad(%x, pads=[1, 0, 0, 0])\n  return %y")
                .find("pad changes it by 1 (begin) and 0 (end)"),
            std::string::npos);
  const std::string bn =
      "  %s = const f32[3] [1, 1, 1]\n  %y = batch_norm(%x, %s, %s, %s, %s)\n  return %y";
  padPlan("%x: f32[B, 3, 4]", bn);
  EXPECT_NE(padRefusal("%x: f32[2, C, 4]",
                       "  %s = const f32[3] [1, 1, 1]\n"
                       "  %y = batch_norm(%x, %s, %s, %s, %s)\n  return %y",
                       1)
                .find("dim 1 (the channels) is padded"),
            std::string::npos);
}

// kernel_meta: every new op's descriptor reads back to the compiled spec, and params that do not
// follow from the key are refused even under a correct hash.
std::vector<KernelKey> descriptorKeys() {
  const TensorType x{DType::kF32, {2, 3, 4, 5}};
  std::vector<KernelKey> keys;
  // Defaults filled as GraphBuilder fills them, so the compiled key states every attribute.
  auto makeKernelKey = [](OpKind k, const std::vector<TensorType>& in, Attrs a) {
    normalizeAttrs(k, a, "test");
    return gearbox::makeKernelKey(k, in, a);
  };
  Attrs clip;
  clip.setFloat(attr::Clip::min, -0.5);
  keys.push_back(makeKernelKey(OpKind::kClip, {x}, clip));
  keys.push_back(makeKernelKey(OpKind::kSigmoid, {x}, {}));
  keys.push_back(makeKernelKey(OpKind::kFlatten, {x}, {}));
  Attrs axes;
  axes.setInts(attr::Unsqueeze::axes, {0});
  keys.push_back(makeKernelKey(OpKind::kUnsqueeze, {x}, axes));
  keys.push_back(makeKernelKey(OpKind::kSqueeze, {{DType::kI64, {1, 3}}}, axes));
  Attrs slice;
  slice.setInts(attr::Slice::starts, {-1, 1});
  slice.setInts(attr::Slice::ends, {std::numeric_limits<int64_t>::min(), 4});
  slice.setInts(attr::Slice::axes, {3, 1});
  slice.setInts(attr::Slice::steps, {-2, 1});
  keys.push_back(makeKernelKey(OpKind::kSlice, {x}, slice));
  Attrs pad;
  pad.setInts(attr::Pad::pads, {0, 0, 1, -1, 0, 0, 2, 1});
  pad.setFloat(attr::Pad::value, 1.5);
  keys.push_back(makeKernelKey(OpKind::kPad, {x}, pad));
  const TensorType c{DType::kF32, {3}};
  keys.push_back(makeKernelKey(OpKind::kBatchNorm, {x, c, c, c, c}, {}));
  return keys;
}

TEST(SimpleOps, DescriptorsRoundTrip) {
  for (const KernelKey& key : descriptorKeys()) {
    const auto spec = compileKernelSpec(key);
    const KernelDescriptor d = parseKernelDescriptor(serializeKernelDescriptor(*spec, "t"));
    EXPECT_TRUE(d.spec->key == spec->key) << spec->name;
    EXPECT_EQ(d.spec->name, spec->name);
    EXPECT_EQ(d.spec->tasks, spec->tasks);
    EXPECT_EQ(d.spec->work, spec->work);
    ASSERT_EQ(d.spec->params.index(), spec->params.index()) << spec->name;
    std::visit(
        [&](const auto& p) {
          using P = std::decay_t<decltype(p)>;
          if constexpr (std::is_same_v<P, ElementwiseParams>) {
            EXPECT_EQ(p.numel, std::get<P>(d.spec->params).numel) << spec->name;
          } else if constexpr (std::is_same_v<P, SliceParams> || std::is_same_v<P, PadParams> ||
                               std::is_same_v<P, BatchNormParams>) {
            EXPECT_TRUE(p == std::get<P>(d.spec->params)) << spec->name;
          } else {
            ADD_FAILURE() << spec->name << ": unexpected params kind";
          }
        },
        spec->params);
  }
}

TEST(SimpleOps, ParamsThatDoNotFollowFromTheKeyAreRefused) {
  const std::vector<KernelKey> keys = descriptorKeys();
  auto damaged = [](const KernelKey& key, const char* field, int index, int64_t value) {
    const auto spec = compileKernelSpec(key);
    nlohmann::ordered_json j = kernelDescriptorJson(*spec, "t");
    j.erase("hash");
    auto& f = j["kernel"]["params"][field];
    if (index < 0) {
      f = value;
    } else {
      f[index] = value;
    }
    j["hash"] = fnv1a64Hex(j.dump());
    return errorOf([&] { parseKernelDescriptor(j); }, ErrorKind::kIo);
  };
  EXPECT_EQ(damaged(keys[5], "offset", -1, 1000),
            "Slice params do not fit the key: offset, dims or strides differ from the ones the key "
            "gives");
  EXPECT_NE(damaged(keys[5], "in_strides", 0, 7).find("Slice params do not fit the key"),
            std::string::npos);
  EXPECT_EQ(damaged(keys[6], "begins", 0, -40),
            "Pad params do not fit the key: dims or begins differ from the ones the key gives");
  EXPECT_EQ(damaged(keys[7], "inner", -1, 21),
            "BatchNormalization params do not fit the key: outer, channels or inner differ from "
            "the key's shapes");
  EXPECT_NE(damaged(keys[2], "numel", -1, 121).find("Flatten params do not fit the key"),
            std::string::npos);
}

}  // namespace
}  // namespace gearbox
