#pragma once
// Graph-to-graph passes run once on a graph before any mode compiles it (docs/passes.md).
//
//   PassPipeline p = defaultPipeline();   // dce, fold-batch-norm, fuse-conv-activation,
//                        // fuse-attention,
//                        // shuffle-to-index-select, slice-of-index-select, dce,
//                        // fuse-cat-index-select, dce
//   PassReport r = p.run(graph);          // verifyGraph after every pass
//
// Every pass keeps the names of graph inputs and outputs (`gearbox eval` writes <name>.npy),
// keeps nodes in topological order, and leaves value ids compact: removing nodes renumbers
// values and nodes densely (Node::inputs/output, Value::producer, Graph::inputs/outputs).

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"

namespace gearbox {

// One graph rewrite. run() returns whether it changed the graph and leaves a human-readable
// line per change in details() ("fused %c + %o1, %o2"), cleared at the start of every run.
class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  virtual bool run(Graph& g) = 0;
  const std::vector<std::string>& details() const { return details_; }

 protected:
  std::vector<std::string> details_;
};

// Dead-code elimination: every node whose value does not reach a returned value is removed
// (so it is neither compiled nor run). Graph inputs are kept even when unused, because they
// are the graph's calling convention.
class DeadCodeElimination final : public Pass {
 public:
  std::string_view name() const override { return "dce"; }
  bool run(Graph& g) override;
};

// Cat + IndexSelect fusion: a Cat whose only users are IndexSelects along the Cat's dim (dims
// compared after wrapping negatives), used only as their data input, and which is not itself
// a returned value, becomes one CatGather per user reading straight from the Cat's inputs.
// Each IndexSelect node is rewritten in place (its value, name and position stay); the Cat is
// left without users for the next dead-code elimination to remove. A Cat with any other user
// is left alone (docs/passes.md explains why).
class CatIndexSelectFusion final : public Pass {
 public:
  std::string_view name() const override { return "fuse-cat-index-select"; }
  bool run(Graph& g) override;
};

// Channel shuffle -> index_select (seed 004): ShuffleNet's reshape [A, C, R...] ->
// [A, G, C / G, R...], transpose of dims 1 and 2, reshape back to [A, C, R...] is one gather of
// channels by a constant permutation. The closing reshape becomes index_select(x, perm, dim=1)
// (its value and name stay), the opening reshape becomes the permutation constant, and the
// transpose is removed. The intermediate values must have no other users. When x is a Cat,
// the Cat + IndexSelect fusion then reads the branches directly: the shuffle costs no copy.
class ChannelShuffleToIndexSelect final : public Pass {
 public:
  std::string_view name() const override { return "shuffle-to-index-select"; }
  bool run(Graph& g) override;
};

// A constant index_select whose users are all slices of the gathered dim (forward, step 1, the
// other dims whole) becomes one index_select per slice with that run of the index: ShuffleNet's
// shuffle followed by chunk(2) (seed 004's split_shuffle=True) is two gathers, and when the
// data is a Cat, two cat_gathers. The slices are rewritten in place; the gather is left for DCE.
class SliceOfIndexSelect final : public Pass {
 public:
  std::string_view name() const override { return "slice-of-index-select"; }
  bool run(Graph& g) override;
};

// batch_norm (inference) after a conv2d with constant weights, bias and statistics, where the
// conv output has no other user: the weights and bias absorb the normalisation and the
// batch_norm node becomes the conv (new constants NAME.weight / NAME.bias); the old conv is
// left for DCE. One kernel instead of two, and no intermediate tensor.
class FoldBatchNormIntoConv final : public Pass {
 public:
  std::string_view name() const override { return "fold-batch-norm"; }
  bool run(Graph& g) override;
};

// conv2d + add [+ relu / clip] -> conv2d with a residual (docs/passes.md): an add of a conv's
// output (its only use, not returned; a conv without a clamp) and another value of the same
// shape and dtype (no broadcasting) becomes the conv with that value as a fourth input, added
// in the conv's epilogue (a zero bias is inserted for a conv without one); a relu or clip that
// is the add's only user is folded in as the clamp, after the residual (ResNet's basic block:
// conv, add, relu). The add (or the activation) node is rewritten in place, the rest left for
// DCE. One kernel instead of two or three per residual block.
class FuseConvResidual final : public Pass {
 public:
  std::string_view name() const override { return "fuse-conv-residual"; }
  bool run(Graph& g) override;
};

// Epilogue fusion: a relu or clip whose input is a conv2d's output with no other user (and not
// returned) becomes the conv itself with the clamp as its epilogue (act_min / act_max: relu is
// [0, inf]); the relu/clip node is rewritten in place (its value, name and position stay) and
// the old conv is left for DCE. One kernel instead of two, one launch fewer in eager and
// dynamic modes, and no intermediate tensor written and read back (docs/passes.md).
class FuseConvActivation final : public Pass {
 public:
  std::string_view name() const override { return "fuse-conv-activation"; }
  bool run(Graph& g) override;
};

// Epilogue fusion for matmul (docs/passes.md): add(p, bias) with p = matmul(a, b) (b not 1-D,
// f32, p used only there and not returned) and bias a [N] vector becomes matmul(a, b, bias);
// a further add of a value of the output's very type (no broadcasting) becomes its fourth
// input, the residual (a zero bias is inserted where there was none); a relu or clip of such a
// product becomes its clamp (act_min / act_max), which ends the epilogue. Each rewritten node
// keeps its value, name and position; the old matmul is left for DCE. Runs after fuse-attention,
// which needs the scores' matmul and mask add unfused. A linear layer, bias, ReLU and
// residual are one kernel: no pass over the output per add and activation.
class FuseMatMulEpilogue final : public Pass {
 public:
  std::string_view name() const override { return "fuse-matmul-epilogue"; }
  bool run(Graph& g) override;
};

// Scaled-dot-product attention -> one `attention` node (docs/passes.md): softmax over the last
// axis of matmul(q, k^T), optionally scaled by a one-element constant (mul or div) and
// optionally plus a mask (add), whose one user is matmul(., v), with q, k^T and v of one rank
// and the same batch dims, and no intermediate used elsewhere or returned. The second matmul's
// node becomes attention(q, k, v[, mask], scale) (its value and name stay). k is k^T's
// transpose with the last two dims swapped back: the transpose that made k^T is removed or
// loses that swap; without one, the first matmul's node becomes the swap. The other nodes are
// removed. Eager and dynamic modes then launch one kernel where they launched five or six,
// and the [S_q, S_k] scores are never written.
class AttentionFusion final : public Pass {
 public:
  std::string_view name() const override { return "fuse-attention"; }
  bool run(Graph& g) override;
};

// Inserts a constant node before node `before` (later nodes move up one place) and returns its
// value; the name is made unique with a suffix.
ValueId insertConstBefore(Graph& g, NodeId before, Tensor data, const std::string& name);

// What one pass did inside a pipeline run.
struct PassRecord {
  std::string name;
  bool changed = false;
  std::vector<std::string> details;
};

// What a pipeline run did, pass by pass, in order.
struct PassReport {
  std::vector<PassRecord> passes;
  // Names of the passes that changed the graph, in run order (a name repeats when a pass that
  // appears twice in the pipeline fired twice).
  std::vector<std::string> fired() const;
  bool changed() const;
  // One line per pass: "dce: unchanged" / "fuse-cat-index-select: changed (fused %c + %o)".
  std::string toString() const;
};

// Called after each pass has run and the graph has been verified.
using PassObserver = std::function<void(const PassRecord&, const Graph&)>;

class PassPipeline {
 public:
  void add(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }
  size_t size() const { return passes_.size(); }
  // Runs every pass in order and verifies the graph after each one (declared types must equal
  // inferred ones). A pass that leaves an invalid graph is reported as Error(kShape) naming the
  // pass; `g` is then left as that pass made it.
  PassReport run(Graph& g, const PassObserver& observer = {});

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
};

// dce, fold-batch-norm, fuse-attention, shuffle-to-index-select, slice-of-index-select, dce,
// fuse-cat-index-select, dce: the first DCE keeps the rewrites from counting users that are
// dead anyway, the others remove what the rewrites left without users. A pass named in
// `disabled` is left out (every occurrence of it: "dce" drops all three), which is how a user
// compares fused and unfused graphs pass by pass (--disable-pass); an unknown name is
// Error(kConfig) listing the passes.
PassPipeline defaultPipeline(std::span<const std::string> disabled = {});
// The default pipeline's pass names, each once, in order.
std::vector<std::string> defaultPassNames();

// Removes the nodes with keep[node] == false and every value they produced, renumbering the
// remaining nodes and values densely in their original order. The caller guarantees that no
// kept node or graph output uses a removed value. Exposed for passes and their tests.
void removeNodes(Graph& g, const std::vector<bool>& keep);

}  // namespace gearbox
