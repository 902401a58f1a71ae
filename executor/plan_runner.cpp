#include "executor/plan_runner.h"

#include <atomic>
#include <cstddef>
#include <cstring>
#include <exception>
#include <mutex>

#include "executor/kernels.h"
#include "executor/kernels/common.h"
#include "graph/error.h"

namespace gearbox {

namespace {
// A tiled step is a conv2d: x, w, b, residual.
constexpr int32_t kMaxTileArgs = 4;
}  // namespace

void rethrowForNode(const Graph& g, NodeId node, const std::exception& e) {
  const Node& n = g.nodes[node];
  std::string what = e.what();
  if (auto* err = dynamic_cast<const Error*>(&e)) {
    // Index errors come from the index operand: the last input of IndexSelect / CatGather.
    if (err->kind() == ErrorKind::kIndex && !n.inputs.empty()) {
      const size_t i = n.inputs.size() - 1;
      fail(ErrorKind::kIndex, "{}: input {} (%{}): {}", g.describeNode(node), i,
           g.values[n.inputs[i]].name, what);
    }
    fail(err->kind(), "{}: {}", g.describeNode(node), what);
  }
  fail(ErrorKind::kShape, "{}: {}", g.describeNode(node), what);
}

void runStaticPlan(const Plan& plan, std::span<const TensorView> inputs,
                   std::span<const TensorView> outputs) {
  const Graph& g = *plan.graph;
  void** ptrs = plan.ptrs.data();
  for (size_t i = 0; i < g.inputs.size(); ++i) ptrs[g.inputs[i]] = inputs[i].data;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const ValueId v = g.outputs[i];
    if (plan.storage[v] == Storage::kOutput && plan.location[v] == static_cast<int64_t>(i))
      ptrs[v] = outputs[i].data;
  }
  const void** args = plan.argPtrs.data();
  // The buffers of this call against the last call's: a caller that runs the plan on the same
  // input and output buffers again (a serving loop; modes_bench's dispatch pair, whose 100 Adds
  // each read graph input y: 100 slots rewritten per call, 0.9-1 ns a step) rewrites nothing.
  const size_t io = inputs.size() + outputs.size();
  bool sameIo = plan.argsBound && plan.boundIo.size() == io;
  for (size_t i = 0; sameIo && i < inputs.size(); ++i) sameIo = plan.boundIo[i] == inputs[i].data;
  for (size_t i = 0; sameIo && i < outputs.size(); ++i)
    sameIo = plan.boundIo[inputs.size() + i] == outputs[i].data;
  if (!sameIo) {
    plan.boundIo.resize(io);
    for (size_t i = 0; i < inputs.size(); ++i) plan.boundIo[i] = inputs[i].data;
    for (size_t i = 0; i < outputs.size(); ++i) plan.boundIo[inputs.size() + i] = outputs[i].data;
  }
  if (!plan.argsBound) {
    // Once per arena: every argument (constants, arena values, packed weights), and the slots
    // that read a graph input or output, the only ones a later call must rewrite.
    plan.callArgSlots.clear();
    for (const PlanStep& step : plan.steps) {
      for (int32_t a = 0; a < step.numArgs; ++a) {
        const int32_t slot = step.firstArg + a;
        args[slot] = ptrs[plan.args[slot]];
        const Storage s = plan.storage[plan.args[slot]];
        if ((s == Storage::kInput || s == Storage::kOutput) && !(step.packedWeight && a == 1))
          plan.callArgSlots.push_back(slot);
      }
      if (step.packedWeight) args[step.firstArg + 1] = step.packedWeight.get();
    }
    plan.runSteps.clear();
    plan.callOutSteps.clear();
    for (const PlanStep& step : plan.steps) {
      if (plan.storage[step.out] == Storage::kOutput)
        plan.callOutSteps.push_back(static_cast<int32_t>(plan.runSteps.size()));
      plan.runSteps.push_back({step.kernel.get(), ptrs[step.out], step.firstArg});
    }
    plan.argsBound = true;
  } else if (!sameIo) {
    for (const int32_t slot : plan.callArgSlots) args[slot] = ptrs[plan.args[slot]];
    for (const int32_t s : plan.callOutSteps) plan.runSteps[s].out = ptrs[plan.steps[s].out];
  }
  auto runStep = [&](const PlanStep& step) {
    try {
      kernels::run(*step.kernel, args + step.firstArg, ptrs[step.out]);
    } catch (const std::exception& e) {
      rethrowForNode(g, step.node, e);
    }
  };
  // Batch tiles (Plan::batchTiles): a run of steps goes tile by tile, each tile through every
  // step of the run, its kernels compiled for the tile's images; a value of the whole batch is
  // addressed at the tile's images, a value the run makes and reads lives in its lane's
  // tile-sized buffer. Lanes (threads) take the next tile as they finish one.
  auto runTile = [&](const Plan::BatchTile& tile, int64_t t, int64_t lane) {
    const void* tileArgs[kMaxTileArgs];
    for (int32_t s = tile.first; s < tile.end; ++s) {
      const PlanStep& step = plan.steps[s];
      for (int32_t a = 0; a < step.numArgs; ++a) {
        const int32_t slot = step.firstArg + a;
        tileArgs[a] = static_cast<const std::byte*>(args[slot]) + t * plan.argTileStride[slot] +
                      lane * plan.argLaneStride[slot];
      }
      try {
        kernels::run(*step.tileKernel, tileArgs,
                     static_cast<std::byte*>(ptrs[step.out]) + t * step.outTileStride +
                         lane * step.outLaneStride);
      } catch (const std::exception& e) {
        rethrowForNode(g, step.node, e);
      }
    }
  };
  auto runTiles = [&](const Plan::BatchTile& tile) {
    if (tile.lanes <= 1) {
      for (int64_t t = 0; t < tile.tiles; ++t) runTile(tile, t, 0);
      return;
    }
    std::atomic<int64_t> next{0};
    std::exception_ptr error;
    std::mutex errorMutex;
    kernels::detail::runRanges(tile.lanes, tile.lanes, 1, [&](int64_t begin, int64_t end) {
      for (int64_t lane = begin; lane < end; ++lane) {
        try {
          for (int64_t t = next.fetch_add(1); t < tile.tiles; t = next.fetch_add(1))
            runTile(tile, t, lane);
        } catch (...) {
          next.store(tile.tiles);
          const std::lock_guard<std::mutex> lock(errorMutex);
          if (!error) error = std::current_exception();
        }
      }
    });
    if (error) std::rethrow_exception(error);
  };
  // Most plans have no batch tiles: a loop over the steps alone, its bounds and tables in
  // registers (the loop below reloads the tile list, the step count and the lambdas' captures
  // around every kernel call, which may write any memory: 100 one-element Adds on an Intel Xeon
  // ran 1.20-1.22x modes_bench's bare kernel loop so, 1.10-1.11x this way). It walks
  // Plan::runSteps (kernel, output address, first argument: 24 bytes a step) rather than the
  // 88-byte PlanSteps, whose three fields it needs were spread over two cache lines a step and
  // whose output it looked up in ptrs: 1.09-1.16x the bare loop -> 1.06-1.09x with the change
  // above (docs/performance.md, "2026-12-05").
  if (plan.batchTiles.empty()) {
    const Plan::RunStep* const first = plan.runSteps.data();
    const Plan::RunStep* step = first;
    const Plan::RunStep* const end = step + plan.runSteps.size();
    const void** const stepArgs = args;
    try {
      for (; step != end; ++step) kernels::run(*step->kernel, stepArgs + step->firstArg, step->out);
    } catch (const std::exception& e) {
      rethrowForNode(g, plan.steps[static_cast<size_t>(step - first)].node, e);
    }
  }
  size_t nextTile = 0;
  for (size_t s = plan.batchTiles.empty() ? plan.steps.size() : 0; s < plan.steps.size();) {
    if (nextTile < plan.batchTiles.size() &&
        plan.batchTiles[nextTile].first == static_cast<int32_t>(s)) {
      const Plan::BatchTile& tile = plan.batchTiles[nextTile++];
      runTiles(tile);
      s = static_cast<size_t>(tile.end);
      continue;
    }
    runStep(plan.steps[s++]);
  }
  // Outputs that are graph inputs, constants, or repeats of another output are copies.
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const ValueId v = g.outputs[i];
    if (plan.storage[v] == Storage::kOutput && plan.location[v] == static_cast<int64_t>(i))
      continue;
    if (outputs[i].data != ptrs[v]) std::memcpy(outputs[i].data, ptrs[v], outputs[i].bytes());
  }
}

std::vector<Tensor> allocateOutputs(const Plan& plan) {
  std::vector<Tensor> out;
  out.reserve(plan.graph->outputs.size());
  for (ValueId v : plan.graph->outputs) {
    const TensorType& t = plan.types[v];
    out.emplace_back(t.dtype, t.shape);
  }
  return out;
}

std::vector<Tensor> allocateOutputs(const Plan& plan, OutputPool& pool) {
  std::vector<Tensor> out;
  out.reserve(plan.graph->outputs.size());
  for (ValueId v : plan.graph->outputs)
    out.push_back(pool.take(plan.types[v].dtype, plan.types[v].shape));
  return out;
}

}  // namespace gearbox
