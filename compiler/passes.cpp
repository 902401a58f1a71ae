#include "compiler/passes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "graph/error.h"
#include "graph/ops/slice.h"

namespace gearbox {

// ---- graph surgery --------------------------------------------------------------------------

void removeNodes(Graph& g, const std::vector<bool>& keep) {
  assert(keep.size() == g.nodes.size());
  std::vector<NodeId> newNode(g.nodes.size(), kNoNode);
  NodeId nextNode = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (keep[i]) newNode[i] = nextNode++;

  // A value survives when it is a graph input (or otherwise producer-less) or its producer
  // survives; survivors keep their relative order, so printing stays stable.
  std::vector<ValueId> newValue(g.values.size(), -1);
  std::vector<Value> values;
  values.reserve(g.values.size());
  for (size_t v = 0; v < g.values.size(); ++v) {
    const NodeId p = g.values[v].producer;
    if (p != kNoNode && !keep[p]) continue;
    newValue[v] = static_cast<ValueId>(values.size());
    values.push_back(std::move(g.values[v]));
    values.back().producer = p == kNoNode ? kNoNode : newNode[p];
  }

  auto remap = [&](ValueId v) {
    assert(newValue[v] >= 0 && "a kept node or output uses a removed value");
    return newValue[v];
  };
  std::vector<Node> nodes;
  nodes.reserve(static_cast<size_t>(nextNode));
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!keep[i]) continue;
    Node n = std::move(g.nodes[i]);
    for (ValueId& v : n.inputs) v = remap(v);
    n.output = remap(n.output);
    nodes.push_back(std::move(n));
  }
  for (ValueId& v : g.inputs) v = remap(v);
  for (ValueId& v : g.outputs) v = remap(v);
  g.values = std::move(values);
  g.nodes = std::move(nodes);
}

ValueId insertConstBefore(Graph& g, NodeId before, Tensor data, const std::string& name) {
  // Every node from `before` on moves up one place; value ids stay, producers follow.
  for (Value& v : g.values)
    if (v.producer != kNoNode && v.producer >= before) ++v.producer;
  Node n;
  n.kind = OpKind::kConst;
  n.constant = std::make_shared<const Tensor>(std::move(data));
  std::string unique = name;
  for (int i = 2; g.findValue(unique) >= 0; ++i) unique = fmt::format("{}.{}", name, i);
  const ValueId id = static_cast<ValueId>(g.values.size());
  g.values.push_back(Value{unique, TensorType{n.constant->dtype(), n.constant->shape()}, before});
  n.output = id;
  g.nodes.insert(g.nodes.begin() + before, std::move(n));
  return id;
}

namespace {

// "%a, %b, %c"
std::string valueList(const Graph& g, const std::vector<ValueId>& vs) {
  std::string s;
  for (ValueId v : vs) s += (s.empty() ? "%" : ", %") + g.values[v].name;
  return s;
}

}  // namespace

// ---- DCE ------------------------------------------------------------------------------------

bool DeadCodeElimination::run(Graph& g) {
  details_.clear();
  std::vector<bool> liveValue(g.values.size(), false);
  for (ValueId v : g.outputs) liveValue[v] = true;
  // Nodes are in topological order, so one backwards walk sees every user before the node
  // whose value it uses: a node is live exactly when its value is.
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    if (!liveValue[n.output]) continue;
    keep[i] = true;
    for (ValueId v : n.inputs) liveValue[v] = true;
  }
  std::vector<ValueId> removed;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!keep[i]) removed.push_back(g.nodes[i].output);
  if (removed.empty()) return false;
  details_.push_back(fmt::format("removed {} ({} node{})", valueList(g, removed), removed.size(),
                                 removed.size() == 1 ? "" : "s"));
  removeNodes(g, keep);
  return true;
}

// ---- Cat + IndexSelect fusion ---------------------------------------------------------------

bool CatIndexSelectFusion::run(Graph& g) {
  details_.clear();
  // Users per value, computed once. Rewrites only add uses of a Cat's inputs, which precede
  // the Cat in topological order and so have already been considered when the Cat is: the
  // lists can only be stale towards "more users than now", never towards fusing wrongly.
  std::vector<std::vector<NodeId>> users(g.values.size());
  for (NodeId i = 0; i < static_cast<NodeId>(g.nodes.size()); ++i)
    for (ValueId v : g.nodes[i].inputs) users[v].push_back(i);
  std::vector<bool> returned(g.values.size(), false);
  for (ValueId v : g.outputs) returned[v] = true;

  bool changed = false;
  for (NodeId c = 0; c < static_cast<NodeId>(g.nodes.size()); ++c) {
    const Node& cat = g.nodes[c];
    if (cat.kind != OpKind::kCat || !cat.attrs.dim || cat.inputs.empty()) continue;
    const ValueId cv = cat.output;
    // A returned Cat must be materialised anyway, so fusing would only add copies.
    if (returned[cv] || users[cv].empty()) continue;
    const Shape& catShape = g.values[cv].type.shape;
    const int catDim = catShape.wrapDim(*cat.attrs.dim, g.describeNode(c));
    bool fusable = true;
    for (NodeId u : users[cv]) {
      const Node& use = g.nodes[u];
      // The Cat must be the data operand only: a Cat of index tensors used as an index is
      // not a channel gather.
      // An index_select with wrap=1 (negative indices count from the end) stays: cat_gather
      // takes indices in [0, total) only.
      fusable = use.kind == OpKind::kIndexSelect && use.attrs.dim && use.inputs.size() == 2 &&
                use.attrs.i(attr::IndexSelect::wrap) == 0 && use.inputs[0] == cv &&
                use.inputs[1] != cv &&
                catShape.wrapDim(*use.attrs.dim, g.describeNode(u)) == catDim;
      if (!fusable) break;
    }
    if (!fusable) continue;

    std::vector<ValueId> fused;
    for (NodeId u : users[cv]) {
      Node& use = g.nodes[u];
      std::vector<ValueId> inputs = cat.inputs;
      inputs.push_back(use.inputs[1]);
      use.kind = OpKind::kCatGather;
      use.inputs = std::move(inputs);
      use.attrs = Attrs{catDim};  // cat_gather's own attributes: dim only (wrap=0 checked above)
      // The output type is unchanged in meaning; re-inferring it keeps the declared type
      // exactly what verification will infer (symbolic dims included).
      std::vector<TensorType> types;
      for (ValueId v : use.inputs) types.push_back(g.values[v].type);
      g.values[use.output].type =
          inferNode(InferContext{use.kind, types, use.attrs, &g, u, {}, &use});
      fused.push_back(use.output);
    }
    details_.push_back(fmt::format("fused %{} + {}", g.values[cv].name, valueList(g, fused)));
    changed = true;
  }
  return changed;
}

// ---- channel shuffle -> index_select -----------------------------------------------------------

namespace {

// Users per value.
std::vector<std::vector<NodeId>> usersOf(const Graph& g) {
  std::vector<std::vector<NodeId>> users(g.values.size());
  for (NodeId i = 0; i < static_cast<NodeId>(g.nodes.size()); ++i)
    for (ValueId v : g.nodes[i].inputs) users[v].push_back(i);
  return users;
}

// A value that is used once, by node `user`, and not returned.
bool onlyFeeds(const Graph& g, const std::vector<std::vector<NodeId>>& users,
               const std::vector<bool>& returned, ValueId v, NodeId user) {
  return !returned[v] && users[v].size() == 1 && users[v][0] == user;
}

}  // namespace

bool ChannelShuffleToIndexSelect::run(Graph& g) {
  details_.clear();
  const auto users = usersOf(g);
  std::vector<bool> returned(g.values.size(), false);
  for (ValueId v : g.outputs) returned[v] = true;
  bool changed = false;
  // The transposes are removed at the end: verification runs right after the pass.
  std::vector<bool> keep(g.nodes.size(), true);
  for (NodeId n2 = 0; n2 < static_cast<NodeId>(g.nodes.size()); ++n2) {
    // Walk back from the closing reshape: r2 = reshape(t), t = transpose(r1), r1 = reshape(x).
    const Node& back = g.nodes[n2];
    if (back.kind != OpKind::kReshape) continue;
    const ValueId tv = back.inputs[0];
    const NodeId nt = g.values[tv].producer;
    if (nt == kNoNode || g.nodes[nt].kind != OpKind::kTranspose) continue;
    const ValueId r1v = g.nodes[nt].inputs[0];
    const NodeId n1 = g.values[r1v].producer;
    if (n1 == kNoNode || g.nodes[n1].kind != OpKind::kReshape) continue;
    if (!onlyFeeds(g, users, returned, tv, n2) || !onlyFeeds(g, users, returned, r1v, nt)) continue;
    const ValueId xv = g.nodes[n1].inputs[0];
    const Shape& x = g.values[xv].type.shape;
    const Shape& split = g.values[r1v].type.shape;
    const Shape& joined = g.values[back.output].type.shape;
    const Shape& perm = *g.nodes[nt].attrs.perm;
    // x [A, C, R...] -> [A, G, C / G, R...] -> swap dims 1 and 2 -> [A, C, R...] again, with
    // C static (the permutation is a constant) and every other dim carried through unchanged.
    const int r = x.rank();
    if (r < 2 || split.rank() != r + 1 || joined != x || !isStaticDim(x[1])) continue;
    const int64_t groups = split[1], per = split[2];
    if (!isStaticDim(groups) || !isStaticDim(per) || groups < 1 || groups * per != x[1]) continue;
    bool carried = split[0] == x[0];
    for (int d = 2; d < r; ++d) carried = carried && split[d + 1] == x[d];
    bool swap12 = perm.rank() == r + 1 && perm[0] == 0 && perm[1] == 2 && perm[2] == 1;
    for (int d = 3; d < perm.rank() && swap12; ++d) swap12 = perm[d] == d;
    if (!carried || !swap12) continue;

    // Output channel j = c * G + gi reads input channel gi * (C / G) + c.
    const int64_t channels = x[1];
    auto index = std::make_shared<Tensor>(DType::kI64, Shape{channels});
    for (int64_t j = 0; j < channels; ++j)
      index->as<int64_t>()[j] = (j % groups) * per + j / groups;
    // The first reshape becomes the index constant (it precedes the closing reshape, so the
    // order stays topological); the transpose goes.
    Node& first = g.nodes[n1];
    first.kind = OpKind::kConst;
    first.inputs.clear();
    first.attrs = Attrs{};
    first.constant = index;
    first.constPath.clear();
    g.values[r1v].type = TensorType{DType::kI64, Shape{channels}};
    const std::string wanted = g.values[back.output].name + ".shuffle";
    if (g.findValue(wanted) < 0) g.values[r1v].name = wanted;
    Node& last = g.nodes[n2];
    last.kind = OpKind::kIndexSelect;
    last.inputs = {xv, r1v};
    last.attrs = Attrs{};
    last.attrs.dim = 1;
    details_.push_back(
        fmt::format("%{}: channel shuffle of %{} in {} groups -> index_select(dim=1)",
                    g.values[back.output].name, g.values[xv].name, groups));
    keep[nt] = false;
    changed = true;
  }
  if (changed) removeNodes(g, keep);
  return changed;
}

// ---- a gather followed by slices: gathers of the slices -------------------------------------

bool SliceOfIndexSelect::run(Graph& g) {
  details_.clear();
  std::vector<bool> returned(g.values.size(), false);
  for (ValueId v : g.outputs) returned[v] = true;
  bool changed = false;
  for (NodeId n = 0; n < static_cast<NodeId>(g.nodes.size()); ++n) {
    const Node& gather = g.nodes[n];
    if (gather.kind != OpKind::kIndexSelect || returned[gather.output]) continue;
    const ValueId idxV = gather.inputs[1];
    const NodeId idxN = g.values[idxV].producer;
    if (idxN == kNoNode || g.nodes[idxN].kind != OpKind::kConst || !g.nodes[idxN].constant)
      continue;
    // Copies: inserting constants below grows the value and node vectors.
    const Shape shape = g.values[gather.output].type.shape;
    const int dim = shape.wrapDim(*gather.attrs.dim, g.describeNode(n));
    const std::vector<NodeId> users = usersOf(g)[gather.output];
    if (users.empty()) continue;
    // Every user slices only the gathered dim, forwards, by 1: it reads a contiguous run of the
    // index, which is itself an index.
    std::vector<std::pair<int64_t, int64_t>> runs;
    for (NodeId u : users) {
      const Node& use = g.nodes[u];
      if (use.kind != OpKind::kSlice || use.inputs[0] != g.nodes[n].output ||
          !isStaticDim(shape[dim]))
        break;
      // The slice must name the gathered dim only (the others may be symbolic: they stay whole).
      const auto starts = use.attrs.ints(attr::Slice::starts);
      const auto axes = use.attrs.ints(attr::Slice::axes);
      if (starts.size() != 1) break;
      const int64_t axis = axes.empty() ? 0 : axes[0];
      if ((axis < 0 ? axis + shape.rank() : axis) != dim) break;
      Shape probe = shape;
      for (int d = 0; d < probe.rank(); ++d)
        if (d != dim) probe[d] = 1;
      const auto ranges = resolveSlice(use.attrs, probe);
      if (ranges[dim].step != 1) break;
      runs.emplace_back(ranges[dim].start, ranges[dim].size);
    }
    if (runs.size() != users.size()) continue;
    const Tensor& index = *g.nodes[idxN].constant;
    std::vector<ValueId> rewritten;
    NodeId shift = 0;
    for (size_t i = 0; i < users.size(); ++i) {
      const NodeId u = users[i] + shift;
      Tensor part(index.dtype(), Shape{runs[i].second});
      const size_t esize = dtypeSize(index.dtype());
      std::memcpy(part.data(), static_cast<const char*>(index.data()) + runs[i].first * esize,
                  static_cast<size_t>(runs[i].second) * esize);
      const ValueId pv =
          insertConstBefore(g, u, std::move(part), g.values[g.nodes[u].output].name + ".index");
      ++shift;
      Node& use = g.nodes[u + 1];
      use.kind = OpKind::kIndexSelect;
      use.inputs = {g.nodes[n].inputs[0], pv};
      use.attrs = g.nodes[n].attrs;  // the gather's wrap rule holds for every part of its index
      use.attrs.dim = dim;
      rewritten.push_back(use.output);
    }
    details_.push_back(fmt::format("%{} sliced {} ways -> {}", g.values[g.nodes[n].output].name,
                                   rewritten.size(), valueList(g, rewritten)));
    changed = true;
  }
  return changed;
}

// ---- batch_norm folded into the conv before it ---------------------------------------------

bool FoldBatchNormIntoConv::run(Graph& g) {
  details_.clear();
  std::vector<bool> returned(g.values.size(), false);
  for (ValueId v : g.outputs) returned[v] = true;
  auto constOf = [&](ValueId v) -> const Tensor* {
    const NodeId p = g.values[v].producer;
    if (p == kNoNode || g.nodes[p].kind != OpKind::kConst || !g.nodes[p].constant) return nullptr;
    return g.nodes[p].constant.get();
  };
  bool changed = false;
  for (NodeId b = 0; b < static_cast<NodeId>(g.nodes.size()); ++b) {
    if (g.nodes[b].kind != OpKind::kBatchNorm) continue;
    const ValueId cv = g.nodes[b].inputs[0];
    const NodeId c = g.values[cv].producer;
    if (c == kNoNode || g.nodes[c].kind != OpKind::kConv2d || returned[cv] ||
        usersOf(g)[cv].size() != 1)
      continue;
    const Node& conv = g.nodes[c];
    const Tensor* w = constOf(conv.inputs[1]);
    const Tensor* bias = conv.inputs.size() == 3 ? constOf(conv.inputs[2]) : nullptr;
    // A conv with a residual (fuse-conv-residual) has its epilogue: batch norm stays apart.
    if (!w || (conv.inputs.size() == 3 && !bias) || conv.inputs.size() > 3) continue;
    const Tensor* p[4];
    bool allConst = true;
    for (int k = 0; k < 4; ++k) allConst = allConst && (p[k] = constOf(g.nodes[b].inputs[1 + k]));
    if (!allConst) continue;
    const int64_t m = w->shape()[0], per = w->numel() / std::max<int64_t>(m, 1);
    const double eps = g.nodes[b].attrs.f(attr::BatchNorm::epsilon);
    // y = (conv(x) - mean) / sqrt(var + eps) * scale + beta = conv'(x): each output channel's
    // weights scale by s = scale / sqrt(var + eps), and the bias becomes (b - mean) * s + beta.
    Tensor w2(DType::kF32, w->shape()), b2(DType::kF32, Shape{m});
    for (int64_t o = 0; o < m; ++o) {
      const double sc = p[0]->as<float>()[o] / std::sqrt(double{p[3]->as<float>()[o]} + eps);
      for (int64_t i = 0; i < per; ++i)
        w2.as<float>()[o * per + i] = static_cast<float>(w->as<float>()[o * per + i] * sc);
      const double b0 = bias ? bias->as<float>()[o] : 0.0;
      b2.as<float>()[o] =
          static_cast<float>((b0 - p[2]->as<float>()[o]) * sc + p[1]->as<float>()[o]);
    }
    const ValueId x = conv.inputs[0];
    const Attrs convAttrs = conv.attrs;
    const std::string bnName = g.values[g.nodes[b].output].name;
    const ValueId wv = insertConstBefore(g, b, std::move(w2), bnName + ".weight");
    const ValueId bv = insertConstBefore(g, b + 1, std::move(b2), bnName + ".bias");
    Node& bn = g.nodes[b + 2];
    bn.kind = OpKind::kConv2d;
    bn.inputs = {x, wv, bv};
    bn.attrs = convAttrs;
    details_.push_back(fmt::format("folded %{} into %{}", bnName, g.values[cv].name));
    changed = true;
    b += 2;
  }
  return changed;
}

namespace {

// Node `t` (an activation or an add after conv `conv`, whose value is `cv`) becomes the conv (or
// the matmul)
// with `inputs` and `attrs`; its value, name and position stay, the old conv is left for DCE.
// Returns the pass's detail line.
std::string becomeConv(const Graph& g, Node& t, const Node& conv, std::vector<ValueId> inputs,
                       Attrs attrs, std::string_view what, ValueId cv) {
  t.kind = conv.kind;  // conv2d, or matmul (fuse-matmul-epilogue)
  t.inputs = std::move(inputs);
  t.attrs = std::move(attrs);
  // Errors about the node (a padded window, a bad shape) are about the conv: its line.
  t.loc = conv.loc;
  return fmt::format("fused %{} ({}) into %{}", g.values[t.output].name, what, g.values[cv].name);
}

}  // namespace

// ---- conv2d + relu / clip -> conv2d with an epilogue -----------------------------------------

bool FuseConvActivation::run(Graph& g) {
  details_.clear();
  std::vector<bool> returned(g.values.size(), false);
  for (ValueId v : g.outputs) returned[v] = true;
  // Users per value, computed once: a rewrite only moves the conv's uses of its own inputs onto
  // the activation node, which every later node's users are unaffected by.
  const std::vector<std::vector<NodeId>> users = usersOf(g);
  bool changed = false;
  for (NodeId a = 0; a < static_cast<NodeId>(g.nodes.size()); ++a) {
    Node& act = g.nodes[a];
    if (act.kind != OpKind::kRelu && act.kind != OpKind::kClip) continue;
    const ValueId cv = act.inputs[0];
    const NodeId c = g.values[cv].producer;
    if (c == kNoNode || g.nodes[c].kind != OpKind::kConv2d || returned[cv] || users[cv].size() != 1)
      continue;
    const Node& conv = g.nodes[c];
    namespace ca = attr::Conv2d;
    // One clamp per conv: a conv that already has one keeps the second activation apart.
    if (!attrIsDefault(OpKind::kConv2d, conv.attrs, ca::act_min) ||
        !attrIsDefault(OpKind::kConv2d, conv.attrs, ca::act_max))
      continue;
    double lo = 0.0, hi = std::numeric_limits<double>::infinity();
    if (act.kind == OpKind::kClip) {
      lo = act.attrs.f(attr::Clip::min);
      hi = act.attrs.f(attr::Clip::max);
    }
    const std::string what(opTextName(act.kind));
    Attrs attrs = conv.attrs;
    attrs.setFloat(ca::act_min, lo);
    attrs.setFloat(ca::act_max, hi);
    details_.push_back(becomeConv(g, act, conv, conv.inputs, std::move(attrs), what, cv));
    changed = true;
  }
  return changed;
}

namespace {

// What the epilogue fusions ask of every value: is it returned, and how many node inputs read
// it. Counted once per pass run: value ids stay when a zero bias is inserted (node ids move).
struct ValueUses {
  std::vector<bool> returned;
  std::vector<int> uses;
  explicit ValueUses(const Graph& g) : returned(g.values.size(), false), uses(g.values.size(), 0) {
    for (ValueId v : g.outputs) returned[v] = true;
    for (const Node& node : g.nodes)
      for (ValueId v : node.inputs) ++uses[static_cast<size_t>(v)];
  }
  // Read once, by the node being rewritten, and not returned.
  bool once(ValueId v) const { return !returned[v] && uses[static_cast<size_t>(v)] == 1; }
};

// A [n] f32 zero constant (NAME.zero_bias) inserted before node `before`, so that a residual
// can be the fourth input of a conv2d or matmul that had no bias; `u` counts its one use.
ValueId insertZeroBias(Graph& g, NodeId before, int64_t n, const std::string& name, ValueUses& u) {
  Tensor zeros(DType::kF32, Shape{n});
  std::fill(zeros.as<float>(), zeros.as<float>() + n, 0.0f);
  const ValueId bv = insertConstBefore(g, before, std::move(zeros), name + ".zero_bias");
  u.uses.push_back(1);
  u.returned.push_back(false);
  return bv;
}

}  // namespace

// ---- conv2d + add [+ relu / clip] -> conv2d with a residual ---------------------------------

bool FuseConvResidual::run(Graph& g) {
  details_.clear();
  ValueUses vu(g);
  namespace ca = attr::Conv2d;
  auto fusable = [&](ValueId cv) {
    const NodeId c = g.values[cv].producer;
    if (c == kNoNode || g.nodes[c].kind != OpKind::kConv2d || !vu.once(cv)) return false;
    const Node& conv = g.nodes[c];
    // One epilogue per conv: a clamp already there comes before any add, a residual is one.
    return conv.inputs.size() <= 3 && attrIsDefault(OpKind::kConv2d, conv.attrs, ca::act_min) &&
           attrIsDefault(OpKind::kConv2d, conv.attrs, ca::act_max);
  };
  bool changed = false;
  for (NodeId a = 0; a < static_cast<NodeId>(g.nodes.size()); ++a) {
    if (g.nodes[a].kind != OpKind::kAdd) continue;
    const ValueId u = g.nodes[a].inputs[0], v = g.nodes[a].inputs[1];
    // The conv's output on either side; the other the residual, of the output's very type.
    const bool left = fusable(u) && u != v;
    const ValueId cv = left ? u : v, res = left ? v : u;
    if (!left && !(fusable(v) && u != v)) continue;
    const TensorType& ct = g.values[cv].type;
    if (!(g.values[res].type == ct) || !(g.values[g.nodes[a].output].type == ct) ||
        ct.dtype != DType::kF32 || ct.shape.rank() != 4)
      continue;
    NodeId c = g.values[cv].producer;
    // A bias to put the residual after: zeros where the conv has none (output channels known).
    if (g.nodes[c].inputs.size() == 2) {
      const int64_t m = ct.shape[1];
      if (!isStaticDim(m)) continue;
      const ValueId bv = insertZeroBias(g, c, m, g.values[cv].name, vu);
      ++c;
      ++a;
      g.nodes[c].inputs.push_back(bv);
    }
    // The activation after the add, where the add's output feeds only it.
    const ValueId av = g.nodes[a].output;
    NodeId target = a;
    double lo = -std::numeric_limits<double>::infinity(), hi = -lo;
    if (vu.once(av)) {
      for (NodeId k = a + 1; k < static_cast<NodeId>(g.nodes.size()); ++k) {
        const Node& user = g.nodes[k];
        if (std::find(user.inputs.begin(), user.inputs.end(), av) == user.inputs.end()) continue;
        if (user.kind == OpKind::kRelu) {
          target = k;
          lo = 0.0;
        } else if (user.kind == OpKind::kClip) {
          target = k;
          lo = user.attrs.f(attr::Clip::min);
          hi = user.attrs.f(attr::Clip::max);
        }
        break;
      }
    }
    const Node& conv = g.nodes[c];
    Node& t = g.nodes[target];
    const std::string what =
        target == a ? std::string("add") : fmt::format("add, {}", opTextName(t.kind));
    Attrs attrs = conv.attrs;
    if (target != a) {
      attrs.setFloat(ca::act_min, lo);
      attrs.setFloat(ca::act_max, hi);
    }
    std::vector<ValueId> inputs = conv.inputs;
    inputs.push_back(res);
    // The old conv and add lose their uses (DCE removes them); the residual keeps its one.
    vu.uses[static_cast<size_t>(cv)] = 0;
    details_.push_back(becomeConv(g, t, conv, std::move(inputs), std::move(attrs), what, cv));
    changed = true;
  }
  return changed;
}

// ---- matmul + add [+ add] [+ relu / clip] -> matmul with an epilogue ------------------------

namespace {

// A matmul without an epilogue: two inputs, no clamp (act_min / act_max have no default: set
// means clamped).
bool isPlainMatMul(const Node& n) {
  namespace am = attr::MatMul;
  return n.kind == OpKind::kMatMul && n.inputs.size() == 2 && !n.attrs.has(am::act_min) &&
         !n.attrs.has(am::act_max);
}

}  // namespace

bool FuseMatMulEpilogue::run(Graph& g) {
  details_.clear();
  ValueUses vu(g);
  namespace am = attr::MatMul;
  // A matmul (plain, or with the epilogue folded in so far) whose output only feeds the next
  // step: f32, b with a dim N (not 1-D), no clamp yet (a clamp ends the epilogue).
  auto fusable = [&](ValueId mv, size_t maxInputs) -> const Node* {
    const NodeId m = g.values[mv].producer;
    if (m == kNoNode || !vu.once(mv)) return nullptr;
    const Node& mm = g.nodes[m];
    if (mm.kind != OpKind::kMatMul || mm.inputs.size() > maxInputs ||
        g.values[mv].type.dtype != DType::kF32 || g.values[mm.inputs[1]].type.shape.rank() < 2)
      return nullptr;
    if (mm.attrs.has(am::act_min) || mm.attrs.has(am::act_max)) return nullptr;
    return &mm;
  };
  bool changed = false;
  for (NodeId a = 0; a < static_cast<NodeId>(g.nodes.size()); ++a) {
    Node& t = g.nodes[a];
    if (t.kind == OpKind::kRelu || t.kind == OpKind::kClip) {
      const ValueId mv = t.inputs[0];
      const Node* mm = fusable(mv, 4);
      if (!mm) continue;
      // The bounds that bound something (relu: act_min = 0); the attributes have no default.
      Attrs attrs = mm->attrs;
      const double inf = std::numeric_limits<double>::infinity();
      const double lo = t.kind == OpKind::kClip ? t.attrs.f(attr::Clip::min) : 0.0;
      const double hi = t.kind == OpKind::kClip ? t.attrs.f(attr::Clip::max) : inf;
      if (lo != -inf) attrs.setFloat(am::act_min, lo);
      if (hi != inf) attrs.setFloat(am::act_max, hi);
      const std::string what(opTextName(t.kind));
      vu.uses[static_cast<size_t>(mv)] = 0;
      details_.push_back(becomeConv(g, t, *mm, mm->inputs, std::move(attrs), what, mv));
      changed = true;
      continue;
    }
    if (t.kind != OpKind::kAdd) continue;
    const ValueId u = t.inputs[0], v = t.inputs[1];
    if (u == v) continue;
    const TensorType& outType = g.values[t.output].type;
    // The product on either side (the first that qualifies), the other the bias or residual.
    const Node* mm = fusable(u, 3);
    ValueId mv = u, other = v;
    if (!mm || !(g.values[u].type == outType)) {
      mm = fusable(v, 3);
      mv = v;
      other = u;
    }
    if (!mm || !(g.values[mv].type == outType)) continue;
    const TensorType& ot = g.values[other].type;
    const int64_t n = outType.shape.rank() > 0 ? outType.shape[outType.shape.rank() - 1] : -1;
    // A [N] vector of a plain product is its bias; a value of the output's very type is the
    // residual (after the bias: a product with its bias already, or a zero one inserted).
    const bool bias = mm->inputs.size() == 2 && ot.dtype == DType::kF32 && ot.shape.rank() == 1 &&
                      outType.shape.rank() >= 1 && ot.shape[0] == n;
    if (!bias && !(ot == outType)) continue;
    NodeId m = g.values[mv].producer;
    std::vector<ValueId> inputs = mm->inputs;
    if (!bias && inputs.size() == 2) {
      if (!isStaticDim(n)) continue;
      const ValueId bv = insertZeroBias(g, m, n, g.values[mv].name, vu);
      ++m;
      ++a;
      inputs.push_back(bv);
    }
    inputs.push_back(other);
    const Node& prod = g.nodes[m];
    vu.uses[static_cast<size_t>(mv)] = 0;
    details_.push_back(becomeConv(g, g.nodes[a], prod, std::move(inputs), prod.attrs,
                                  bias ? "add: bias" : "add: residual", mv));
    changed = true;
  }
  return changed;
}

// ---- scaled-dot-product attention -> one attention node -----------------------------------

namespace {

// perm with its last two entries swapped: the transpose that also swaps the last two dims.
Shape swapLastTwo(Shape perm) {
  const int r = perm.rank();
  std::swap(perm[r - 2], perm[r - 1]);
  return perm;
}

bool isIdentityPerm(const Shape& perm) {
  for (int i = 0; i < perm.rank(); ++i)
    if (perm[i] != i) return false;
  return true;
}

// Two shapes of one rank with the same batch dims (all but the last two; symbols compared as
// symbols).
bool sameBatch(const Shape& a, const Shape& b) {
  if (a.rank() != b.rank()) return false;
  for (int i = 0; i + 2 < a.rank(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

}  // namespace

bool AttentionFusion::run(Graph& g) {
  details_.clear();
  const auto users = usersOf(g);
  std::vector<bool> returned(g.values.size(), false);
  for (ValueId v : g.outputs) returned[v] = true;
  auto producerOf = [&](ValueId v) -> const Node* {
    const NodeId p = g.values[v].producer;
    return p == kNoNode ? nullptr : &g.nodes[p];
  };
  // The value of a one-element f32 constant (any rank), or nothing.
  auto scalarConst = [&](ValueId v) -> std::optional<double> {
    const Node* p = producerOf(v);
    if (!p || p->kind != OpKind::kConst || !p->constant || p->constant->dtype() != DType::kF32 ||
        p->constant->numel() != 1)
      return std::nullopt;
    return static_cast<double>(p->constant->as<float>()[0]);
  };
  // v is read only by node `user` and not returned, so the fused kernel need not write it.
  auto only = [&](ValueId v, NodeId user) { return onlyFeeds(g, users, returned, v, user); };

  bool changed = false;
  std::vector<bool> keep(g.nodes.size(), true);
  for (NodeId sm = 0; sm < static_cast<NodeId>(g.nodes.size()); ++sm) {
    // Walk back from a softmax over the last axis, sm = softmax(x): x = add(y, mask) or
    // add(mask, y) (optional); y = mul(s, c), mul(c, s) or div(s, c) with c a one-element
    // constant (optional); s = matmul(q, kt). Forward: the softmax's one user is matmul(sm, v).
    const Node& soft = g.nodes[sm];
    if (soft.kind != OpKind::kSoftmax || !keep[sm]) continue;
    const ValueId smv = soft.output;
    const Shape scores = g.values[smv].type.shape;
    const int r = scores.rank();
    const int64_t axis = soft.attrs.i(attr::Softmax::axis);
    if (r < 2 || (axis < 0 ? axis + r : axis) != r - 1) continue;
    if (returned[smv] || users[smv].size() != 1) continue;
    const NodeId mm2 = users[smv][0];
    if (!isPlainMatMul(g.nodes[mm2]) || g.nodes[mm2].inputs[0] != smv ||
        g.nodes[mm2].inputs[1] == smv)
      continue;
    const ValueId vv = g.nodes[mm2].inputs[1];
    std::vector<NodeId> chain = {sm};  // the nodes between the matmuls, softmax first
    ValueId x = soft.inputs[0];
    // Each step keeps the scores' shape: neither the mask nor the scale broadcasts them up.
    auto step = [&](ValueId in, std::initializer_list<OpKind> kinds) -> const Node* {
      const Node* p = producerOf(in);
      if (!p || !only(in, chain.back()) || g.values[in].type.shape != scores) return nullptr;
      for (OpKind k : kinds)
        if (p->kind == k) return p;
      return nullptr;
    };
    std::optional<ValueId> mask;
    if (const Node* add = step(x, {OpKind::kAdd})) {
      // The chain's side is the one that continues towards the matmul: a scale or the matmul,
      // read by this add only. (Both sides may qualify; the sum is the same either way.)
      const NodeId an = g.values[x].producer;
      auto chainSide = [&](ValueId in) {
        const Node* p = producerOf(in);
        return p &&
               (p->kind == OpKind::kMul || p->kind == OpKind::kDiv || p->kind == OpKind::kMatMul) &&
               onlyFeeds(g, users, returned, in, an) && g.values[in].type.shape == scores;
      };
      const ValueId a = add->inputs[0], b = add->inputs[1];
      const int side = chainSide(a) ? 0 : chainSide(b) ? 1 : -1;
      if (side >= 0) {
        mask = add->inputs[1 - side];
        chain.push_back(an);
        x = add->inputs[side];
      }
    }
    double scale = 1;
    std::string scaleText = "no scale";
    if (const Node* sc = step(x, {OpKind::kMul, OpKind::kDiv})) {
      const ValueId a = sc->inputs[0], b = sc->inputs[1];
      std::optional<double> c = scalarConst(b);
      ValueId s = a;
      if (!c && sc->kind == OpKind::kMul) {
        c = scalarConst(a);
        s = b;
      }
      const double value = c ? (sc->kind == OpKind::kDiv ? 1.0 / *c : *c) : 0.0;
      // A constant that would broadcast the scores up is no scale of them; a division by 0 (or
      // by a denormal, whose reciprocal overflows an f32) is no finite scale.
      const double f32Overflow = std::ldexp(1.0, 128) - std::ldexp(1.0, 103);
      if (c && std::fabs(value) < f32Overflow && g.values[s].type.shape == scores) {
        scale = value;
        scaleText = fmt::format("{} {}", opTextName(sc->kind), formatAttrFloat(*c));
        chain.push_back(g.values[x].producer);
        x = s;
      }
    }
    const Node* qk = step(x, {OpKind::kMatMul});
    if (!qk || !isPlainMatMul(*qk)) continue;
    const NodeId mm1 = g.values[x].producer;
    const ValueId qv = qk->inputs[0], ktv = qk->inputs[1];
    const Shape& q = g.values[qv].type.shape;
    const Shape& kt = g.values[ktv].type.shape;
    const Shape& v = g.values[vv].type.shape;
    // One rank and the same batch dims for q, k^T and v (the kernel walks them in step; a
    // broadcast batch stays unfused), and f32 (the softmax's input is).
    if (q.rank() != r || !sameBatch(q, kt) || !sameBatch(q, v) ||
        g.values[qv].type.dtype != DType::kF32 || g.values[vv].type.dtype != DType::kF32 ||
        (mask && g.values[*mask].type.dtype != DType::kF32))
      continue;

    // What the attention replaces, named before the rewrites change the nodes.
    std::string replaced = fmt::format("matmul %{}", g.values[x].name);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it)
      replaced += fmt::format(", {} %{}", opTextName(g.nodes[*it].kind),
                              g.values[g.nodes[*it].output].name);
    replaced += fmt::format(", matmul %{}", g.values[g.nodes[mm2].output].name);

    // Every check has passed; the rewrites follow. The attention takes k as [..., S_k, D], the
    // matmul read k^T [..., D, S_k]: a transpose that only swapped the last two dims goes; one
    // that does more (an export's split of the heads, [B, S, H, D] -> [B, H, D, S]) loses the
    // swap, or goes too when the same input already has a transpose by the remaining perm
    // before the attention (gpt_prefill's present_k); k^T from anything else gets the swap
    // from the first matmul's node, which turns into that transpose.
    ValueId kv = -1;
    std::string kText;
    const NodeId ktn = g.values[ktv].producer;
    if (ktn != kNoNode && g.nodes[ktn].kind == OpKind::kTranspose && only(ktv, mm1)) {
      const ValueId src = g.nodes[ktn].inputs[0];
      const Shape perm = swapLastTwo(*g.nodes[ktn].attrs.perm);
      if (isIdentityPerm(perm)) {
        kv = src;
        kText = fmt::format("k^T %{}'s transpose removed", g.values[ktv].name);
      } else {
        for (NodeId u : users[src]) {
          const Node& t = g.nodes[u];
          if (u != ktn && u < mm2 && keep[u] && t.kind == OpKind::kTranspose && t.attrs.perm &&
              *t.attrs.perm == perm) {
            kv = t.output;
            kText = fmt::format("k^T %{}'s transpose removed (%{} holds k)", g.values[ktv].name,
                                g.values[kv].name);
            break;
          }
        }
        if (kv < 0) {
          Node& t = g.nodes[ktn];
          t.attrs.perm = perm;
          g.values[ktv].type = inferNode(
              InferContext{t.kind, std::vector{g.values[src].type}, t.attrs, &g, ktn, {}, &t});
          kv = ktv;
          kText = fmt::format("k^T %{}'s transpose now writes k (perm={})", g.values[ktv].name,
                              perm.toString());
        }
      }
      if (kv != ktv) keep[ktn] = false;
    }
    if (kv < 0) {
      Node& t = g.nodes[mm1];
      t.kind = OpKind::kTranspose;
      t.inputs = {ktv};
      t.attrs = Attrs{};
      Shape perm;
      for (int i = 0; i < r; ++i) perm.push(i);
      t.attrs.perm = swapLastTwo(perm);
      g.values[t.output].type = inferNode(
          InferContext{t.kind, std::vector{g.values[ktv].type}, t.attrs, &g, mm1, {}, &t});
      std::string name = g.values[ktv].name + ".k";
      for (int i = 2; g.findValue(name) >= 0; ++i)
        name = fmt::format("{}.k{}", g.values[ktv].name, i);
      g.values[t.output].name = name;
      kv = t.output;
      kText = fmt::format("k = %{}, a transpose of k^T %{}", name, g.values[ktv].name);
    } else {
      keep[mm1] = false;
    }
    for (NodeId c : chain) keep[c] = false;

    Node& att = g.nodes[mm2];
    att.kind = OpKind::kAttention;
    att.inputs = {qv, kv, vv};
    if (mask) att.inputs.push_back(*mask);
    att.attrs = Attrs{};
    att.attrs.setFloat(attr::Attention::scale, scale);
    std::vector<TensorType> types;
    for (ValueId in : att.inputs) types.push_back(g.values[in].type);
    g.values[att.output].type =
        inferNode(InferContext{att.kind, types, att.attrs, &g, mm2, {}, &att});
    details_.push_back(
        fmt::format("%{} = attention(%{}, %{}, %{}{}, scale={}) replaces {} ({}); {}",
                    g.values[att.output].name, g.values[qv].name, g.values[kv].name,
                    g.values[vv].name, mask ? ", %" + g.values[*mask].name : std::string(),
                    formatAttrFloat(scale), replaced, scaleText, kText));
    changed = true;
  }
  if (changed) removeNodes(g, keep);
  return changed;
}

// ---- pipeline -------------------------------------------------------------------------------

std::vector<std::string> PassReport::fired() const {
  std::vector<std::string> out;
  for (const PassRecord& p : passes)
    if (p.changed) out.push_back(p.name);
  return out;
}

bool PassReport::changed() const {
  for (const PassRecord& p : passes)
    if (p.changed) return true;
  return false;
}

std::string PassReport::toString() const {
  std::string s;
  for (const PassRecord& p : passes) {
    s += fmt::format("{}: {}", p.name, p.changed ? "changed" : "unchanged");
    for (size_t i = 0; i < p.details.size(); ++i)
      s += (i == 0 ? " (" : "; ") + p.details[i] + (i + 1 == p.details.size() ? ")" : "");
    s += '\n';
  }
  return s;
}

PassReport PassPipeline::run(Graph& g, const PassObserver& observer) {
  PassReport report;
  for (const auto& pass : passes_) {
    PassRecord rec;
    rec.name = std::string(pass->name());
    rec.changed = pass->run(g);
    rec.details = pass->details();
    try {
      // No type updates: a pass must leave declared types equal to inferred ones.
      verifyGraph(static_cast<const Graph&>(g));
    } catch (const Error& e) {
      fail(ErrorKind::kShape, "after pass {}: {}", rec.name, e.what());
    }
    if (observer) observer(rec, g);
    report.passes.push_back(std::move(rec));
  }
  return report;
}

PassPipeline defaultPipeline(std::span<const std::string> disabled) {
  std::vector<std::unique_ptr<Pass>> all;
  all.push_back(std::make_unique<DeadCodeElimination>());
  all.push_back(std::make_unique<FoldBatchNormIntoConv>());
  all.push_back(std::make_unique<FuseConvResidual>());
  all.push_back(std::make_unique<FuseConvActivation>());
  all.push_back(std::make_unique<AttentionFusion>());
  all.push_back(std::make_unique<FuseMatMulEpilogue>());
  all.push_back(std::make_unique<ChannelShuffleToIndexSelect>());
  all.push_back(std::make_unique<SliceOfIndexSelect>());
  all.push_back(std::make_unique<DeadCodeElimination>());
  all.push_back(std::make_unique<CatIndexSelectFusion>());
  all.push_back(std::make_unique<DeadCodeElimination>());
  for (const std::string& name : disabled) {
    const bool known =
        std::any_of(all.begin(), all.end(), [&](const auto& pass) { return pass->name() == name; });
    if (!known)
      fail(ErrorKind::kConfig, "unknown pass '{}' to disable (the passes: {})", name,
           fmt::join(defaultPassNames(), ", "));
  }
  PassPipeline p;
  for (auto& pass : all)
    if (std::find(disabled.begin(), disabled.end(), pass->name()) == disabled.end())
      p.add(std::move(pass));
  return p;
}

std::vector<std::string> defaultPassNames() {
  // Distinct names in pipeline order (dce runs three times).
  return {"dce",
          "fold-batch-norm",
          "fuse-conv-residual",
          "fuse-conv-activation",
          "fuse-attention",
          "fuse-matmul-epilogue",
          "shuffle-to-index-select",
          "slice-of-index-select",
          "fuse-cat-index-select"};
}

}  // namespace gearbox
