#include "compiler/specialize.h"

#include <fmt/format.h>

#include <algorithm>

#include "graph/checked.h"
#include "graph/error.h"

namespace gearbox {

size_t SignatureHash::operator()(const InputSignature& s) const {
  size_t h = 0x9e3779b97f4a7c15ull;
  for (const Shape& sh : s) h ^= sh.hash() + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

std::string signatureToString(const Graph& g, const InputSignature& sig) {
  std::string s;
  for (size_t i = 0; i < sig.size(); ++i) {
    if (i) s += ", ";
    const std::string name = i < g.inputs.size() ? g.values[g.inputs[i]].name : "?";
    s += fmt::format("{}={}", name, sig[i].toString());
  }
  return s;
}

void checkSignature(const Graph& g, const InputSignature& sig) {
  if (sig.size() != g.inputs.size())
    fail(ErrorKind::kShape, "graph {} takes {} inputs, got {}", g.name, g.inputs.size(),
         sig.size());
  // Symbol -> the first value bound to it and where. A handful of symbols at most, and this
  // runs on every compile: a flat list, and the words only when there is an error.
  struct Binding {
    int64_t symbol, value;
    size_t input;
    int dim;
  };
  std::vector<Binding> bound;
  auto where = [&](size_t input, int dim) {
    return fmt::format("input '{}' dim {}", g.values[g.inputs[input]].name, dim);
  };
  for (size_t i = 0; i < sig.size(); ++i) {
    const Value& in = g.values[g.inputs[i]];
    const Shape& decl = in.type.shape;
    const Shape& act = sig[i];
    if (decl.rank() != act.rank())
      fail(ErrorKind::kShape, "input '{}': expected rank {} ({}), got rank {} ({})", in.name,
           decl.rank(), decl.toString(), act.rank(), act.toString());
    checkTensorSize(act, in.type.dtype, {}, fmt::format("input '{}'", in.name));
    for (int d = 0; d < decl.rank(); ++d) {
      const int64_t want = decl[d], got = act[d];
      if (got < 0) continue;  // still dynamic (dynamic mode's symbolic signature)
      if (want >= 0 && want != got)
        fail(ErrorKind::kShape, "input '{}' dim {}: declared {}, got {}", in.name, d, want, got);
      if (!isSymbolDim(want)) continue;
      auto it = std::find_if(bound.begin(), bound.end(),
                             [&](const Binding& b) { return b.symbol == want; });
      if (it == bound.end()) {
        bound.push_back(Binding{want, got, i, d});
      } else if (it->value != got) {
        fail(ErrorKind::kShape, "{} is {} but {} is {}: both are symbol {}", where(i, d), got,
             where(it->input, it->dim), it->value, symbolName(want));
      }
    }
  }
}

std::vector<TensorType> specializeTypes(const Graph& g, const InputSignature& sig) {
  checkSignature(g, sig);
  std::vector<TensorType> types(g.values.size());
  for (const Value& v : g.values) types[&v - g.values.data()] = v.type;
  for (size_t i = 0; i < sig.size(); ++i) types[g.inputs[i]].shape = sig[i];
  // The structure was verified when the graph was built and after every pass; only the types
  // change with the input shapes. Inputs are gathered on the stack: this runs once per node
  // of every plan compiled.
  constexpr size_t kInline = 8;
  TensorType inline_[kInline];
  std::vector<TensorType> heap;
  for (NodeId n = 0; n < static_cast<NodeId>(g.nodes.size()); ++n) {
    const Node& node = g.nodes[n];
    TensorType* in = inline_;
    if (node.inputs.size() > kInline) {
      heap.resize(node.inputs.size());
      in = heap.data();
    }
    for (size_t k = 0; k < node.inputs.size(); ++k) in[k] = types[node.inputs[k]];
    types[node.output] = inferNode(InferContext{node.kind,
                                                std::span<const TensorType>(in, node.inputs.size()),
                                                node.attrs,
                                                &g,
                                                n,
                                                {},
                                                &node,
                                                sig});
  }
  return types;
}

Graph specializeGraph(const Graph& g, const InputSignature& sig) {
  // Inferred against the declared graph, so a reshape target that names a symbol or a dim
  // expression finds it in its input's declared type (graph/ops/reshape.cpp).
  std::vector<TensorType> types = specializeTypes(g, sig);
  Graph out = g;
  for (size_t v = 0; v < types.size(); ++v) out.values[v].type = std::move(types[v]);
  // The specialised graph stands alone: its reshape and expand targets hold the sizes they
  // resolved to.
  for (Node& n : out.nodes)
    if (n.attrs.shape) {
      const Shape& o = out.values[n.output].type.shape;
      if (o.isStatic()) n.attrs.shape = o;
    }
  return out;
}

}  // namespace gearbox
