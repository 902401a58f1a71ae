#pragma once
// Graph IR: values (typed SSA names), nodes (one op, one output), graph inputs and outputs.
// Nodes are stored in a valid topological order (every input defined before use); the
// builder and the parser both enforce it, so passes and runners can walk nodes in order.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "graph/op.h"
#include "graph/tensor.h"

namespace gearbox {

using ValueId = int32_t;
using NodeId = int32_t;
constexpr int32_t kNoNode = -1;

struct TensorType {
  DType dtype = DType::kF32;
  Shape shape;
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  std::string toString() const;  // "f32[B, 4]"
};

struct Value {
  std::string name;  // without the leading '%'
  TensorType type;
  NodeId producer = kNoNode;  // kNoNode for graph inputs
};

// Where something came from, for error messages: "model.gbx:4".
struct SourceLoc {
  std::string file;
  int line = 0;
  std::string toString() const;
};

struct Node {
  OpKind kind = OpKind::kAdd;
  std::vector<ValueId> inputs;
  ValueId output = -1;
  Attrs attrs;
  SourceLoc loc;
  // Const only: the data and how the text spelled it ("" = inline literal, else the .npy path
  // as written, resolved relative to the model file when loaded).
  std::shared_ptr<const Tensor> constant;
  std::string constPath;
};

class Graph {
 public:
  std::string name = "main";
  std::string sourceFile;  // "" when built in C++
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;

  const Value& value(ValueId id) const { return values[id]; }
  const Node& node(NodeId id) const { return nodes[id]; }
  // -1 when absent.
  ValueId findValue(std::string_view name) const;
  int findInput(std::string_view name) const;
  // "file:line: op %m = matmul" -- the prefix every node-level error starts with.
  std::string describeNode(NodeId id) const;
};

// Context handed to one op's shape inference (graph/ops/<op>.cpp). Inference runs on every
// compile and, in dynamic mode, on every call, so the words of an error message (the node's
// description, the input names) are only built when an error is raised.
struct InferContext {
  OpKind kind;
  std::span<const TensorType> inputs;
  const Attrs& attrs;
  const Graph* graph = nullptr;  // set when inferring a node of a graph
  NodeId nodeId = -1;
  std::string_view label = {};  // otherwise: what is being inferred, e.g. a kernel name
  const Node* node = nullptr;   // the node (Const carries its data here)
  // The shapes of the graph's inputs in this call (Graph::inputs order), when known: a reshape
  // or expand target that names a graph input's symbol takes its size from here (empty when
  // inferring the declared graph: the symbol then stays a symbol).
  std::span<const Shape> inputShapes = {};
  // "<file:line>: op %m = matmul", or the label.
  std::string where() const;
  // "%x" for input i, or "?" without a graph.
  std::string inputName(size_t i) const;
};

// Shape inference + verification for one node; throws Error(kShape) naming the op, the input
// and the dim. Works on static and symbolic dims (symbolic checks are deferred to
// specialisation, where every dim is concrete).
TensorType inferNode(const InferContext& ctx);

// Re-runs inference over every node in order, checks names are unique, every use is defined
// before it, outputs exist, and declared value types equal inferred ones (updating them when
// `update` is true). Throws Error on the first violation.
void verifyGraph(Graph& g, bool update = true);
void verifyGraph(const Graph& g);
// Re-infers every node's output type in order, for a graph whose structure is already
// verified (specialisation changes only input shapes). Throws Error(kShape) like verifyGraph.
void inferGraphTypes(Graph& g);

// C++ builder: GraphBuilder b("demo"); auto x = b.input("x", DType::kF32, {symbolDim("B"), 4});
// auto y = b.add(x, x); b.output(y); Graph g = b.build();
class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name = "main");
  ValueId input(std::string name, DType dtype, Shape shape);
  ValueId constant(Tensor data, std::string name = "", std::string path = "");
  ValueId add(ValueId a, ValueId b, std::string name = "");
  ValueId matmul(ValueId a, ValueId b, std::string name = "");
  ValueId indexSelect(ValueId input, ValueId index, int64_t dim, std::string name = "");
  ValueId cat(std::vector<ValueId> inputs, int64_t dim, std::string name = "");
  // Generic: any op from ops.def.
  ValueId op(OpKind kind, std::vector<ValueId> inputs, Attrs attrs, std::string name = "",
             SourceLoc loc = {});
  void output(ValueId v);
  const TensorType& type(ValueId v) const { return g_.values[v].type; }
  Graph build();  // verifies; the builder is empty afterwards
  Graph& graph() { return g_; }

 private:
  std::string freshName();
  Graph g_;
  int counter_ = 0;
};

}  // namespace gearbox
