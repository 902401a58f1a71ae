// Reduce-overhead mode (TorchAir's mode = "reduce-overhead", aclgraph; CUDA graphs in
// torch.compile's mode of the same name; seed 003's static kernels belong to it).
//
// The first call of each input signature runs the graph op by op and *captures* it: which
// kernel ran for which node, at which shapes, into which buffer. Later calls with that
// signature *replay* the capture as one whole-graph launch and one sync, with no per-op host
// work (no shape inference, no tiling, no per-op launch). The kernels are the eager op kernels,
// shape-generic, unless a kernel store -- a bundle from `gearbox precompile`, or kernel_meta --
// holds the static kernel of the node's exact shapes: that is seed 003's workflow, and the
// static kernels run at full efficiency instead of the generic one.
//
// A capture is counted as one graph compile (through the host, as every compile is). Its
// MODELED cost is the device profile's graph-compile terms (graphCompileBaseUs +
// graphCompilePerNodeUs x nodes): capturing builds and instantiates a device graph from the
// recorded launches (aclmdlRICaptureEnd, cudaGraphInstantiate), the same kind of work as
// loading a compiled graph. Its measured cost is the host time of the capturing call.
//
// The capture limit (mode option capture_limit, default 64 as TorchAir's
// config.debug.aclgraph.static_capture_size_limit, "the re-capture limit") bounds the captures
// per session. A new signature beyond it runs eagerly, op by op, and is never captured; the
// first one logs one warning. Captured signatures keep replaying. (TorchAir sends every later
// call to eager once the limit is passed; gearbox keeps what it captured, as the recompile
// limit keeps cached plans serving.)
#include <fmt/format.h>

#include <charconv>
#include <cstring>

#include "compiler/compile_log.h"
#include "executor/kernels.h"
#include "executor/modes/mode_strategy.h"
#include "executor/plan_runner.h"
#include "graph/checked.h"
#include "graph/error.h"

namespace gearbox {

namespace {

constexpr int64_t kDefaultCaptureLimit = 64;  // TorchAir's static_capture_size_limit

// One captured graph: the nodes in order with the kernel each ran and the buffer each wrote.
struct Capture {
  uint64_t id = 0;
  struct Op {
    NodeId node;
    std::shared_ptr<const KernelSpec> spec;
    KernelKey key;  // the node's key at the captured shapes (what its run is costed at)
  };
  std::vector<Op> ops;
  std::vector<TensorType> types;  // per value, at the captured shapes
  // Intermediates live in one block the capture owns (a CUDA graph's private memory pool),
  // held through the host as the capture's workspace (MODELED device memory, --graph-pool):
  // per value its offset, or -1 for inputs, constants and graph outputs. Null in model-only.
  std::vector<int64_t> offset;
  std::shared_ptr<std::byte> arena;
  size_t arenaBytes = 0;
};

class ReduceOverheadMode final : public ModeStrategy {
 public:
  explicit ReduceOverheadMode(ModeHost& host) : host_(host) {
    if (const std::string* v = host.modeOption("capture_limit")) {
      int64_t n = 0;
      const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
      if (ec != std::errc() || end != v->data() + v->size() || n < 1)
        fail(ErrorKind::kConfig, "mode option capture_limit={}: expected an integer >= 1", *v);
      limit_ = n;
    }
  }

  std::vector<Tensor> run(std::span<const Tensor> inputs, const InputSignature& sig,
                          CallContext& call) override {
    TimelineSpan lookup = host_.span("capture lookup", "lookup");
    const Capture* hit = nullptr;
    for (const auto& c : captures_)
      if (sameShapes(*c, sig)) hit = c.get();
    lookup.arg("result", hit ? "hit" : "miss");
    lookup.end();
    if (hit) {
      host_.stats().planCacheHits++;
      ++replays_;
      return replay(*hit, inputs, call);
    }
    host_.stats().planCacheMisses++;
    if (static_cast<int64_t>(captures_.size()) >= limit_) {
      if (!warned_) {
        warned_ = true;
        compileLogger()->warn(
            "reduce-overhead: hit capture_limit ({}); shapes [{}] and every later new shape run "
            "eagerly, op by op, without capturing. Captured shapes keep replaying",
            limit_, signatureToString(host_.graph(), sig));
      }
      ++eagerRuns_;
      call.rec.modeFields.emplace_back("capture", "eager (capture limit)");
      return host_.runOpByOp(host_.graph(), nullptr, inputs, /*syncPerOp=*/false,
                             ModeHost::OpKernels::kChooser, call, chooser(), {});
    }
    return capture(inputs, sig, call);
  }

  std::vector<ModeCounter> counters() const override {
    return {{"captures", static_cast<int64_t>(captures_.size())},
            {"replays", replays_},
            {"eager_runs", eagerRuns_},
            {"capture_limit", limit_}};
  }

 private:
  bool sameShapes(const Capture& c, const InputSignature& sig) const {
    const Graph& g = host_.graph();
    for (size_t i = 0; i < sig.size(); ++i)
      if (c.types[g.inputs[i]].shape != sig[i]) return false;
    return true;
  }

  // The kernel of one node: the static one when a kernel store holds it (a precompiled
  // bundle), else the eager op's shape-generic kernel from the kernel cache.
  ModeHost::KernelChooser chooser() {
    return [this](NodeId, const KernelKey& key, int* compiled) {
      for (const auto& store : host_.options().kernelStores)
        if (store->has(key)) return host_.kernels().get(key, compiled);
      KernelKey generic = key;
      for (TensorType& t : generic.inputs)
        for (int d = 0; d < t.shape.rank(); ++d) t.shape[d] = kAnyDim;
      return host_.kernels().get(generic, compiled);
    };
  }

  std::vector<Tensor> capture(std::span<const Tensor> inputs, const InputSignature& sig,
                              CallContext& call) {
    const Graph& g = host_.graph();
    TimelineSpan span = host_.span("capture", "graph_compile");
    const auto start = std::chrono::steady_clock::now();
    auto c = std::make_unique<Capture>();
    c->types.resize(g.values.size());
    for (size_t i = 0; i < sig.size(); ++i)
      c->types[g.inputs[i]] = TensorType{g.values[g.inputs[i]].type.dtype, sig[i]};
    for (const Node& n : g.nodes)
      if (n.kind == OpKind::kConst)
        c->types[n.output] = TensorType{n.constant->dtype(), n.constant->shape()};
    // The capturing run: op by op, every node's kernel and output type recorded.
    std::vector<Tensor> out = host_.runOpByOp(
        g, nullptr, inputs, /*syncPerOp=*/false, ModeHost::OpKernels::kChooser, call, chooser(),
        [&](NodeId n, const std::shared_ptr<const KernelSpec>& spec, const KernelKey& key,
            std::span<const TensorView>, const TensorView& ov) {
          c->ops.push_back({n, spec, key});
          c->types[g.nodes[n].output] = TensorType{ov.dtype, ov.shape};
        });
    // The capture's memory: one block for every intermediate (outputs go to the caller's
    // tensors, inputs and constants are read in place).
    std::vector<bool> isOutput(g.values.size(), false);
    for (ValueId v : g.outputs) isOutput[v] = true;
    c->offset.assign(g.values.size(), -1);
    size_t bytes = 0;
    for (const Capture::Op& op : c->ops) {
      const ValueId v = g.nodes[op.node].output;
      if (isOutput[v]) continue;
      c->offset[v] = static_cast<int64_t>(bytes);
      const TensorType& t = c->types[v];
      bytes += (static_cast<size_t>(t.shape.numel()) * dtypeSize(t.dtype) + 63) / 64 * 64;
    }
    // Measured: the capturing call's host time is capture time (the run is what it records).
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Counted as a graph compile and costed (MODELED) by the profile's graph-compile terms.
    c->id = host_.recordGraphCompile("first call of these shapes: captured",
                                     host_.options().cost.graphCompile(g.nodes.size()), secs, call);
    // The block is the capture's workspace: resident from now on (Error(kMemory) when it does
    // not fit the device's capacity).
    int64_t io = 0;
    for (ValueId v : g.inputs) io += checkedBytes(c->types[v].shape, c->types[v].dtype, "input");
    for (ValueId v : g.outputs) io += checkedBytes(c->types[v].shape, c->types[v].dtype, "output");
    c->arena = host_.holdWorkspace(c->id, sig, static_cast<int64_t>(bytes), io, call);
    c->arenaBytes = bytes;
    if (span.on()) span.setName(fmt::format("capture #{} ({} kernels)", c->id, c->ops.size()));
    call.rec.modeFields.emplace_back("capture", fmt::format("captured #{}", c->id));
    captures_.push_back(std::move(c));
    return out;
  }

  std::vector<Tensor> replay(const Capture& c, std::span<const Tensor> inputs, CallContext& call) {
    const Graph& g = host_.graph();
    call.rec.planId = c.id;
    call.rec.modeFields.emplace_back("capture", fmt::format("replayed #{}", c.id));
    // Where each value lives for this call: the caller's inputs, the constants, the capture's
    // block, and fresh output tensors.
    std::vector<TensorView> views(g.values.size());
    for (size_t i = 0; i < inputs.size(); ++i) views[g.inputs[i]] = inputs[i].view();
    for (const Node& n : g.nodes)
      if (n.kind == OpKind::kConst) views[n.output] = n.constant->view();
    std::vector<Tensor> out(g.outputs.size());
    std::vector<bool> bound(g.values.size(), false);
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      const ValueId v = g.outputs[i];
      if (bound[v] || views[v].data) continue;  // a repeat, an input or a constant: copied after
      out[i] = Tensor(c.types[v].dtype, c.types[v].shape);
      views[v] = out[i].view();
      bound[v] = true;
    }
    for (const Capture::Op& op : c.ops) {
      const ValueId v = g.nodes[op.node].output;
      if (c.offset[v] >= 0)
        views[v] = TensorView{c.arena ? c.arena.get() + c.offset[v] : nullptr, c.types[v].dtype,
                              c.types[v].shape};
    }
    // MODELED: every captured kernel at the captured shapes, no host work per op.
    for (const Capture::Op& op : c.ops) host_.chargeKernel(op.key, op.spec->generic, call);
    host_.launchGraph(
        static_cast<int64_t>(c.ops.size()),
        [&c, &g, &views] {
          std::vector<TensorView> args;
          for (const Capture::Op& op : c.ops) {
            const Node& node = g.nodes[op.node];
            args.clear();
            for (ValueId v : node.inputs) args.push_back(views[v]);
            try {
              kernels::runViews(*op.spec, args, views[node.output]);
            } catch (const std::exception& e) {
              rethrowForNode(g, op.node, e);
            }
          }
        },
        [&c] { return fmt::format("replay capture #{} (one graph launch + sync)", c.id); }, call);
    // Outputs that are inputs, constants or repeats are copies.
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      if (!out[i].empty()) continue;
      const TensorView& v = views[g.outputs[i]];
      out[i] = Tensor(v.dtype, v.shape);
      if (out[i].bytes()) std::memcpy(out[i].data(), v.data, out[i].bytes());
    }
    return out;
  }

  ModeHost& host_;
  int64_t limit_ = kDefaultCaptureLimit;
  std::vector<std::unique_ptr<Capture>> captures_;
  int64_t replays_ = 0, eagerRuns_ = 0;
  bool warned_ = false;
};

}  // namespace

std::unique_ptr<ModeStrategy> makeReduceOverheadMode(ModeHost& host) {
  return std::make_unique<ReduceOverheadMode>(host);
}

}  // namespace gearbox
