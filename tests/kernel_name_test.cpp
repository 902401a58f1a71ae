// Kernel names (compiler/kernel_name.h): every op in graph/ops.def gets sample keys -- static
// and shape-generic, every dtype it takes, i32 and i64 indices, rank-0 inputs, each attribute --
// and every name the compiler gives them must parse back to the key's fields. A new op without
// samples here fails KernelName.EveryOpHasSamples.
#include "compiler/kernel_name.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <limits>
#include <set>

#include "compiler/kernel_spec.h"

namespace gearbox {
namespace {

TensorType t(DType d, Shape s) {
  return TensorType{d, s};
}

std::vector<KernelKey> sampleKeys() {
  const int64_t b = symbolDim("B");
  std::vector<KernelKey> keys;
  auto add = [&](OpKind k, std::vector<TensorType> in, Attrs a = {}) {
    keys.push_back(makeKernelKey(k, in, a));
  };
  for (DType d : {DType::kF32, DType::kI32, DType::kI64}) {
    for (OpKind k : {OpKind::kAdd, OpKind::kMul}) {
      add(k, {t(d, {2, 4}), t(d, {4})});
      add(k, {t(d, {}), t(d, {})});
      add(k, {t(d, {b, 4}), t(d, {kAnyDim, 1})});
    }
    add(OpKind::kMatMul, {t(d, {3, 5}), t(d, {5, 2})});
    add(OpKind::kMatMul, {t(d, {5}), t(d, {5})});
    add(OpKind::kMatMul, {t(d, {b, 3, 5}), t(d, {5})});
    add(OpKind::kRelu, {t(d, {7})});
    add(OpKind::kRelu, {t(d, {})});
    add(OpKind::kTranspose, {t(d, {2, 3, 4})}, Attrs{{}, {}, Shape{0, 2, 1}});
    add(OpKind::kTranspose, {t(d, {b, 3})}, Attrs{{}, {}, Shape{1, 0}});
    add(OpKind::kReshape, {t(d, {4, 16, 7})}, Attrs{{}, Shape{b, 8, -1}, {}});
    add(OpKind::kReshape, {t(d, {b, 16})}, Attrs{{}, Shape{b, -1, 4}, {}});
    add(OpKind::kReshape, {t(d, {1})}, Attrs{{}, Shape{}, {}});
    for (DType ix : {DType::kI32, DType::kI64}) {
      add(OpKind::kIndexSelect, {t(d, {8, 4}), t(ix, {3})}, Attrs{-1});
      add(OpKind::kIndexSelect, {t(d, {b, 16, 49}), t(ix, {16})}, Attrs{1});
      Attrs wrap{0};
      wrap.setInt(attr::IndexSelect::wrap, 1);
      add(OpKind::kIndexSelect, {t(d, {5, 2}), t(ix, {kAnyDim})}, wrap);
      add(OpKind::kCatGather, {t(d, {2, 8}), t(d, {2, 8}), t(ix, {16})}, Attrs{1});
      add(OpKind::kCatGather, {t(d, {b, 8}), t(d, {b, 8}), t(ix, {kAnyDim})}, Attrs{-1});
    }
    add(OpKind::kCat, {t(d, {2, 3}), t(d, {2, 5})}, Attrs{1});
    add(OpKind::kCat, {t(d, {b}), t(d, {1})}, Attrs{0});
  }
  // Typed attributes (f32-only ops): defaults, non-defaults, symbolic batch.
  Attrs conv;
  conv.setInts(attr::Conv2d::strides, {2, 2});
  conv.setInts(attr::Conv2d::pads, {1, 0, 1, 2});
  add(OpKind::kConv2d, {t(DType::kF32, {1, 3, 8, 8}), t(DType::kF32, {4, 3, 3, 3})});
  add(OpKind::kConv2d,
      {t(DType::kF32, {b, 3, 8, 8}), t(DType::kF32, {4, 3, 3, 3}), t(DType::kF32, {4})}, conv);
  Attrs dw;
  dw.setInt(attr::Conv2d::group, 4);
  add(OpKind::kConv2d, {t(DType::kF32, {2, 4, 8, 8}), t(DType::kF32, {4, 1, 3, 3})}, dw);
  Attrs pool;
  pool.setInts(attr::MaxPool2d::kernel, {3, 3});
  add(OpKind::kMaxPool2d, {t(DType::kF32, {b, 3, 8, 8})}, pool);
  pool.setInt(attr::MaxPool2d::ceil_mode, 1);
  add(OpKind::kMaxPool2d, {t(DType::kF32, {1, 3, 8, 8})}, pool);
  Attrs avg;
  avg.setInts(attr::AvgPool2d::kernel, {2, 2});
  avg.setInt(attr::AvgPool2d::count_include_pad, 1);
  add(OpKind::kAvgPool2d, {t(DType::kF32, {1, 3, 8, 8})}, avg);
  Attrs mean;
  mean.setInts(attr::Mean::axes, {2, 3});
  add(OpKind::kMean, {t(DType::kF32, {b, 3, 8, 8})}, mean);
  mean.setInt(attr::Mean::keepdims, 0);
  mean.setInts(attr::Mean::axes, {-1});
  add(OpKind::kMean, {t(DType::kF32, {5, 3})}, mean);
  // Clip, flatten, squeeze, unsqueeze, slice, pad: every dtype; sigmoid, batch_norm: f32.
  for (DType d : {DType::kF32, DType::kI32, DType::kI64}) {
    Attrs clip;
    clip.setFloat(attr::Clip::min, -0.5);
    add(OpKind::kClip, {t(d, {b, 7})}, clip);
    clip.setFloat(attr::Clip::max, 6);
    add(OpKind::kClip, {t(d, {})}, clip);
    add(OpKind::kClip, {t(d, {3})});
    Attrs flatten;
    flatten.setInt(attr::Flatten::axis, -1);
    add(OpKind::kFlatten, {t(d, {b, 3, 4})}, flatten);
    add(OpKind::kFlatten, {t(d, {2, 3})});
    Attrs squeeze;
    squeeze.setInts(attr::Squeeze::axes, {0, -1});
    add(OpKind::kSqueeze, {t(d, {1, b, 1})}, squeeze);
    Attrs unsqueeze;
    unsqueeze.setInts(attr::Unsqueeze::axes, {-1});
    add(OpKind::kUnsqueeze, {t(d, {})}, unsqueeze);
    Attrs slice;
    slice.setInts(attr::Slice::starts, {-1, 0});
    slice.setInts(attr::Slice::ends, {std::numeric_limits<int64_t>::min(), 2});
    add(OpKind::kSlice, {t(d, {5, 4})}, slice);
    slice.setInts(attr::Slice::axes, {1, -2});
    slice.setInts(attr::Slice::steps, {-1, 2});
    add(OpKind::kSlice, {t(d, {b, 4})}, slice);
    Attrs pad;
    pad.setInts(attr::Pad::pads, {1, -1, 0, 2});
    add(OpKind::kPad, {t(d, {b, 4})}, pad);
    pad.setFloat(attr::Pad::value, 1.5);
    add(OpKind::kPad, {t(d, {3, 4})}, pad);
  }
  add(OpKind::kSigmoid, {t(DType::kF32, {b, 3})});
  add(OpKind::kSigmoid, {t(DType::kF32, {})});
  Attrs bn;
  bn.setFloat(attr::BatchNorm::epsilon, 1e-3);
  const TensorType c3 = t(DType::kF32, {3});
  add(OpKind::kBatchNorm, {t(DType::kF32, {b, 3, 8, 8}), c3, c3, c3, c3}, bn);
  add(OpKind::kBatchNorm, {t(DType::kF32, {2, 3}), c3, c3, c3, c3});
  // Transformer ops: sub over every dtype; the f32-only ones; where's condition dtypes; cast's
  // targets; gather's N-D indices; trilu's attributes.
  const int64_t s = symbolDim("S");
  for (DType d : {DType::kF32, DType::kI32, DType::kI64}) {
    add(OpKind::kSub, {t(d, {2, 4}), t(d, {4})});
    add(OpKind::kSub, {t(d, {b, s, 4}), t(d, {kAnyDim, 1, 1})});
    add(OpKind::kWhere, {t(d, {1, s}), t(DType::kF32, {b, s}), t(DType::kF32, {})});
    add(OpKind::kWhere, {t(DType::kI32, {3}), t(d, {3}), t(d, {3})});
    Attrs expand;
    expand.shape = Shape{3, 4};
    add(OpKind::kExpand, {t(d, {4})}, expand);
    expand.shape = Shape{b, 4, s, s};
    add(OpKind::kExpand, {t(d, {1, 1, 1, 1})}, expand);
    for (int64_t to : {1, 6, 7}) {
      Attrs cast;
      cast.setInt(attr::Cast::to, to);
      add(OpKind::kCast, {t(d, {b, s})}, cast);
    }
    for (DType ix : {DType::kI32, DType::kI64}) {
      add(OpKind::kGather, {t(d, {1000, 128}), t(ix, {b, s})});
      Attrs gather;
      gather.setInt(attr::Gather::axis, -1);
      add(OpKind::kGather, {t(d, {4, 5}), t(ix, {})}, gather);
    }
    Attrs trilu;
    add(OpKind::kTrilu, {t(d, {s, s})}, trilu);
    trilu.setInt(attr::Trilu::upper, 0);
    trilu.setInt(attr::Trilu::k, -1);
    add(OpKind::kTrilu, {t(d, {2, 4, 4})}, trilu);
  }
  const TensorType f = t(DType::kF32, {b, s, 128});
  for (OpKind k : {OpKind::kDiv, OpKind::kPow}) {
    add(k, {f, t(DType::kF32, {})});
    add(k, {t(DType::kF32, {3}), t(DType::kF32, {2, 3})});
  }
  for (OpKind k : {OpKind::kSqrt, OpKind::kErf, OpKind::kTanh, OpKind::kGelu}) {
    add(k, {f});
    add(k, {t(DType::kF32, {})});
  }
  Attrs gelu;
  gelu.setInt(attr::Gelu::approximate, 1);
  add(OpKind::kGelu, {t(DType::kF32, {7})}, gelu);
  add(OpKind::kSoftmax, {t(DType::kF32, {b, 4, s, s})});
  Attrs softmax;
  softmax.setInt(attr::Softmax::axis, 0);
  add(OpKind::kSoftmax, {t(DType::kF32, {3, 5})}, softmax);
  const TensorType row = t(DType::kF32, {128});
  add(OpKind::kLayerNorm, {f, row, row});
  Attrs ln;
  ln.setInt(attr::LayerNorm::axis, 1);
  ln.setFloat(attr::LayerNorm::epsilon, 1e-12);
  add(OpKind::kLayerNorm, {t(DType::kF32, {2, 3, 4}), t(DType::kF32, {3, 4})}, ln);
  add(OpKind::kLayerNorm, {t(DType::kF32, {5, 6})});
  Attrs sum;
  sum.setInts(attr::ReduceSum::axes, {-1});
  add(OpKind::kReduceSum, {f}, sum);
  sum.setInt(attr::ReduceSum::keepdims, 0);
  sum.setInts(attr::ReduceSum::axes, {0, 2});
  add(OpKind::kReduceSum, {t(DType::kF32, {2, 3, 4})}, sum);
  // Attention: symbolic batch and lengths, with and without a mask, a scale that prints long.
  Attrs att;
  att.setFloat(attr::Attention::scale, 0.35355339059327373);
  const TensorType qkv = t(DType::kF32, {b, 4, s, 8});
  add(OpKind::kAttention, {qkv, qkv, qkv}, att);
  add(OpKind::kAttention, {qkv, qkv, qkv, t(DType::kF32, {s, s})}, att);
  att.setFloat(attr::Attention::scale, 1);
  add(OpKind::kAttention, {t(DType::kF32, {1, 8}), t(DType::kF32, {3, 8}), t(DType::kF32, {3, 2})},
      att);
  return keys;
}

TEST(KernelName, EveryOpHasSamples) {
  std::set<OpKind> seen;
  for (const KernelKey& k : sampleKeys()) seen.insert(k.kind);
  for (int i = 0; i < kOpCount; ++i) {
    const auto k = static_cast<OpKind>(i);
    if (k == OpKind::kConst) continue;  // data, not a kernel: never named
    EXPECT_TRUE(seen.count(k)) << opKernelName(k) << " has no sample kernel names";
  }
}

TEST(KernelName, EveryNameParsesBackToItsKey) {
  std::set<std::string> names;
  for (const KernelKey& key : sampleKeys()) {
    const std::string name = key.name();
    EXPECT_TRUE(names.insert(name).second) << "two keys share the name " << name;
    const std::optional<ParsedKernelName> p = parseKernelName(name);
    ASSERT_TRUE(p) << name;
    EXPECT_EQ(p->op, opKernelName(key.kind)) << name;
    EXPECT_EQ(p->dtype, dtypeKernelName(key.dtype)) << name;
    EXPECT_EQ(p->format, key.format) << name;
    ASSERT_EQ(p->inputs.size(), key.inputs.size()) << name;
    for (size_t i = 0; i < key.inputs.size(); ++i) {
      const Shape& s = key.inputs[i].shape;
      ASSERT_EQ(p->inputs[i].size(), static_cast<size_t>(s.rank())) << name;
      for (int d = 0; d < s.rank(); ++d)
        EXPECT_EQ(p->inputs[i][d], s[d] >= 0 ? s[d] : -1) << name << " input " << i << " dim " << d;
      const std::string dtype =
          key.inputs[i].dtype == key.dtype ? "" : std::string(dtypeKernelName(key.inputs[i].dtype));
      EXPECT_EQ(p->inputDtypes[i], dtype) << name << " input " << i;
    }
    EXPECT_EQ(p->dim, key.attrs.dim) << name;
    auto dims = [](const std::optional<Shape>& s) -> std::optional<std::vector<int64_t>> {
      if (!s) return std::nullopt;
      return std::vector<int64_t>(s->begin(), s->end());
    };
    // Reshape keys hold sizes, -1 and kCopyInputDim only (finishKey resolved the names).
    EXPECT_EQ(p->shape, dims(key.attrs.shape)) << name;
    EXPECT_EQ(p->perm, dims(key.attrs.perm)) << name;
    // Typed attributes: exactly those that differ from their defaults, in declaration order.
    std::vector<std::pair<std::string, std::string>> typed;
    const auto decls = opAttrDecls(key.kind);
    for (size_t i = 0; i < decls.size(); ++i) {
      const int slot = static_cast<int>(i);
      if (!key.attrs.has(slot) || attrIsDefault(key.kind, key.attrs, slot)) continue;
      std::string v = decls[i].type == AttrType::kFloat
                          ? formatAttrFloat(key.attrs.f(slot))
                          : fmt::format("{}", fmt::join(key.attrs.ints(slot), "_"));
      typed.emplace_back(std::string(decls[i].name), v);
    }
    EXPECT_EQ(p->attrs, typed) << name;
  }
}

TEST(KernelName, TypedAttributes) {
  Attrs a;
  a.setInts(attr::Conv2d::strides, {2, 2});
  a.setInts(attr::Conv2d::pads, {1, 1, 1, 1});
  const KernelKey k = makeKernelKey(
      OpKind::kConv2d, {t(DType::kF32, {1, 3, 8, 8}), t(DType::kF32, {4, 3, 3, 3})}, a);
  // Defaults (dilations, group) are filled in the key and left out of the name.
  EXPECT_EQ(k.name(), "Conv2d_float_ND_1_3_8_8__4_3_3_3__strides=2_2__pads=1_1_1_1");
  EXPECT_TRUE(k.attrs.has(attr::Conv2d::group));
  EXPECT_EQ(k.attrs.i(attr::Conv2d::group), 1);
  // A key that spells a default out is the same key.
  a.setInt(attr::Conv2d::group, 1);
  EXPECT_EQ(makeKernelKey(OpKind::kConv2d,
                          {t(DType::kF32, {1, 3, 8, 8}), t(DType::kF32, {4, 3, 3, 3})}, a),
            k);
}

TEST(KernelName, IndexDTypeTokenAndAttributes) {
  const KernelKey k = makeKernelKey(OpKind::kIndexSelect,
                                    {t(DType::kF32, {4, 16, 49}), t(DType::kI64, {8})}, Attrs{1});
  EXPECT_EQ(k.name(), "IndexSelect_float_ND_4_16_49__8_int64__dim1");
  const KernelKey r = makeKernelKey(OpKind::kReshape, {t(DType::kF32, {4, 16, 49})},
                                    Attrs{{}, Shape{symbolDim("N"), 2, 8, 49}, {}});
  // The named dim became the input's size in the key.
  EXPECT_EQ(r.name(), "Reshape_float_ND_4_16_49__shape4_2_8_49");
  const KernelKey g = makeKernelKey(OpKind::kReshape, {t(DType::kF32, {symbolDim("N"), 16})},
                                    Attrs{{}, Shape{symbolDim("N"), -1}, {}});
  EXPECT_EQ(g.name(), "Reshape_float_ND_-1_16__shape-2_-1");
  EXPECT_EQ(makeKernelKey(OpKind::kTranspose, {t(DType::kI64, {2, 3})}, Attrs{{}, {}, Shape{1, 0}})
                .name(),
            "Transpose_int64_ND_2_3__perm1_0");
}

TEST(KernelName, ForeignNamesDoNotParse) {
  for (const char* bad : {"", "Add", "Add_float", "Add_float_ND", "Add_float_ND_01",
                          "Add_float_ND_2__dim-1", "Transpose_float_ND_2__perm", "Add_float_ND_x",
                          "Reshape_float_ND_4__shape-3", "Add_float_ND_2_int64_int64"})
    EXPECT_FALSE(parseKernelName(bad)) << bad;
}

}  // namespace
}  // namespace gearbox
