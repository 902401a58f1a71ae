#include "gears/padding.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "gears/gear_set.h"
#include "graph/error.h"

// Every op needs its padding rule here: a new op without a case is a build error, not a silent
// "padding passes through" (docs/adding-an-op.md).
#pragma GCC diagnostic error "-Wswitch"

namespace gearbox {
namespace {

// What the padded positions of one value hold, for one padded dim d: the positions where d is
// in its padded range and every other dim in its real range (the ones an op reducing over d
// mixes into real results). Positions padded in two dims are not followed; like everything
// derived from the pad's zeros they are taken to be finite unless an op could make them
// otherwise (x / 0, sqrt(-1), a -inf mask). Real values (inputs, weights) are taken to be
// finite; overflow of finite values is not modelled.
enum class Fill : uint8_t {
  kConst,    // exactly `c` (the pad writes 0; the padding of a constant expression stays known)
  kKeyMask,  // a key mask: `c` <= kMaskFloor at the padded positions while the real positions
             // keep some key of each row (see kMaskFloor)
  kMasked,   // finite scores plus a key mask: softmax gives them weight 0
  kFinite,   // unknown but finite
  kAny,      // unknown, maybe inf or NaN
};

// The largest additive mask value that hides a key: BERT's extended attention mask is -10000,
// Hugging Face's finfo(f32).min, others -inf. exp(x) is 0 in f32 below about -103.97, so a
// padded key at -10000 gets weight exactly 0 when its row keeps a real key whose score is
// within ~9,896 of that key's unmasked score. A key mask therefore needs real positions that
// are NOT masked, which a constant cannot promise (x + -10000 shifts every key): it comes
// from a 0/1 keep-mask input (1 = keep), whose zero padding means "pad", mapped so that a kept
// key becomes 0 and a padded one <= -10000 ((1 - mask) * big; the model's own in-batch masking
// assumes every row keeps a key, as every request has a token), or from a causal triangle that
// keeps each row's diagonal (triu(big, 1)). Two masks combined (added, or picked by `where`)
// may keep different keys, so together they keep none: not a key mask.
constexpr double kMaskFloor = -1e4;

struct Held {
  Fill fill = Fill::kConst;
  double c = 0;
  // kConst derived from a data input's padding by uniform constants: what a real position
  // holding a kept key (the input's value 1) becomes through the same ops, so `(1 - mask)`
  // keeps 0 and pads 1. NaN when the constant is not data-derived: a uniform constant (every
  // real position holds it too), its broadcast copies, or two padded values combined (their
  // data may cancel: x - x).
  double keep = std::numeric_limits<double>::quiet_NaN();
  bool own() const { return !std::isnan(keep); }
  static Held constant(double v, double keep = std::numeric_limits<double>::quiet_NaN()) {
    return std::isnan(v) ? any() : Held{Fill::kConst, v, keep};
  }
  static Held keyMask(double v) { return Held{Fill::kKeyMask, v}; }
  // kKeyMask and kMasked: `c` is how far below a kept key's value the padded keys sit.
  static Held masked(double gap) { return Held{Fill::kMasked, gap}; }
  static Held finite() { return Held{Fill::kFinite, 0}; }
  static Held any() { return Held{Fill::kAny, 0}; }
  bool zero() const { return fill == Fill::kConst && c == 0; }
  bool isConst() const { return fill == Fill::kConst; }
  // Keys softmax gives weight 0 to: a key mask, or scores plus one.
  bool hidden() const { return fill == Fill::kMasked || fill == Fill::kKeyMask; }
  // A finite value: 0 * it adds nothing.
  bool isFinite() const {
    return fill == Fill::kFinite || (fill == Fill::kConst && std::isfinite(c));
  }
  // What a finite function of it is: finite unless it may already be inf or NaN.
  Held finiteOf() const { return isFinite() ? finite() : any(); }
};

// Two constants combined by `f`: data-derived when exactly one side is (the other is shared by
// every real position), the kept key's value following through `f`.
template <typename F>
Held combineConst(const Held& a, const Held& b, F f) {
  const double v = f(a.c, b.c);
  if (a.own() == b.own()) return Held::constant(v);
  return Held::constant(v, f(a.own() ? a.keep : a.c, b.own() ? b.keep : b.c));
}

// The rules of each fill under the elementwise ops (a side that is not padded there passes
// what it is known to hold: a uniform constant, or finite real values).
Held addHeld(Held a, Held b) {
  if (a.isConst() && b.isConst()) return combineConst(a, b, std::plus<double>());
  // A key mask shifted by a finite constant every position shares is one still; plus finite
  // scores the keys stay hidden. Two masks (or masked scores and a mask) may keep different
  // keys: not hidden.
  if ((a.fill == Fill::kKeyMask && b.isConst() && !b.own() && std::isfinite(b.c)) ||
      (b.fill == Fill::kKeyMask && a.isConst() && !a.own() && std::isfinite(a.c)))
    return a.fill == Fill::kKeyMask ? a : b;
  // Plus a constant derived from data (scores fed as an input, or another mask's kept-key
  // values): the padded keys move by its padding, the kept ones by its kept-key value, so the
  // gap changes by their difference and must stay <= kMaskFloor.
  if ((a.hidden() && b.own()) || (b.hidden() && a.own())) {
    const Held& h = a.hidden() ? a : b;
    const Held& d = a.hidden() ? b : a;
    const double gap = h.c + (d.c - d.keep);
    return gap <= kMaskFloor ? Held::masked(gap) : Held::any();
  }
  if ((a.hidden() && b.isFinite()) || (b.hidden() && a.isFinite()))
    return Held::masked(a.hidden() ? a.c : b.c);
  return a.isFinite() && b.isFinite() ? Held::finite() : Held::any();
}
Held negHeld(Held a) {
  if (a.isConst()) return Held::constant(-a.c, -a.keep);
  return a.fill == Fill::kFinite ? a : Held::any();
}
Held mulHeld(Held a, Held b) {
  if (a.isConst() && b.isConst()) {
    // (1 - mask) * big: the padding's data-derived 1 (or more), whose kept keys are 0, times
    // a shared big negative constant is a key mask.
    const Held& p = a.own() ? a : b;
    const Held& k = a.own() ? b : a;
    if (p.own() && !k.own() && p.c >= 1 && p.keep == 0 && k.c <= kMaskFloor)
      return Held::keyMask(p.c * k.c);
    return combineConst(a, b, std::multiplies<double>());
  }
  if ((a.zero() && b.isFinite()) || (b.zero() && a.isFinite())) return Held::constant(0);
  // A mask scaled by a shared constant of at least 1 still hides.
  if ((a.hidden() && b.isConst() && !b.own() && b.c >= 1) ||
      (b.hidden() && a.isConst() && !a.own() && a.c >= 1)) {
    Held h = a.hidden() ? a : b;
    h.c *= a.hidden() ? b.c : a.c;
    return h;
  }
  return a.isFinite() && b.isFinite() ? Held::finite() : Held::any();
}
Held divHeld(Held a, Held b) {
  const bool byConst = b.isConst() && b.c != 0 && std::isfinite(b.c);
  if (a.isConst() && byConst && (!b.own() || b.keep != 0))
    return combineConst(a, b, std::divides<double>());
  if (byConst && a.fill == Fill::kFinite) return a;
  if (byConst && !b.own() && a.hidden() && b.c > 0 && b.c <= 1) return Held{a.fill, a.c / b.c};
  return Held::any();  // x / 0 is inf or NaN
}
Held powHeld(Held a, Held b) {
  if (a.isConst() && b.isConst())
    return combineConst(a, b, [](double x, double y) { return std::pow(x, y); });
  // A non-negative integer exponent keeps a finite base finite (0^0 = 1); a fractional one
  // makes a negative base NaN.
  if (a.isFinite() && b.isConst() && b.c >= 0 && std::isfinite(b.c) && b.c == std::floor(b.c))
    return Held::finite();
  return Held::any();
}
// A product summed over a dim (a matmul's batch slices and its M and N sides): zero when one
// side is zero and the other finite.
Held productHeld(Held a, Held b) {
  if ((a.zero() && b.isFinite()) || (b.zero() && a.isFinite())) return Held::constant(0);
  return a.isFinite() && b.isFinite() ? Held::finite() : Held::any();
}
std::string describe(const Held& h) {
  switch (h.fill) {
    case Fill::kConst: return h.c == 0 ? "zeros" : fmt::format("the constant {}", h.c);
    case Fill::kKeyMask: return fmt::format("a key mask ({})", h.c);
    case Fill::kMasked: return "masked scores";
    case Fill::kFinite: return "finite values";
    case Fill::kAny: return "values that may be inf or NaN";
  }
  return "";
}
Held subHeld(Held a, Held b) {
  return addHeld(a, negHeld(b));
}
// Where either may be picked (where, cat's inputs, pad's new positions).
// Two masks picked per position may keep different keys, so no mask survives a join.
Held joinHeld(Held a, Held b) {
  if (a.isConst() && b.isConst() && a.c == b.c)
    return Held::constant(a.c,
                          a.keep == b.keep ? a.keep : std::numeric_limits<double>::quiet_NaN());
  return a.isFinite() && b.isFinite() ? Held::finite() : Held::any();
}

// What is known about one dim of one value: padded or not, from which input dim, and what the
// padded positions hold (the pad writes zeros).
struct Tag {
  bool padded = false;
  InputDim origin;
  Held held;
  // The real size is the origin's real size plus this (a cat of static rows before the padded
  // input: a decode step's [new token; past]).
  int64_t offset = 0;
  bool zero() const { return held.zero(); }
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
      // The pad writes 0 where a keep-mask's kept key holds 1.
      tags_[g_.inputs[p.input]][p.dim] = Tag{true, p, Held::constant(0, 1)};
    }
    for (NodeId n = 0; n < static_cast<NodeId>(g_.nodes.size()); ++n) visit(n);
    PaddingPlan plan;
    for (ValueId out : g_.outputs) {
      std::vector<PaddedOutputDim> dims;
      for (int d = 0; d < rank(out); ++d)
        if (tags_[out][d].padded)
          dims.push_back(PaddedOutputDim{d, tags_[out][d].origin, tags_[out][d].offset});
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

  // Two padded dims meet: their real sizes must be equal. From one origin that means equal
  // offsets; from two, the runner checks the origins' real sizes (sameRealSize), which only
  // says the dims are equal when the offsets are.
  void tie(NodeId n, const Tag& a, const Tag& b) {
    if (a.offset != b.offset)
      refuse(n, a,
             fmt::format("padded dims of real sizes {}+{} and {}+{} meet here, and the plan "
                         "can tie only dims with equal offsets",
                         g_.value(g_.inputs[a.origin.input]).name, a.offset,
                         g_.value(g_.inputs[b.origin.input]).name, b.offset));
    if (a.origin == b.origin) return;
    for (const auto& [x, y] : same_)
      if ((x == a.origin && y == b.origin) || (x == b.origin && y == a.origin)) return;
    same_.emplace_back(a.origin, b.origin);
  }

  // A tag like `t` (origin, offset) holding `h`.
  static Tag like(const Tag& t, Held h) {
    Tag o = t;
    o.held = h;
    return o;
  }

  // What a value holds where it is not padded but meets padded positions (a broadcast operand):
  // its real values, known when it is a constant whose elements are all equal (BERT's
  // `1 - mask` and `* -10000`), otherwise taken to be finite.
  Held realHeld(ValueId v) const {
    const Value& val = g_.value(v);
    if (val.producer == kNoNode) return Held::finite();
    const Node& p = g_.node(val.producer);
    if (p.kind != OpKind::kConst || !p.constant || p.constant->empty()) return Held::finite();
    const Tensor& t = *p.constant;
    // Small constants only: a weight matrix is never uniform, and this runs per padded op.
    constexpr int64_t kMaxScan = 4096;
    if (t.numel() < 1 || t.numel() > kMaxScan) return Held::finite();
    auto at = [&](int64_t i) -> double {
      switch (t.dtype()) {
        case DType::kF32: return t.as<float>()[i];
        case DType::kI32: return t.as<int32_t>()[i];
        case DType::kI64: return static_cast<double>(t.as<int64_t>()[i]);
      }
      return 0;
    };
    const double first = at(0);
    for (int64_t i = 1; i < t.numel(); ++i)
      if (!(at(i) == first)) return Held::finite();
    return Held::constant(first);
  }

  // What `v` holds at dim `d` of a value of rank `r` it is broadcast into (right-aligned): its
  // padding's fill where it is padded there, else its real values.
  Held heldAt(ValueId v, int i, int r) const {
    const int k = i - (r - rank(v));
    if (k >= 0 && tags_[v][k].padded) return tags_[v][k].held;
    return realHeld(v);
  }

  using Combine = Held (*)(Held, Held);

  // NumPy broadcasting of two padded-dim rows, right-aligned (add, and matmul batch dims).
  // `combine` gives what the result's padded positions hold from what each operand holds
  // there; `realA` / `realB` is what an operand holds where it is not padded (broadcast).
  void broadcast(NodeId n, size_t ia, const Tags& ta, int ra, const Shape& sa, Held realA,
                 size_t ib, const Tags& tb, int rb, const Shape& sb, Held realB, Combine combine,
                 Tags& out) {
    const Node& node = g_.node(n);
    const int r = std::max(ra, rb);
    for (int i = 0; i < r; ++i) {
      const int ka = i - (r - ra), kb = i - (r - rb);
      const Tag a = ka >= 0 ? ta[ka] : Tag{};
      const Tag b = kb >= 0 ? tb[kb] : Tag{};
      if (a.padded && b.padded) {
        tie(n, a, b);
        out[i] = like(a, combine(a.held, b.held));
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
      // The broadcast operand's real values land on the padded positions.
      out[i] = like(p, aPadded ? combine(a.held, realB) : combine(realA, b.held));
    }
  }

  void binary(NodeId n, const Node& node, Combine combine, Tags& out) {
    const ValueId a = node.inputs[0], b = node.inputs[1];
    broadcast(n, 0, tags_[a], rank(a), shape(a), realHeld(a), 1, tags_[b], rank(b), shape(b),
              realHeld(b), combine, out);
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
      // 0 * x adds nothing for a finite x: one side's zeros are enough.
      const bool zeroA = ka.zero() && kb.held.isFinite(), zeroB = kb.zero() && ka.held.isFinite();
      if (!zeroA && !zeroB)
        refuse(n, ka.zero() ? kb : ka,
               fmt::format("the contraction dim K is padded in both inputs but neither's padding "
                           "is zero against a finite other ({} holds {}, {} holds {}: a "
                           "broadcast add or an index wrote into it), so it would add to the real "
                           "sums",
                           label(node, 0), describe(ka.held), label(node, 1), describe(kb.held)));
      tie(n, ka, kb);  // K is contracted away: the output is not padded there
    }
    Shape batchA(sa.begin(), sa.end() - 2);
    Shape batchB(sb.begin(), sb.end() - 2);
    Tags tba{}, tbb{};
    std::copy(ta.begin(), ta.begin() + (ra - 2), tba.begin());
    std::copy(tb.begin(), tb.begin() + (rb - 2), tbb.begin());
    broadcast(n, 0, tba, ra - 2, batchA, realHeld(a), 1, tbb, rb - 2, batchB, realHeld(b),
              productHeld, out);
    const int r = std::max(ra, rb);
    // A zero batch slice times anything finite is zero over the real K; a padded K adds the
    // slices' doubly padded corners, which are not followed.
    if (ka.padded)
      for (int i = 0; i < r - 2; ++i)
        if (out[i].padded && out[i].zero()) out[i].held = Held::finite();
    // M: zero rows of a give zero rows of the product, unless padded K brings in a's
    // doubly padded corner against b's non-zero K padding; N likewise.
    auto carried = [&](Tag t, const Tag& kOther) {
      if (!t.padded) return t;
      const bool zero = t.zero() && (!ka.padded || kOther.zero());
      t.held = zero ? Held::constant(0) : productHeld(t.held, Held::finite());
      return t;
    };
    out[r - 2] = carried(ta[ra - 2], kb);
    out[r - 1] = carried(tb[rb - 1], ka);
    if (bVec) out[r - 1] = Tag{};
    if (aVec) {
      out[r - 2] = out[r - 1];
      out[r - 1] = Tag{};
    }
  }

  // A fused epilogue's tail: inputs [from, end) of `node` added to its output (`out`: the sums'
  // tags) as adds would be, then the clamp [lo, hi] on what the padding holds, as a clip would.
  void visitEpilogue(NodeId n, const Node& node, size_t from, double lo, double hi, Tags& out) {
    const ValueId o = node.output;
    for (size_t i = from; i < node.inputs.size(); ++i) {
      const Tags sums = out;
      const ValueId r = node.inputs[i];
      broadcast(n, 0, sums, rank(o), shape(o), Held::finite(), i, tags_[r], rank(r), shape(r),
                realHeld(r), addHeld, out);
    }
    if (lo == -std::numeric_limits<double>::infinity() &&
        hi == std::numeric_limits<double>::infinity())
      return;
    for (Tag& t : out)
      if (t.padded) {
        if (t.held.fill == Fill::kConst)
          t.held = Held::constant(std::min(std::max(t.held.c, lo), hi));
        else if (t.held.hidden() && std::isfinite(lo))
          t.held = Held::finite();
        else
          t.held = t.held.finiteOf();
      }
  }

  // The gather part of index_select / cat_gather: the dim `d` of the data is read by index.
  void gatherAlong(NodeId n, const Node& node, int d, size_t indexInput, Tags& out) {
    const Tag& idx = tags_[node.inputs[indexInput]][0];
    // A padded index holds zeros there, which read real row 0: padded but not zero.
    out[d] = idx.padded ? like(idx, Held::finite()) : Tag{};
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
  // With `tail`, the last input may be padded along the cat dim when every other input has a
  // static size there: its padding then ends the output too, whose real size is the static
  // rows plus the last input's real size (a decode step's keys, [new token; past]).
  int visitCatInputs(NodeId n, const Node& node, size_t count, bool tail, Tags& out) {
    const int d = shape(node.inputs[0]).wrapDim(*node.attrs.dim, g_.describeNode(n));
    int64_t before = 0;
    for (size_t i = 0; i < count; ++i) {
      const Tag& t = tags_[node.inputs[i]][d];
      if (!t.padded) {
        const int64_t size = shape(node.inputs[i])[d];
        if (isStaticDim(size)) before += size;  // sizes are bounded (checked in inference)
        continue;
      }
      if (tail && i + 1 == count) {
        bool staticBefore = true;
        for (size_t j = 0; j < i; ++j)
          staticBefore = staticBefore && isStaticDim(shape(node.inputs[j])[d]);
        if (staticBefore) {
          out[d] = t;
          out[d].offset = t.offset + before;
          continue;
        }
      }
      refuse(n, t,
             fmt::format(
                 "{} is padded along dim {}, and the cat along dim {} would put "
                 "padded rows between real rows{}",
                 label(node, i), d, d,
                 tail ? " (only a last input after static-sized ones may be padded there)" : ""));
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
        tie(n, merged, t);
        merged.held = joinHeld(merged.held, t.held);
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
    for (int d = 0; d < r; ++d) {
      Tag t = tags_[in][d];
      if (!t.padded) continue;
      if (pads[d] != 0 || pads[r + d] != 0)
        refuse(n, t,
               fmt::format("{} dim {} is padded and pad changes it by {} (begin) and {} (end); "
                           "the new positions would sit between real elements and the padding",
                           label(node, 0), d, pads[d], pads[r + d]));
      if (grows) t.held = joinHeld(t.held, Held::constant(node.attrs.f(attr::Pad::value)));
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
    for (Tag& t : out) t.held = t.held.finiteOf();
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
  void visitWindow(NodeId n, const Node& node, bool channelsIndependent, bool keepsZero, Tags& out,
                   size_t params = SIZE_MAX) {
    // params: inputs [1, params) are weights or a bias (a conv's residual, input 3, is not).
    for (size_t i = 1; i < std::min(params, node.inputs.size()); ++i)
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
    if (!(in[0].zero() && keepsZero)) out[0].held = in[0].held.finiteOf();
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
      // The mean of a constant is that constant; of a mask over other rows, rows that each keep
      // a different key give a row that keeps none.
      out[o] = t;
      if (t.padded) out[o].held = t.held.isConst() ? Held::constant(t.held.c) : t.held.finiteOf();
      ++o;
    }
  }

  // A normalisation over a padded dim (layer_norm, and softmax without a key mask) would let
  // the padded positions into every real result along it. Geared mode pads a transformer's
  // sequence dim with whatever the padded ids embed to; attention then normalises each query
  // row over all keys. Softmax is legal when an additive key mask hides the padding (the
  // model's own attention mask, zero-padded to 0 = "pad", times -10000 or -inf); layer_norm
  // and mean have no such mask. Otherwise: refuse, naming the op; pad the batch dim, or use
  // exact gears or the dynamic fallback for the sequence dim.
  void refuseReducedPadded(NodeId n, const Node& node, int d, std::string_view what) {
    const Tag& t = tags_[node.inputs[0]][d];
    if (t.padded)
      refuse(n, t,
             fmt::format("{} dim {} is padded and {}, so the padded positions would enter every "
                         "real result along it (no key mask can hide them there)",
                         label(node, 0), d, what));
  }

  // Softmax along `axis`: a padded axis must hold masked scores, whose weights are then exactly
  // 0 (exp underflows; see kMaskFloor); the other padded dims hold probabilities, finite unless
  // their rows held masked scores (all keys -inf) or non-finite ones.
  void visitSoftmax(NodeId n, const Node& node, Tags& out) {
    const ValueId in = node.inputs[0];
    const int r = rank(in);
    const int64_t a = node.attrs.i(attr::Softmax::axis);
    const int d = static_cast<int>(a < 0 ? a + r : a);
    const Tag& t = tags_[in][d];
    if (t.padded && !t.held.hidden())
      refuse(n, t,
             fmt::format("{} dim {} is padded and softmax normalises along it, but its padding "
                         "holds {}, not scores hidden by an additive key mask (<= {}: the model's "
                         "0/1 attention mask, zero-padded, as (1 - mask) * -10000), so the padded "
                         "positions would enter every real result along it",
                         label(node, 0), d, describe(t.held), kMaskFloor));
    out = tags_[in];
    // A padded row (batch, query) whose every key is masked is NaN under a -inf mask (0 / 0).
    for (Tag& o : out) o.held = o.held.isFinite() ? Held::finite() : Held::any();
    if (t.padded) out[d].held = Held::constant(0);
  }

  // Attention: what its unfused chain (matmul, scale, mask add, softmax, matmul) would allow.
  // The head size D is contracted in q k^T: padded in both q and k with one side still zero
  // there, or in neither, as matmul's K. The keys S_k are what the softmax normalises over:
  // padded in k and v only with the mask padded there too and hiding them (its padding a
  // constant <= kMaskFloor or masked scores), as softmax requires. The batch dims and the query
  // rows S_q are independent items and rows, padded in the output where any operand pads them
  // (finite: a softmax row sums to 1). D_v comes from v: P v of a zero column of v is zero.
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
      if (!(dq.zero() && dk.held.isFinite()) && !(dk.zero() && dq.held.isFinite()))
        refuse(n, dq.zero() ? dk : dq,
               fmt::format("the head size D is padded in q and k but neither's padding is zero "
                           "against a finite other ({} holds {}, {} holds {}), so it would add "
                           "to the real scores",
                           label(node, 0), describe(dq.held), label(node, 1), describe(dk.held)));
      tie(n, dq, dk);
    }
    // The keys: k and v's rows, the mask's last dim (right-aligned with the scores' S_k).
    const bool hasMask = node.inputs.size() == 4;
    const ValueId mask = hasMask ? node.inputs[3] : ValueId{-1};
    const int rm = hasMask ? rank(mask) : 0;
    const Tag maskKeys = rm >= 1 ? tags_[mask][rm - 1] : Tag{};
    const Tag& kk = tags_[k][r - 2];
    const Tag& kv = tags_[v][r - 2];
    if (maskKeys.padded && !kk.padded)
      refuse(n, maskKeys,
             fmt::format("{} is padded along the keys but {} is not: a mask of real size 1 "
                         "broadcasts over every key, padded it would not",
                         label(node, 3), label(node, 1)));
    if (kk.padded != kv.padded)
      refuse(n, kk.padded ? kk : kv,
             fmt::format("the keys S_k are padded in {} but not in {}",
                         kk.padded ? label(node, 1) : label(node, 2),
                         kk.padded ? label(node, 2) : label(node, 1)));
    if (kk.padded) {
      const bool hidden = maskKeys.padded && maskKeys.held.hidden();
      if (!hidden)
        refuse(n, kk,
               fmt::format("{} dim {} is padded and holds the keys S_k, which the attention's "
                           "softmax normalises over, and {}, so the padded keys would enter "
                           "every real result",
                           label(node, 1), r - 2,
                           !hasMask ? "there is no mask to hide them"
                           : !maskKeys.padded
                               ? "the mask is not padded there to hide them"
                               : fmt::format("the mask's padding holds {}, not a key mask",
                                             describe(maskKeys.held))));
      // Masked keys weigh 0 and 0 * v adds nothing only for finite v (and finite scores).
      for (const auto& [t, i] : {std::pair<const Tag&, size_t>{kk, 1}, {kv, 2}})
        if (!t.held.isFinite())
          refuse(n, t,
                 fmt::format("{} is padded along the keys and its padding holds {}; a masked "
                             "key's weight 0 times it would not be 0",
                             label(node, i), describe(t.held)));
      tie(n, kk, kv);
      tie(n, kk, maskKeys);
    }
    out = Tags{};
    for (int d = 0; d < r - 1; ++d) {
      // q, k and v share the batch dims (padded alike); only q has S_q. The mask's dim, right
      // aligned, follows add's rule against the scores' dim.
      const Tag& tq = tags_[q][d];
      if (d < r - 2)
        for (size_t i = 1; i < 3; ++i)
          if (tags_[node.inputs[i]][d].padded != tq.padded)
            refuse(n, tq.padded ? tq : tags_[node.inputs[i]][d],
                   fmt::format("batch dim {} is padded in {} but not in {}", d,
                               tq.padded ? label(node, 0) : label(node, i),
                               tq.padded ? label(node, i) : label(node, 0)));
      const int j = d - (r - rm);
      const bool maskHasDim = hasMask && j >= 0;
      const Tag tm = maskHasDim ? tags_[mask][j] : Tag{};
      if (tm.padded && !tq.padded)
        refuse(
            n, tm,
            fmt::format("{} dim {} is padded but the scores' dim {} is not", label(node, 3), j, d));
      if (tq.padded && maskHasDim && !tm.padded && shape(mask)[j] != 1)
        refuse(n, tq,
               fmt::format("{} dim {} is padded but {} dim {} (size {}) is not; padded positions "
                           "would combine with real ones",
                           label(node, 0), d, label(node, 3), j, dimToString(shape(mask)[j])));
      if (!tq.padded) continue;
      bool any = tq.held.fill == Fill::kAny;
      for (size_t i = 1; i < 3 && d < r - 2; ++i) {
        tie(n, tq, tags_[node.inputs[i]][d]);
        any = any || tags_[node.inputs[i]][d].held.fill == Fill::kAny;
      }
      if (tm.padded) {
        tie(n, tq, tm);
        any = any || !tm.held.isFinite();
      }
      out[d] = like(tq, any ? Held::any() : Held::finite());
    }
    out[r - 1] = tags_[v][r - 1];
    if (out[r - 1].padded && !out[r - 1].zero()) out[r - 1].held = out[r - 1].held.finiteOf();
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
    // (x - mean) * rstd * scale + bias: finite for a finite row (rstd of a constant row is
    // 1 / sqrt(eps)).
    for (Tag& t : out) t.held = t.held.finiteOf();
  }

  // ReduceSum: a padded dim may be summed only while its padding is still zero (zeros add
  // nothing, as for matmul's K); the output is then real there. A kept padded dim sums what
  // its padding holds, and the doubly padded corner where a summed dim is padded too.
  void visitReduceSum(NodeId n, const Node& node, Tags& out) {
    const ValueId in = node.inputs[0];
    const int r = rank(in);
    bool reduced[kMaxRank] = {};
    for (int64_t a : node.attrs.ints(attr::ReduceSum::axes)) reduced[a < 0 ? a + r : a] = true;
    const bool keep = node.attrs.i(attr::ReduceSum::keepdims) == 1;
    bool sumsPadding = false;
    for (int d = 0; d < r; ++d) {
      const Tag& t = tags_[in][d];
      // Two summed padded dims bring in their doubly padded corner, which is not followed
      // (zero along each dim alone says nothing of it: an identity matrix).
      if (reduced[d] && t.padded && sumsPadding)
        refuse(n, t,
               fmt::format("{} dim {} is padded and reduce_sum adds it up together with another "
                           "padded dim, whose shared padded corner is not known to be zero",
                           label(node, 0), d));
      sumsPadding = sumsPadding || (reduced[d] && t.padded);
    }
    int o = 0;
    for (int d = 0; d < r; ++d) {
      const Tag& t = tags_[in][d];
      if (reduced[d]) {
        if (t.padded && !t.zero())
          refuse(n, t,
                 fmt::format("{} dim {} is padded and reduce_sum adds it up, but its padding "
                             "holds {}, not zeros (an op before wrote into it)",
                             label(node, 0), d, describe(t.held)));
        if (keep) ++o;
        continue;
      }
      out[o] = t;
      // A sum of real data: no longer a data-derived constant (its kept-key value is lost).
      if (t.padded) out[o].held = !sumsPadding && t.zero() ? Held::constant(0) : t.held.finiteOf();
      ++o;
    }
  }

  // Where: add's rule over three operands for the shapes; a padded position holds x's or y's
  // value there, whichever the condition picks.
  void visitWhere(NodeId n, const Node& node, Tags& out) {
    const ValueId c = node.inputs[0], x = node.inputs[1], y = node.inputs[2];
    Tags cx{};
    broadcast(n, 0, tags_[c], rank(c), shape(c), realHeld(c), 1, tags_[x], rank(x), shape(x),
              realHeld(x), joinHeld, cx);
    // Shapes of c and x broadcast: the rank is the larger one, sizes come from inference.
    const int rcx = std::max(rank(c), rank(x));
    Shape scx;
    for (int i = 0; i < rcx; ++i) {
      const int kc = i - (rcx - rank(c)), kx = i - (rcx - rank(x));
      const int64_t dc = kc >= 0 ? shape(c)[kc] : 1, dx = kx >= 0 ? shape(x)[kx] : 1;
      scx.push(dc == 1 ? dx : dc);
    }
    broadcast(n, 1, cx, rcx, scx, Held::finite(), 2, tags_[y], rank(y), shape(y), realHeld(y),
              joinHeld, out);
    const int r = rank(node.output);
    for (int i = 0; i < r; ++i)
      if (out[i].padded) out[i].held = joinHeld(heldAt(x, i, r), heldAt(y, i, r));
  }

  // Expand: x's dims keep their tags at their (right-aligned) positions. A dim x broadcasts
  // (size 1) to a padded input dim's symbol becomes padded there, holding copies of x's real
  // values: its first (real size) positions are what the unpadded run computes. An
  // expression of a padded symbol (S + 1) is refused: its real size is not the input's.
  void visitExpand(NodeId n, const Node& node, Tags& out) {
    const ValueId in = node.inputs[0];
    const int r = rank(node.output), ri = rank(in);
    for (int i = 0; i < r; ++i) {
      const int k = i - (r - ri);
      if (k >= 0) out[i] = tags_[in][k];
      const int64_t od = shape(node.output)[i];
      // A padded dim of x must stay itself: another target size means x's dim broadcasts when
      // its real size is 1, which its padded size is not.
      if (out[i].padded && shape(in)[k] != od)
        refuse(n, out[i],
               fmt::format("{} dim {} is padded and expand makes it {}, which a real size of 1 "
                           "would broadcast to and the padded size cannot",
                           label(node, 0), k, dimToString(od)));
      if (out[i].padded || !isSymbolDim(od)) continue;
      // An output dim named by a padded input dim's symbol that x does not carry.
      const auto e = dimExpr(od);
      for (size_t gi = 0; gi < g_.inputs.size() && !out[i].padded; ++gi) {
        const Shape& decl = g_.value(g_.inputs[gi]).type.shape;
        for (int j = 0; j < decl.rank(); ++j) {
          const Tag& src = tags_[g_.inputs[gi]][j];
          if (!src.padded) continue;
          if (decl[j] == od) {
            out[i] = like(src, realHeld(in));
            break;
          }
          if (e && decl[j] == e->base)
            refuse(n, src,
                   fmt::format("expand makes dim {} of size {} from {}'s size-1 dim; that size "
                               "is an expression of the padded dim, whose real size the padding "
                               "plan cannot follow",
                               i, dimToString(od), label(node, 0)));
        }
      }
    }
  }

  // Trilu keeps element (i, j) when j <= i + k (lower) or j >= i + k (upper), else writes 0.
  // Padding sits at the end of each dim, so real (i, j) keep their values. With rows and
  // columns padded from one input dim (one real size S), a padded column j >= S of a real row
  // i < S is zeroed by lower with k <= 0 (j > i + k), and a padded row of real columns is
  // zeroed by upper with k >= 0; lower with k >= -1 keeps a padded row's real columns, upper
  // with k <= 1 a real row's padded columns. A causal mask triu(big, 1) of a constant
  // big <= kMaskFloor keeps big on every real row's padded columns and 0 on its diagonal, so
  // those columns are a key mask. Other padded positions (and other padded dims, batch ones)
  // mix x and 0.
  void visitTrilu(const Node& node, Tags& out) {
    const ValueId in = node.inputs[0];
    const int r = rank(in);
    out = tags_[in];
    const bool upper = node.attrs.i(attr::Trilu::upper) != 0;
    const int64_t k = node.attrs.i(attr::Trilu::k);
    auto mixed = [](Tag& t) {
      if (t.padded && !t.zero()) t.held = joinHeld(t.held, Held::constant(0));
    };
    for (int d = 0; d < r - 2; ++d) mixed(out[d]);
    Tag& rows = out[r - 2];
    Tag& cols = out[r - 1];
    const bool square =
        rows.padded && cols.padded && rows.origin == cols.origin && rows.offset == cols.offset;
    if (!square) {
      mixed(rows);
      mixed(cols);
      return;
    }
    if (upper) {
      if (k >= 0)
        rows.held = Held::constant(0);
      else
        mixed(rows);
      if (k == 1 && cols.held.isConst() && cols.held.c <= kMaskFloor)
        cols.held = Held::keyMask(cols.held.c);
      else if (k != 1 || !cols.held.isConst())
        mixed(cols);
    } else {
      if (k <= 0)
        cols.held = Held::constant(0);
      else
        mixed(cols);
      if (k < -1) mixed(rows);
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
      out[o++] = t.padded ? like(t, Held::finite()) : Tag{};
    }
    for (int d = axis + 1; d < r && o < kMaxRank; ++d) out[o++] = tags_[data][d];
  }

  // An elementwise f: every padded dim keeps its tag, holding f of what it held.
  template <typename F>
  void unary(const Node& node, Tags& out, F f) {
    out = tags_[node.inputs[0]];
    for (Tag& t : out)
      if (t.padded) t.held = f(t.held);
  }

  void visit(NodeId n) {
    const Node& node = g_.node(n);
    Tags out{};
    switch (node.kind) {
      case OpKind::kConst: break;
      case OpKind::kAdd: binary(n, node, addHeld, out); break;
      case OpKind::kSub: binary(n, node, subHeld, out); break;
      case OpKind::kMul: binary(n, node, mulHeld, out); break;
      case OpKind::kDiv: binary(n, node, divHeld, out); break;
      case OpKind::kPow: binary(n, node, powHeld, out); break;
      case OpKind::kRelu:
        unary(node, out, [](Held h) {
          if (h.fill == Fill::kConst) return Held::constant(std::max(h.c, 0.0));
          return h.fill == Fill::kAny ? h : Held::finite();  // relu(-inf) = 0
        });
        break;
      case OpKind::kClip: {
        const double lo = node.attrs.f(attr::Clip::min), hi = node.attrs.f(attr::Clip::max);
        unary(node, out, [lo, hi](Held h) {
          if (h.fill == Fill::kConst) return Held::constant(std::min(std::max(h.c, lo), hi));
          if (h.hidden() && std::isfinite(lo)) return Held::finite();
          return h.finiteOf();
        });
        break;
      }
      case OpKind::kSigmoid:
        unary(node, out, [](Held h) {
          if (h.fill == Fill::kConst) return Held::constant(1.0 / (1.0 + std::exp(-h.c)));
          return h.fill == Fill::kAny ? h : Held::finite();
        });
        break;
      case OpKind::kSqrt:
        unary(node, out, [](Held h) {
          if (h.fill == Fill::kConst && h.c >= 0) return Held::constant(std::sqrt(h.c));
          return Held::any();  // sqrt of a negative is NaN
        });
        break;
      case OpKind::kErf:
      case OpKind::kTanh: {
        const bool erf = node.kind == OpKind::kErf;
        unary(node, out, [erf](Held h) {
          if (h.fill == Fill::kConst) return Held::constant(erf ? std::erf(h.c) : std::tanh(h.c));
          return h.fill == Fill::kAny ? h : Held::finite();  // erf(-inf) = tanh(-inf) = -1
        });
        break;
      }
      case OpKind::kGelu:
        // gelu(0) = 0; x * Phi(x) is NaN at -inf, so a mask is not finite through it.
        unary(node, out, [](Held h) { return h.zero() ? h : h.finiteOf(); });
        break;
      case OpKind::kCast: {
        const bool toFloat = node.attrs.i(attr::Cast::to) == 1;
        unary(node, out, [toFloat](Held h) {
          auto cast = [toFloat](double x) {
            return toFloat ? static_cast<double>(static_cast<float>(x)) : std::trunc(x);
          };
          // A cast keeps a data-derived constant data-derived (HF casts its int mask).
          if (h.fill == Fill::kConst && std::isfinite(h.c))
            return Held::constant(cast(h.c), h.own() ? cast(h.keep) : h.keep);
          return h.finiteOf();
        });
        break;
      }
      case OpKind::kFlatten: visitFlatten(n, node, out); break;
      case OpKind::kSqueeze: visitSqueeze(n, node, out); break;
      case OpKind::kUnsqueeze: visitUnsqueeze(node, out); break;
      case OpKind::kSlice: visitSlice(n, node, out); break;
      case OpKind::kPad: visitPad(n, node, out); break;
      case OpKind::kBatchNorm: visitBatchNorm(n, node, out); break;
      case OpKind::kTranspose: visitTranspose(node, out); break;
      case OpKind::kReshape: visitReshape(n, node, out); break;
      case OpKind::kIndexSelect: visitIndexSelect(n, node, out); break;
      case OpKind::kCat: visitCatInputs(n, node, node.inputs.size(), true, out); break;
      case OpKind::kConv2d: {
        // Zero images stay zero only without a bias, and when the fused clamp keeps 0.
        const double lo = node.attrs.f(attr::Conv2d::act_min),
                     hi = node.attrs.f(attr::Conv2d::act_max);
        visitWindow(n, node, false, node.inputs.size() == 2 && lo <= 0.0 && hi >= 0.0, out, 3);
        // A residual (fuse-conv-residual) is added to the sums as an add would be, then the
        // clamp (the window walk already knows a clamp without one).
        if (node.inputs.size() == 4) visitEpilogue(n, node, 3, lo, hi, out);
        break;
      }
      case OpKind::kMatMul: {
        visitMatMul(n, node, out);
        // The fused epilogue (fuse-matmul-epilogue): the [N] bias and the residual are added as
        // adds would be, then the clamp.
        namespace am = attr::MatMul;
        auto bound = [&](int slot, double unset) {
          return node.attrs.has(slot) ? node.attrs.f(slot) : unset;
        };
        const double inf = std::numeric_limits<double>::infinity();
        visitEpilogue(n, node, 2, bound(am::act_min, -inf), bound(am::act_max, inf), out);
        break;
      }
      case OpKind::kMaxPool2d:
      case OpKind::kAvgPool2d: visitWindow(n, node, true, true, out); break;
      case OpKind::kMean: visitMean(n, node, out); break;
      case OpKind::kTrilu: visitTrilu(node, out); break;
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
        visitCatInputs(n, node, data, false, out);
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
