#include "graph/graph.h"

#include <fmt/format.h>

#include <unordered_set>

#include "graph/checked.h"
#include "graph/error.h"

namespace gearbox {

std::string TensorType::toString() const {
  std::string s(dtypeName(dtype));
  return s + shape.toString();
}

std::string SourceLoc::toString() const {
  if (file.empty()) return line > 0 ? fmt::format("line {}", line) : std::string("<builder>");
  return fmt::format("{}:{}", file, line);
}

ValueId Graph::findValue(std::string_view n) const {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].name == n) return static_cast<ValueId>(i);
  return -1;
}

int Graph::findInput(std::string_view n) const {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (values[inputs[i]].name == n) return static_cast<int>(i);
  return -1;
}

std::string Graph::describeNode(NodeId id) const {
  const Node& n = nodes[id];
  return fmt::format("{}: op %{} = {}", n.loc.toString(), values[n.output].name,
                     opTextName(n.kind));
}

std::string InferContext::where() const {
  if (graph && nodeId >= 0) return graph->describeNode(nodeId);
  return label.empty() ? std::string(opTextName(kind)) : std::string(label);
}

std::string InferContext::inputName(size_t i) const {
  if (!graph || !node || i >= node->inputs.size()) return "?";
  return "%" + graph->values[node->inputs[i]].name;
}

// One declaration per op, implemented in graph/ops/<op>.cpp.
#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index) \
  TensorType infer##e(const InferContext& ctx);
#include "graph/ops.def"
#undef GEARBOX_OP

namespace {

TensorType inferOp(const InferContext& ctx) {
  switch (ctx.kind) {
#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index) \
  case OpKind::k##e:                                               \
    return infer##e(ctx);
#include "graph/ops.def"
#undef GEARBOX_OP
  }
  fail(ErrorKind::kShape, "{}: unknown op", ctx.where());
}

}  // namespace

TensorType inferNode(const InferContext& ctx) {
  // Input counts come from ops.def, so no op file has to check them.
  const size_t n = ctx.inputs.size();
  const int lo = opMinInputs(ctx.kind), hi = opMaxInputs(ctx.kind);
  if (n < static_cast<size_t>(lo) || (hi >= 0 && n > static_cast<size_t>(hi))) {
    if (lo == hi) fail(ErrorKind::kShape, "{}: expects {} inputs, got {}", ctx.where(), lo, n);
    if (hi < 0)
      fail(ErrorKind::kShape, "{}: expects at least {} inputs, got {}", ctx.where(), lo, n);
    fail(ErrorKind::kShape, "{}: expects {} to {} inputs, got {}", ctx.where(), lo, hi, n);
  }
  TensorType t = inferOp(ctx);
  // Every op's output size passes the one size limit here, so no op file has to remember it and
  // no kernel or planner ever sees a shape whose byte count could wrap.
  checkTensorSize(t.shape, t.dtype, ctx.where(), "output");
  return t;
}

namespace {

TensorType inferAt(const Graph& g, NodeId id) {
  const Node& n = g.nodes[id];
  std::vector<TensorType> types;
  types.reserve(n.inputs.size());
  for (ValueId v : n.inputs) types.push_back(g.values[v].type);
  InferContext ctx{n.kind, types, n.attrs, &g, id, {}, &n};
  return inferNode(ctx);
}

void verifyImpl(Graph& g, bool update) {
  std::unordered_set<std::string_view> seen;
  std::vector<bool> defined(g.values.size(), false);
  for (ValueId v : g.inputs) {
    if (!seen.insert(g.values[v].name).second)
      fail(ErrorKind::kShape, "graph {}: input %{} is defined twice", g.name, g.values[v].name);
    defined[v] = true;
  }
  for (NodeId i = 0; i < static_cast<NodeId>(g.nodes.size()); ++i) {
    const Node& n = g.nodes[i];
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      ValueId v = n.inputs[k];
      if (v < 0 || v >= static_cast<ValueId>(g.values.size()) || !defined[v])
        fail(ErrorKind::kShape, "{}: input {} is used before it is defined", g.describeNode(i), k);
    }
    if (!seen.insert(g.values[n.output].name).second)
      fail(ErrorKind::kShape, "{}: value %{} is defined twice", g.describeNode(i),
           g.values[n.output].name);
    TensorType t = inferAt(g, i);
    TensorType& declared = g.values[n.output].type;
    if (update) {
      declared = t;
    } else if (!(declared == t)) {
      fail(ErrorKind::kShape, "{}: declared type {} but inference gives {}", g.describeNode(i),
           declared.toString(), t.toString());
    }
    defined[n.output] = true;
  }
  if (g.outputs.empty()) fail(ErrorKind::kShape, "graph {}: no return value", g.name);
  for (ValueId v : g.outputs)
    if (v < 0 || v >= static_cast<ValueId>(g.values.size()) || !defined[v])
      fail(ErrorKind::kShape, "graph {}: returned value is not defined", g.name);
}

}  // namespace

void inferGraphTypes(Graph& g) {
  for (NodeId i = 0; i < static_cast<NodeId>(g.nodes.size()); ++i)
    g.values[g.nodes[i].output].type = inferAt(g, i);
}

void verifyGraph(Graph& g, bool update) {
  verifyImpl(g, update);
}
void verifyGraph(const Graph& g) {
  Graph copy = g;
  verifyImpl(copy, false);
}

GraphBuilder::GraphBuilder(std::string name) {
  g_.name = std::move(name);
}

std::string GraphBuilder::freshName() {
  // Builder-generated names never collide with user names that are not pure numbers.
  for (;;) {
    std::string n = std::to_string(counter_++);
    if (g_.findValue(n) < 0) return n;
  }
}

ValueId GraphBuilder::input(std::string name, DType dtype, Shape shape) {
  ValueId id = static_cast<ValueId>(g_.values.size());
  g_.values.push_back(Value{std::move(name), TensorType{dtype, shape}, kNoNode});
  g_.inputs.push_back(id);
  return id;
}

ValueId GraphBuilder::constant(Tensor data, std::string name, std::string path) {
  Node n;
  n.kind = OpKind::kConst;
  n.constant = std::make_shared<const Tensor>(std::move(data));
  n.constPath = std::move(path);
  if (name.empty()) name = freshName();
  ValueId id = static_cast<ValueId>(g_.values.size());
  g_.values.push_back(Value{std::move(name), TensorType{n.constant->dtype(), n.constant->shape()},
                            static_cast<NodeId>(g_.nodes.size())});
  n.output = id;
  g_.nodes.push_back(std::move(n));
  return id;
}

ValueId GraphBuilder::op(OpKind kind, std::vector<ValueId> inputs, Attrs attrs, std::string name,
                         SourceLoc loc) {
  Node n;
  n.kind = kind;
  n.inputs = std::move(inputs);
  n.attrs = attrs;
  n.loc = std::move(loc);
  if (name.empty()) name = freshName();
  const NodeId nid = static_cast<NodeId>(g_.nodes.size());
  const ValueId id = static_cast<ValueId>(g_.values.size());
  n.output = id;
  g_.values.push_back(Value{std::move(name), {}, nid});
  g_.nodes.push_back(std::move(n));
  // Defaults are filled in here, once, so two nodes (and kernel keys) never differ only by a
  // default, and a missing required attribute is an error at the call that built the node.
  normalizeAttrs(kind, g_.nodes[nid].attrs, g_.describeNode(nid));
  // Infer now so later builder calls see the type and errors point at the offending call.
  g_.values[id].type = inferAt(g_, nid);
  return id;
}

ValueId GraphBuilder::add(ValueId a, ValueId b, std::string name) {
  return op(OpKind::kAdd, {a, b}, {}, std::move(name));
}
ValueId GraphBuilder::matmul(ValueId a, ValueId b, std::string name) {
  return op(OpKind::kMatMul, {a, b}, {}, std::move(name));
}
ValueId GraphBuilder::indexSelect(ValueId input, ValueId index, int64_t dim, std::string name) {
  return op(OpKind::kIndexSelect, {input, index}, Attrs{dim}, std::move(name));
}
ValueId GraphBuilder::cat(std::vector<ValueId> inputs, int64_t dim, std::string name) {
  return op(OpKind::kCat, std::move(inputs), Attrs{dim}, std::move(name));
}

void GraphBuilder::output(ValueId v) {
  g_.outputs.push_back(v);
}

Graph GraphBuilder::build() {
  verifyGraph(g_, true);
  Graph out = std::move(g_);
  g_ = Graph{};
  counter_ = 0;
  return out;
}

}  // namespace gearbox
