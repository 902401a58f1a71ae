#include "gears/padding.h"

#include <fmt/format.h>

#include <array>
#include <limits>
#include <optional>

#include "gears/gear_set.h"
#include "graph/error.h"

// Every op needs its padding rule here: a new op without a case is a build error, not a silent
// "padding passes through" (docs/adding-an-op.md).
#pragma GCC diagnostic error "-Wswitch"

namespace gearbox {
namespace {

// What is known about one dim of one value: padded or not, from which input dim, and whether
// the padded positions still hold the zeros the pad wrote.
struct Tag {
  bool padded = false;
  InputDim origin;
  bool zero = true;
};
using Tags = std::array<Tag, kMaxRank>;

class Analyzer {
 public:
  explicit Analyzer(const Graph& g) : g_(g), tags_(g.values.size()) {}

  PaddingPlan run(std::span<const InputDim> padded) {
    for (const InputDim& p : padded) {
      if (p.input < 0 || p.input >= static_cast<int>(g_.inputs.size()))
        fail(ErrorKind::kGear, "graph {} has no input {} to pad", g_.name, p.input);
      const Value& v = g_.value(g_.inputs[p.input]);
      if (p.dim < 0 || p.dim >= v.type.shape.rank())
        fail(ErrorKind::kGear, "cannot pad input '{}' dim {}: it has rank {}", v.name, p.dim,
             v.type.shape.rank());
      tags_[g_.inputs[p.input]][p.dim] = Tag{true, p, true};
    }
    for (NodeId n = 0; n < static_cast<NodeId>(g_.nodes.size()); ++n) visit(n);
    PaddingPlan plan;
    for (ValueId out : g_.outputs) {
      std::vector<PaddedOutputDim> dims;
      for (int d = 0; d < rank(out); ++d)
        if (tags_[out][d].padded) dims.push_back(PaddedOutputDim{d, tags_[out][d].origin});
      plan.outputs.push_back(std::move(dims));
    }
    plan.sameRealSize = std::move(same_);
    return plan;
  }

 private:
  int rank(ValueId v) const { return g_.value(v).type.shape.rank(); }
  const Shape& shape(ValueId v) const { return g_.value(v).type.shape; }
  std::string label(const Node& n, size_t i) const {
    return fmt::format("input {} (%{})", i, g_.value(n.inputs[i]).name);
  }

  [[noreturn]] void refuse(NodeId n, const Tag& t, const std::string& why) const {
    fail(ErrorKind::kGear, "{}: cannot pad input '{}' dim {}: {}", g_.describeNode(n),
         g_.value(g_.inputs[t.origin.input]).name, t.origin.dim, why);
  }

  void tie(const Tag& a, const Tag& b) {
    if (a.origin == b.origin) return;
    for (const auto& [x, y] : same_)
      if ((x == a.origin && y == b.origin) || (x == b.origin && y == a.origin)) return;
    same_.emplace_back(a.origin, b.origin);
  }

  // NumPy broadcasting of two padded-dim rows, right-aligned (add, and matmul batch dims).
  // `productZero`: matmul keeps a padded batch slice zero when either operand's is zero;
  // add keeps it zero only when both are.
  void broadcast(NodeId n, size_t ia, const Tags& ta, int ra, const Shape& sa, size_t ib,
                 const Tags& tb, int rb, const Shape& sb, bool productZero, Tags& out) {
    const Node& node = g_.node(n);
    const int r = std::max(ra, rb);
    for (int i = 0; i < r; ++i) {
      const int ka = i - (r - ra), kb = i - (r - rb);
      const Tag a = ka >= 0 ? ta[ka] : Tag{};
      const Tag b = kb >= 0 ? tb[kb] : Tag{};
      if (a.padded && b.padded) {
        tie(a, b);
        out[i] = Tag{true, a.origin, productZero ? (a.zero || b.zero) : (a.zero && b.zero)};
        continue;
      }
      if (!a.padded && !b.padded) continue;
      // One side padded: fine only when the other side broadcasts (size 1 or no such dim).
      const bool aPadded = a.padded;
      const Tag& p = aPadded ? a : b;
      const int kOther = aPadded ? kb : ka;
      const int64_t sizeOther = kOther < 0 ? 1 : (aPadded ? sb[kOther] : sa[kOther]);
      if (kOther >= 0 && sizeOther != 1) {
        const size_t iPad = aPadded ? ia : ib, iOther = aPadded ? ib : ia;
        const int kPad = aPadded ? ka : kb;
        refuse(n, p,
               fmt::format("{} dim {} is padded but it meets {} dim {} (size {}), which is not; "
                           "padded positions would combine with real ones",
                           label(node, iPad), kPad, label(node, iOther), kOther,
                           dimToString(sizeOther)));
      }
      // The broadcast operand's values land on the padded positions, so they are not zero
      // any more for add; for a matmul batch slice a zero operand still gives zero.
      out[i] = Tag{true, p.origin, productZero && p.zero};
    }
  }

  void visitAdd(NodeId n, const Node& node, Tags& out) {
    const ValueId a = node.inputs[0], b = node.inputs[1];
    broadcast(n, 0, tags_[a], rank(a), shape(a), 1, tags_[b], rank(b), shape(b), false, out);
  }

  void visitMatMul(NodeId n, const Node& node, Tags& out) {
    const ValueId a = node.inputs[0], b = node.inputs[1];
    // torch.matmul's 1-D operands: [K] is the matrix [1, K] (left) or [K, 1] (right), whose
    // added dim is unpadded and dropped from the output again below.
    const bool aVec = rank(a) == 1, bVec = rank(b) == 1;
    const int ra = aVec ? 2 : rank(a), rb = bVec ? 2 : rank(b);
    Tags ta = tags_[a], tb = tags_[b];
    Shape sa = shape(a), sb = shape(b);
    if (aVec) {
      ta = Tags{Tag{}, tags_[a][0]};
      sa = Shape{1, shape(a)[0]};
    }
    if (bVec) {
      tb = Tags{tags_[b][0], Tag{}};
      sb = Shape{shape(b)[0], 1};
    }
    const Tag& ka = ta[ra - 1];
    const Tag& kb = tb[rb - 2];
    if (ka.padded != kb.padded) {
      const Tag& p = ka.padded ? ka : kb;
      refuse(n, p,
             fmt::format("the contraction dim K is padded in {} but not in {}; padded K would be "
                         "multiplied by real values",
                         ka.padded ? label(node, 0) : label(node, 1),
                         ka.padded ? label(node, 1) : label(node, 0)));
    }
    if (ka.padded) {
      if (!ka.zero || !kb.zero)
        refuse(n, ka.zero ? kb : ka,
               fmt::format("the contraction dim K is padded in both inputs but the padding of {} "
                           "is no longer zero (a broadcast add or an index wrote into it), so it "
                           "would add to the real sums",
                           !ka.zero ? label(node, 0) : label(node, 1)));
      tie(ka, kb);  // K is contracted away: the output is not padded there
    }
    Shape batchA(sa.begin(), sa.end() - 2);
    Shape batchB(sb.begin(), sb.end() - 2);
    Tags tba{}, tbb{};
    std::copy(ta.begin(), ta.begin() + (ra - 2), tba.begin());
    std::copy(tb.begin(), tb.begin() + (rb - 2), tbb.begin());
    broadcast(n, 0, tba, ra - 2, batchA, 1, tbb, rb - 2, batchB, true, out);
    const int r = std::max(ra, rb);
    out[r - 2] = ta[ra - 2];  // M: zero rows of a give zero rows of the product
    out[r - 1] = tb[rb - 1];  // N: zero columns of b give zero columns
    if (bVec) out[r - 1] = Tag{};
    if (aVec) {
      out[r - 2] = out[r - 1];
      out[r - 1] = Tag{};
    }
  }

  // The gather part of index_select / cat_gather: the dim `d` of the data is read by index.
  void gatherAlong(NodeId n, const Node& node, int d, size_t indexInput, Tags& out) {
    const Tag& idx = tags_[node.inputs[indexInput]][0];
    // A padded index holds zeros there, which read real row 0: padded but not zero.
    out[d] = idx.padded ? Tag{true, idx.origin, false} : Tag{};
  }

  void refuseGatherAlongPadded(NodeId n, const Node& node, size_t i, int d) {
    const Tag& t = tags_[node.inputs[i]][d];
    if (t.padded)
      refuse(n, t,
             fmt::format("{} is read by index along dim {}, which is padded; an index >= the "
                         "real size would read padding instead of failing",
                         label(node, i), d));
  }

  void visitIndexSelect(NodeId n, const Node& node, Tags& out) {
    const ValueId in = node.inputs[0];
    const int d = shape(in).wrapDim(*node.attrs.dim, g_.describeNode(n));
    refuseGatherAlongPadded(n, node, 0, d);
    out = tags_[in];
    gatherAlong(n, node, d, 1, out);
  }

  // Cat's data inputs [0, count): refused along the cat dim, padded alike elsewhere.
  int visitCatInputs(NodeId n, const Node& node, size_t count, Tags& out) {
    const int d = shape(node.inputs[0]).wrapDim(*node.attrs.dim, g_.describeNode(n));
    for (size_t i = 0; i < count; ++i) {
      const Tag& t = tags_[node.inputs[i]][d];
      if (t.padded)
        refuse(n, t,
               fmt::format("{} is padded along dim {}, and the cat along dim {} would put "
                           "padded rows between real rows",
                           label(node, i), d, d));
    }
    for (int k = 0; k < rank(node.inputs[0]); ++k) {
      if (k == d) continue;
      std::optional<size_t> firstPadded, firstReal;
      for (size_t i = 0; i < count; ++i)
        (tags_[node.inputs[i]][k].padded ? firstPadded : firstReal).emplace(i);
      if (!firstPadded) continue;
      if (firstReal) {
        const Tag& t = tags_[node.inputs[*firstPadded]][k];
        refuse(n, t,
               fmt::format("{} dim {} is padded but {} dim {} is not; cat needs its inputs "
                           "padded alike",
                           label(node, *firstPadded), k, label(node, *firstReal), k));
      }
      Tag merged = tags_[node.inputs[0]][k];
      for (size_t i = 1; i < count; ++i) {
        const Tag& t = tags_[node.inputs[i]][k];
        tie(merged, t);
        merged.zero = merged.zero && t.zero;
      }
      out[k] = merged;
    }
    return d;
  }

  // Relu keeps every tag (relu(0) = 0); transpose moves them with the dims.
  void visitTranspose(const Node& node, Tags& out) {
    const Tags& in = tags_[node.inputs[0]];
    const Shape& perm = *node.attrs.perm;
    // Inference checked perm is a permutation of the input's dims (rank <= kMaxRank).
    for (int i = 0; i < perm.rank() && i < kMaxRank; ++i) out[i] = in[static_cast<size_t>(perm[i])];
  }

  // Flatten: each output dim is the product of a group of input dims. A padded dim survives only
  // when its group holds nothing else but static 1s, so the output dim is that dim itself;
  // otherwise padded elements would interleave with real ones (or the real size would be a
  // product the plan cannot express).
  void visitFlatten(NodeId n, const Node& node, Tags& out) {
    const ValueId in = node.inputs[0];
    const Shape& s = shape(in);
    const int r = rank(in);
    const int64_t axis = node.attrs.i(attr::Flatten::axis);
    const int a = static_cast<int>(axis < 0 ? axis + r : axis);
    for (int d = 0; d < r; ++d) {
      const Tag& t = tags_[in][d];
      if (!t.padded) continue;
      const int begin = d < a ? 0 : a, end = d < a ? a : r;
      for (int k = begin; k < end; ++k)
        if (k != d && s[k] != 1)
          refuse(n, t,
                 fmt::format("{} dim {} is padded, and flatten (axis {}) merges it with dim {} "
                             "(size {}), so padded elements would mix with real ones",
                             label(node, 0), d, axis, k, dimToString(s[k])));
      out[d < a ? 0 : 1] = t;
    }
  }

  // Squeeze drops dims of size 1, which cannot be padded; the other dims keep their tags.
  void visitSqueeze(NodeId n, const Node& node, Tags& out) {
    const ValueId in = node.inputs[0];
    const int r = rank(in);
    bool dropped[kMaxRank] = {};
    for (int64_t a : node.attrs.ints(attr::Squeeze::axes)) dropped[a < 0 ? a + r : a] = true;
    int o = 0;
    for (int d = 0; d < r; ++d) {
      const Tag& t = tags_[in][d];
      if (!dropped[d]) {
        out[o++] = t;
      } else if (t.padded) {
        refuse(n, t,
               fmt::format("{} dim {} is padded and squeeze removes it (it must be 1)",
                           label(node, 0), d));
      }
    }
  }

  // Unsqueeze inserts unpadded size-1 dims; the input's dims keep their tags, in order.
  void visitUnsqueeze(const Node& node, Tags& out) {
    const ValueId in = node.inputs[0];
    const auto axes = node.attrs.ints(attr::Unsqueeze::axes);
    const int outRank = rank(in) + static_cast<int>(axes.size());
    bool inserted[kMaxRank] = {};
    for (int64_t a : axes) inserted[a < 0 ? a + outRank : a] = true;
    int next = 0;
    for (int d = 0; d < outRank; ++d)
      if (!inserted[d]) out[d] = tags_[in][next++];
  }

  // Slice keeps a padded dim only when it takes all of it (start 0, end INT64_MAX, step 1): any
  // other range is relative to the padded size (a negative start, a reversal) or would cut the
  // real size, which the plan's real-size bookkeeping cannot follow.
  void visitSlice(NodeId n, const Node& node, Tags& out) {
    const ValueId in = node.inputs[0];
    const int r = rank(in);
    out = tags_[in];
    const Attrs& a = node.attrs;
    const auto starts = a.ints(attr::Slice::starts), ends = a.ints(attr::Slice::ends);
    for (size_t i = 0; i < starts.size(); ++i) {
      const int64_t ax = a.has(attr::Slice::axes) ? a.ints(attr::Slice::axes)[i] : int64_t(i);
      const int d = static_cast<int>(ax < 0 ? ax + r : ax);
      const int64_t step = a.has(attr::Slice::steps) ? a.ints(attr::Slice::steps)[i] : 1;
      const Tag& t = tags_[in][d];
      if (t.padded &&
          !(starts[i] == 0 && ends[i] == std::numeric_limits<int64_t>::max() && step == 1))
        refuse(n, t,
               fmt::format("{} dim {} is padded and slice takes [{}, {}) step {} of it; only the "
                           "whole dim (start 0, end INT64_MAX, step 1) is safe, any other range "
                           "would count from the padded end or cut the real elements",
                           label(node, 0), d, starts[i], ends[i], step));
    }
  }

  // Pad keeps a padded dim only without pads of its own (they would land between the real
  // elements and the gear's padding). Where another dim gains `value` != 0 positions, those
  // positions along a padded dim are not zero any more.
  void visitPad(NodeId n, const Node& node, Tags& out) {
    const ValueId in = node.inputs[0];
    const int r = rank(in);
    const auto pads = node.attrs.ints(attr::Pad::pads);
    bool grows = false;
    for (int d = 0; d < r; ++d) grows = grows || pads[d] > 0 || pads[r + d] > 0;
    const bool valueZero = node.attrs.f(attr::Pad::value) == 0.0;
    for (int d = 0; d < r; ++d) {
      Tag t = tags_[in][d];
      if (!t.padded) continue;
      if (pads[d] != 0 || pads[r + d] != 0)
        refuse(n, t,
               fmt::format("{} dim {} is padded and pad changes it by {} (begin) and {} (end); "
                           "the new positions would sit between real elements and the padding",
                           label(node, 0), d, pads[d], pads[r + d]));
      t.zero = t.zero && (valueZero || !grows);
      out[d] = t;
    }
  }

  // BatchNorm: the statistics are per channel, so the channel dim and the [C] inputs may not be
  // padded; other dims keep their tags, but a zero becomes bias - mean * scale / sqrt(var + eps).
  void visitBatchNorm(NodeId n, const Node& node, Tags& out) {
    for (size_t i = 1; i < node.inputs.size(); ++i)
      if (tags_[node.inputs[i]][0].padded)
        refuse(n, tags_[node.inputs[i]][0],
               fmt::format("{} (a per-channel statistic) is padded; padded channels would be "
                           "normalised with made-up statistics",
                           label(node, i)));
    const ValueId x = node.inputs[0];
    if (tags_[x][1].padded)
      refuse(n, tags_[x][1],
             fmt::format("{} dim 1 (the channels) is padded but its statistics are not",
                         label(node, 0)));
    out = tags_[x];
    for (Tag& t : out) t.zero = false;
  }

  // A reshape keeps a padded dim d only when it survives whole at the same position: the target
  // keeps every dim before d (a named dim, or the same static size) and names dim d, so each
  // (prefix, d, rest) position maps to the same position of the output; anything else would mix
  // padded and real elements within one output dim.
  // Whether target dim i of a reshape of an input declared `s` is the input's dim i itself: the
  // same symbol or expression, or a name that resolves positionally (neither the input nor a
  // graph input declares it: graph/ops/reshape.h's last rule).
  bool samePosition(const Shape& target, const Shape& s, int i) const {
    const int64_t d = target[i];
    if (i >= s.rank()) return false;
    if (d == s[i]) return isSymbolDim(d);
    if (!isSymbolDim(d)) return false;
    const auto e = dimExpr(d);
    auto declares = [&](const Shape& decl) {
      for (int64_t v : decl)
        if (v == d || (e && v == e->base)) return true;
      return false;
    };
    if (declares(s)) return false;
    for (ValueId v : g_.inputs)
      if (declares(shape(v))) return false;
    return true;
  }

  void visitReshape(NodeId n, const Node& node, Tags& out) {
    const ValueId in = node.inputs[0];
    const Shape& target = *node.attrs.shape;
    const Shape& s = shape(in);
    for (int d = 0; d < rank(in); ++d) {
      const Tag& t = tags_[in][d];
      if (!t.padded) continue;
      bool kept = d < target.rank() && samePosition(target, s, d);
      for (int i = 0; kept && i < d; ++i)
        kept = samePosition(target, s, i) || (isStaticDim(s[i]) && target[i] == s[i]);
      if (!kept)
        refuse(n, t,
               fmt::format("{} dim {} is padded, and shape {} does not keep it as dim {} (name it "
                           "there and keep the dims before it), so padded elements would mix with "
                           "real ones",
                           label(node, 0), d, target.toString(), d));
      out[d] = t;
    }
  }

  // Windowed ops (conv2d, pools): images stay independent along the batch dim (and the channel
  // dim for pools), but a window slides over H and W, so a padded spatial dim would put padded
  // pixels into real outputs at the border; conv2d also contracts the channels.
  void visitWindow(NodeId n, const Node& node, bool channelsIndependent, bool keepsZero,
                   Tags& out) {
    for (size_t i = 1; i < node.inputs.size(); ++i)
      for (int d = 0; d < rank(node.inputs[i]); ++d)
        if (tags_[node.inputs[i]][d].padded)
          refuse(n, tags_[node.inputs[i]][d],
                 fmt::format("{} (a weight or bias) dim {} is padded", label(node, i), d));
    const Tags& in = tags_[node.inputs[0]];
    for (int d = 1; d < 4; ++d) {
      if (!in[d].padded || (d == 1 && channelsIndependent)) continue;
      refuse(n, in[d],
             fmt::format("{} dim {} is padded, and {} a window over it would read padded "
                         "positions into real outputs",
                         label(node, 0), d,
                         d == 1 ? "conv2d sums over channels:" : "it is a spatial dim:"));
    }
    out[0] = in[0];
    out[0].zero = in[0].zero && keepsZero;
    if (channelsIndependent) out[1] = in[1];
  }

  // Mean: a padded dim may not be reduced (its padding would enter the mean); the others keep
  // their tags at their output positions.
  void visitMean(NodeId n, const Node& node, Tags& out) {
    const ValueId in = node.inputs[0];
    const int r = rank(in);
    bool reduced[kMaxRank] = {};
    for (int64_t a : node.attrs.ints(attr::Mean::axes)) reduced[a < 0 ? a + r : a] = true;
    const bool keep = node.attrs.i(attr::Mean::keepdims) == 1;
    int o = 0;
    for (int d = 0; d < r; ++d) {
      const Tag& t = tags_[in][d];
      if (reduced[d]) {
        if (t.padded)
          refuse(n, t,
                 fmt::format("{} dim {} is padded and mean reduces it, so the padding would enter "
                             "the mean",
                             label(node, 0), d));
        if (keep) ++o;
        continue;
      }
      out[o++] = t;
    }
  }

  // A reduction over a padded dim (softmax, layer_norm, mean, reduce_sum with non-zero padding)
  // would let the padded positions into every real result along it. Geared mode pads a
  // transformer's sequence dim with whatever the padded ids embed to; attention then normalises
  // each query row over all keys, padded ones included, and gearbox has no valid-length mask
  // to exclude them (an attention mask input would, but the analysis cannot prove what a mask
  // holds). So the rule is: refuse, naming the op; pad the batch dim, or use exact gears or the
  // dynamic fallback for the sequence dim.
  void refuseReducedPadded(NodeId n, const Node& node, int d, std::string_view what) {
    const Tag& t = tags_[node.inputs[0]][d];
    if (t.padded)
      refuse(n, t,
             fmt::format("{} dim {} is padded and {}, so the padded positions would enter every "
                         "real result along it (gearbox has no valid-length mask)",
                         label(node, 0), d, what));
  }

  // Softmax along `axis`: the other dims keep their tags; softmax(0s) is 1/n, not zero.
  void visitSoftmax(NodeId n, const Node& node, Tags& out) {
    const ValueId in = node.inputs[0];
    const int r = rank(in);
    const int64_t a = node.attrs.i(attr::Softmax::axis);
    const int d = static_cast<int>(a < 0 ? a + r : a);
    refuseReducedPadded(n, node, d, "softmax normalises along it");
    out = tags_[in];
    for (Tag& t : out) t.zero = false;
  }

  // Attention: what its unfused chain (matmul, scale, mask add, softmax, matmul) would allow.
  // The head size D is contracted in q k^T: padded in both q and k and still zero there (zeros
  // add nothing), or in neither, as matmul's K. The keys S_k are what the softmax normalises
  // over: refused in k, v and the mask, as softmax refuses its normalised dim. The batch dims
  // and the query rows S_q are independent items and rows, padded in the output where any
  // operand pads them (not zero: a softmax row sums to 1). D_v comes from v: P v of a zero
  // column of v is zero.
  void visitAttention(NodeId n, const Node& node, Tags& out) {
    const ValueId q = node.inputs[0], k = node.inputs[1], v = node.inputs[2];
    const int r = rank(q);
    const Tag& dq = tags_[q][r - 1];
    const Tag& dk = tags_[k][r - 1];
    if (dq.padded != dk.padded)
      refuse(n, dq.padded ? dq : dk,
             fmt::format("the head size D is padded in {} but not in {}; padded D would be "
                         "multiplied by real values",
                         dq.padded ? label(node, 0) : label(node, 1),
                         dq.padded ? label(node, 1) : label(node, 0)));
    if (dq.padded) {
      if (!dq.zero || !dk.zero)
        refuse(n, dq.zero ? dk : dq,
               fmt::format("the head size D is padded in q and k but the padding of {} is no "
                           "longer zero, so it would add to the real scores",
                           !dq.zero ? label(node, 0) : label(node, 1)));
      tie(dq, dk);
    }
    for (size_t i = 1; i < node.inputs.size(); ++i) {
      const int ri = rank(node.inputs[i]);
      const int d = i == 3 ? ri - 1 : r - 2;  // S_k: k and v's rows, the mask's last dim
      if (d < 0 || !tags_[node.inputs[i]][d].padded) continue;
      refuse(n, tags_[node.inputs[i]][d],
             fmt::format("{} dim {} is padded and holds the keys S_k, which the attention's "
                         "softmax normalises over, so the padded keys would enter every real "
                         "result (gearbox has no valid-length mask)",
                         label(node, i), d));
    }
    out = Tags{};
    for (int d = 0; d < r - 1; ++d) {
      const Tag* first = nullptr;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const ValueId x = node.inputs[i];
        // The mask's dims are right-aligned with the scores; q, k and v share the batch dims,
        // and only q has S_q.
        const int j = i == 3 ? d - (r - rank(x)) : d;
        if (j < 0 || (i != 0 && i != 3 && d == r - 2) || !tags_[x][j].padded) continue;
        if (first) {
          tie(*first, tags_[x][j]);
        } else {
          first = &tags_[x][j];
        }
      }
      if (first) out[d] = Tag{true, first->origin, false};
    }
    out[r - 1] = tags_[v][r - 1];
  }

  // LayerNorm over dims [axis, rank): the leading dims keep their tags (rows are independent);
  // scale and bias have the normalised dims, which are never padded here.
  void visitLayerNorm(NodeId n, const Node& node, Tags& out) {
    const ValueId in = node.inputs[0];
    const int r = rank(in);
    const int64_t a = node.attrs.i(attr::LayerNorm::axis);
    const int axis = static_cast<int>(a < 0 ? a + r : a);
    for (int d = axis; d < r; ++d) refuseReducedPadded(n, node, d, "layer_norm normalises over it");
    for (size_t i = 1; i < node.inputs.size(); ++i)
      for (int d = 0; d < rank(node.inputs[i]); ++d)
        if (tags_[node.inputs[i]][d].padded)
          refuse(n, tags_[node.inputs[i]][d],
                 fmt::format("{} (scale or bias) dim {} is padded", label(node, i), d));
    out = tags_[in];
    for (Tag& t : out) t.zero = false;  // (0 - mean) * rstd * scale + bias
  }

  // ReduceSum: a padded dim may be summed only while its padding is still zero (zeros add
  // nothing, as for matmul's K); the output is then real there.
  void visitReduceSum(NodeId n, const Node& node, Tags& out) {
    const ValueId in = node.inputs[0];
    const int r = rank(in);
    bool reduced[kMaxRank] = {};
    for (int64_t a : node.attrs.ints(attr::ReduceSum::axes)) reduced[a < 0 ? a + r : a] = true;
    const bool keep = node.attrs.i(attr::ReduceSum::keepdims) == 1;
    int o = 0;
    for (int d = 0; d < r; ++d) {
      const Tag& t = tags_[in][d];
      if (reduced[d]) {
        if (t.padded && !t.zero)
          refuse(n, t,
                 fmt::format("{} dim {} is padded and reduce_sum adds it up, but its padding is "
                             "no longer zero (an op before wrote into it)",
                             label(node, 0), d));
        if (keep) ++o;
        continue;
      }
      out[o++] = t;
    }
  }

  // Where: add's rule over three operands; the padding stays zero when both x and y are zero
  // there (whichever is chosen).
  void visitWhere(NodeId n, const Node& node, Tags& out) {
    const ValueId c = node.inputs[0], x = node.inputs[1], y = node.inputs[2];
    Tags cx{};
    broadcast(n, 0, tags_[c], rank(c), shape(c), 1, tags_[x], rank(x), shape(x), false, cx);
    // Shapes of c and x broadcast: the rank is the larger one, sizes come from inference.
    const int rcx = std::max(rank(c), rank(x));
    Shape scx;
    for (int i = 0; i < rcx; ++i) {
      const int kc = i - (rcx - rank(c)), kx = i - (rcx - rank(x));
      const int64_t dc = kc >= 0 ? shape(c)[kc] : 1, dx = kx >= 0 ? shape(x)[kx] : 1;
      scx.push(dc == 1 ? dx : dc);
    }
    broadcast(n, 1, cx, rcx, scx, 2, tags_[y], rank(y), shape(y), false, out);
    // Zero only where x and y are both padded there and still zero: whichever the condition
    // picks is then 0 (a broadcast x or y puts real values on the padded positions).
    const int r = rank(node.output);
    auto zeroAt = [&](ValueId v, int i) {
      const int k = i - (r - rank(v));
      return k >= 0 && tags_[v][k].padded && tags_[v][k].zero;
    };
    for (int i = 0; i < r; ++i)
      if (out[i].padded) out[i].zero = zeroAt(x, i) && zeroAt(y, i);
  }

  // Expand: x's dims keep their tags at their (right-aligned) positions. A dim x broadcasts
  // (size 1) to a target size is not padded: if that size is a padded symbol the copies there
  // hold real values, which the plan could not slice back, so it is refused.
  void visitExpand(NodeId n, const Node& node, Tags& out) {
    const ValueId in = node.inputs[0];
    const int r = rank(node.output), ri = rank(in);
    for (int i = 0; i < r; ++i) {
      const int k = i - (r - ri);
      if (k >= 0) out[i] = tags_[in][k];
      const int64_t od = shape(node.output)[i];
      if (out[i].padded || !isSymbolDim(od)) continue;
      // An output dim named by a padded input dim's symbol that x does not carry.
      for (size_t gi = 0; gi < g_.inputs.size(); ++gi) {
        const Shape& decl = g_.value(g_.inputs[gi]).type.shape;
        const auto e = dimExpr(od);
        for (int j = 0; j < decl.rank(); ++j)
          if ((decl[j] == od || (e && decl[j] == e->base)) && tags_[g_.inputs[gi]][j].padded)
            refuse(n, tags_[g_.inputs[gi]][j],
                   fmt::format("expand makes dim {} of size {} from {}'s size-1 dim, so its "
                               "padded positions would hold copies of real values",
                               i, dimToString(od), label(node, 0)));
      }
    }
  }

  // Gather: like index_select (not along a padded data dim); the index's dims take its place,
  // padded index positions reading real row 0 (padded, not zero).
  void visitGather(NodeId n, const Node& node, Tags& out) {
    const ValueId data = node.inputs[0], idx = node.inputs[1];
    const int r = rank(data);
    const int64_t a = node.attrs.i(attr::Gather::axis);
    const int axis = static_cast<int>(a < 0 ? a + r : a);
    refuseGatherAlongPadded(n, node, 0, axis);
    // Inference checked the output rank (r - 1 + rank(idx) <= kMaxRank); the bound on `o`
    // says so to the compiler too.
    int o = 0;
    for (int d = 0; d < axis && o < kMaxRank; ++d) out[o++] = tags_[data][d];
    for (int d = 0; d < rank(idx) && o < kMaxRank; ++d) {
      const Tag& t = tags_[idx][d];
      out[o++] = t.padded ? Tag{true, t.origin, false} : Tag{};
    }
    for (int d = axis + 1; d < r && o < kMaxRank; ++d) out[o++] = tags_[data][d];
  }

  void visit(NodeId n) {
    const Node& node = g_.node(n);
    Tags out{};
    switch (node.kind) {
      case OpKind::kConst: break;
      case OpKind::kAdd: visitAdd(n, node, out); break;
      case OpKind::kMul: {
        // A zero on either side keeps a padded position zero, as for a matmul batch slice.
        const ValueId a = node.inputs[0], b = node.inputs[1];
        broadcast(n, 0, tags_[a], rank(a), shape(a), 1, tags_[b], rank(b), shape(b), true, out);
        break;
      }
      case OpKind::kRelu: out = tags_[node.inputs[0]]; break;
      case OpKind::kClip: {
        // clip(0) is 0 only when the range holds 0.
        out = tags_[node.inputs[0]];
        const bool keepsZero =
            node.attrs.f(attr::Clip::min) <= 0 && node.attrs.f(attr::Clip::max) >= 0;
        for (Tag& t : out) t.zero = t.zero && keepsZero;
        break;
      }
      case OpKind::kSigmoid:
        // sigmoid(0) = 0.5: the padding stays padding but is no longer zero.
        out = tags_[node.inputs[0]];
        for (Tag& t : out) t.zero = false;
        break;
      case OpKind::kFlatten: visitFlatten(n, node, out); break;
      case OpKind::kSqueeze: visitSqueeze(n, node, out); break;
      case OpKind::kUnsqueeze: visitUnsqueeze(node, out); break;
      case OpKind::kSlice: visitSlice(n, node, out); break;
      case OpKind::kPad: visitPad(n, node, out); break;
      case OpKind::kBatchNorm: visitBatchNorm(n, node, out); break;
      case OpKind::kTranspose: visitTranspose(node, out); break;
      case OpKind::kReshape: visitReshape(n, node, out); break;
      case OpKind::kMatMul: visitMatMul(n, node, out); break;
      case OpKind::kIndexSelect: visitIndexSelect(n, node, out); break;
      case OpKind::kCat: visitCatInputs(n, node, node.inputs.size(), out); break;
      case OpKind::kConv2d:
        // Zero images stay zero only without a bias.
        visitWindow(n, node, false, node.inputs.size() == 2, out);
        break;
      case OpKind::kMaxPool2d:
      case OpKind::kAvgPool2d: visitWindow(n, node, true, true, out); break;
      case OpKind::kMean: visitMean(n, node, out); break;
      case OpKind::kSub: visitAdd(n, node, out); break;
      case OpKind::kDiv:
      case OpKind::kPow: {
        // x / 0 and pow(0, 0) are not 0: padded positions stay padded but not zero.
        const ValueId a = node.inputs[0], b = node.inputs[1];
        broadcast(n, 0, tags_[a], rank(a), shape(a), 1, tags_[b], rank(b), shape(b), false, out);
        for (Tag& t : out) t.zero = false;
        break;
      }
      case OpKind::kSqrt:
      case OpKind::kErf:
      case OpKind::kTanh:
      case OpKind::kGelu:
      case OpKind::kCast:
        // f(0) = 0 for each (sqrt, erf, tanh, gelu; a cast of 0 is 0): tags and zeros kept.
        out = tags_[node.inputs[0]];
        break;
      case OpKind::kTrilu:
        // The triangle is counted from the top-left corner, and padding sits at the end of each
        // dim, so real (i, j) keep their values; padded positions become x or 0, zero if x was.
        out = tags_[node.inputs[0]];
        break;
      case OpKind::kSoftmax: visitSoftmax(n, node, out); break;
      case OpKind::kAttention: visitAttention(n, node, out); break;
      case OpKind::kLayerNorm: visitLayerNorm(n, node, out); break;
      case OpKind::kReduceSum: visitReduceSum(n, node, out); break;
      case OpKind::kWhere: visitWhere(n, node, out); break;
      case OpKind::kExpand: visitExpand(n, node, out); break;
      case OpKind::kGather: visitGather(n, node, out); break;
      case OpKind::kCatGather: {
        const size_t data = node.inputs.size() - 1;
        const int d = shape(node.inputs[0]).wrapDim(*node.attrs.dim, g_.describeNode(n));
        for (size_t i = 0; i < data; ++i) refuseGatherAlongPadded(n, node, i, d);
        visitCatInputs(n, node, data, out);
        gatherAlong(n, node, d, data, out);
        break;
      }
    }
    tags_[node.output] = out;
  }

  const Graph& g_;
  std::vector<Tags> tags_;  // per value
  std::vector<std::pair<InputDim, InputDim>> same_;
};

}  // namespace

PaddingPlan analyzePadding(const Graph& g, std::span<const InputDim> padded) {
  // The rules index operands by rank and read attrs.dim; re-verifying first means a graph
  // edited after it was built fails with a shape error instead of misreading its nodes.
  verifyGraph(g);
  return Analyzer(g).run(padded);
}

std::vector<InputDim> gearedInputDims(const GearSet& gears) {
  std::vector<InputDim> out;
  for (const GearSlot& s : gears.slots()) out.push_back(InputDim{s.inputIndex, s.dim});
  return out;
}

void checkRealSizes(const Graph& g, const PaddingPlan& plan, std::span<const Shape> actual) {
  if (actual.size() != g.inputs.size())
    fail(ErrorKind::kGear, "expected {} input shapes, got {}", g.inputs.size(), actual.size());
  auto size = [&](const InputDim& d) -> int64_t {
    const Shape& s = actual[d.input];
    if (d.dim >= s.rank())
      fail(ErrorKind::kGear, "input '{}': shape {} has no dim {}", g.value(g.inputs[d.input]).name,
           s.toString(), d.dim);
    return s[d.dim];
  };
  for (const auto& [a, b] : plan.sameRealSize) {
    const int64_t sa = size(a), sb = size(b);
    if (sa != sb)
      fail(ErrorKind::kGear,
           "cannot pad: input '{}' dim {} is {} but input '{}' dim {} is {}; padding both to one "
           "gear would hide that the graph needs them equal (or broadcasts a 1)",
           g.value(g.inputs[a.input]).name, a.dim, sa, g.value(g.inputs[b.input]).name, b.dim, sb);
  }
}

double paddingWaste(std::span<const Shape> padded, std::span<const Shape> actual) {
  int64_t p = 0, a = 0;
  for (const Shape& s : padded) p += s.numel();
  for (const Shape& s : actual) a += s.numel();
  if (a == 0) return p == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return static_cast<double>(p - a) / static_cast<double>(a);
}

}  // namespace gearbox
