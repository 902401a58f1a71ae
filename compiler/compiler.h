#pragma once
// The static compiler: input signature -> specialised graph -> verification -> memory plan ->
// per-op kernels from the kernel cache -> a Plan (cached by signature in a PlanCache).
//
//   build graph -> compilePlan(graph, signature) -> Plan (cached) -> bind buffers -> run
//
// Nothing compiles inside run; a static plan's run allocates nothing (executor/plan_runner.h).

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/kernel_cache.h"
#include "compiler/kernel_spec.h"
#include "compiler/lru_cache.h"
#include "compiler/specialize.h"

namespace gearbox {

// Where the data of one value lives while a plan runs.
enum class Storage : uint8_t { kInput, kConst, kArena, kOutput, kNone };

struct PlanStep {
  std::shared_ptr<const KernelSpec> kernel;
  NodeId node = 0;
  int32_t firstArg = 0;  // into Plan::args
  int32_t numArgs = 0;
  ValueId out = 0;
  bool compiled = false;  // this plan's compile compiled the kernel (not a cache or memo hit)
  // A conv2d whose weight is a constant, on the channel-tile path: the weight packed for it
  // (compiler/weight_pack.h), bound as input 1 when the step runs; `kernel` is then the plan's
  // copy of the cached spec with ConvParams::weightsPacked set. Likewise a MatMul's constant B
  // in strips (MatMulParams::bPacked; for 1 or 2 rows on AVX-512 the copy also moves from the
  // skinny path to the direct path and its split: matMulSpecForStrips).
  std::shared_ptr<const float> packedWeight;
  // In a batch tile (Plan::batchTiles): the same kernel compiled for the tile's images (the
  // plan's spec with ConvParams::n = Plan::BatchTile::images), which the run calls once per tile.
  std::shared_ptr<const KernelSpec> tileKernel;
  int64_t outTileStride = 0;  // bytes the output moves per tile (a value of the whole batch)
  int64_t outLaneStride = 0;  // bytes it moves per lane (a value inside the run: one per lane)
};

struct Plan {
  uint64_t id = 0;
  InputSignature signature;  // may hold dynamic dims (automatic-dynamic plans)
  // The graph compiled, shared with the session and every other plan of it: a plan is
  // compiled per shape (64 at once for 64 gears), and copying the graph each time was most of
  // a plan's allocations.
  std::shared_ptr<const Graph> graph;
  std::vector<TensorType> types;  // per value of `graph`, specialised to `signature`
  bool isStatic = true;           // every dim concrete: runs with precompiled params, no allocation
  std::vector<PlanStep> steps;
  std::vector<ValueId> args;           // flattened step inputs
  std::vector<Storage> storage;        // per value
  std::vector<int64_t> location;       // per value: input index, arena offset, or output index
  std::vector<const void*> constData;  // per value (consts only)
  int64_t arenaBytes = 0;              // peak intermediate bytes after reuse
  int64_t naiveBytes = 0;              // without reuse
  // Batch tiles: runs of conv steps [first, end) whose activations outweigh their weights, which
  // the CPU executor runs `images` images at a time through the whole run (depth first) instead
  // of each step over the whole batch, so that a tile's activations stay in cache from one conv
  // to the next. What the run is (its steps, launches, kernels) does not change: it is how the
  // host executes the plan. Values made and read only inside a run then need a tile's bytes,
  // not the batch's: hostArenaBytes, what the host allocates; arenaBytes stays the plan's
  // memory at the whole batch (the modeled device's workspace).
  // On more than one thread, `lanes` threads each run whole tiles, one at a time, their kernels
  // compiled for one task.
  struct BatchTile {
    int32_t first = 0, end = 0;
    int64_t images = 0, tiles = 0;  // images per tile, tiles per call
    int lanes = 1;
  };
  std::vector<BatchTile> batchTiles;
  std::vector<int64_t> argTileStride;  // per Plan::args slot: bytes moved per tile
  std::vector<int64_t> argLaneStride;  // per Plan::args slot: bytes moved per lane
  int64_t hostArenaBytes = 0;
  int kernelsCompiled = 0;  // kernel compiles this plan caused (others were cache hits)
  int kernelsReused = 0;
  int64_t packedWeightBytes = 0;  // packs this plan holds (shared with other plans of the graph)
  int weightsPackedNow = 0;       // packs this plan's compile made (not found in the cache)
  // Values held in channel blocks between two convs (compiler.cpp's blockActivations; their
  // steps' specs are the plan's copies with ConvParams::inBlocked / outBlocked set).
  int blockedValues = 0;
  double compileSeconds = 0;  // measured host time
  std::string reason;

  // Scratch owned by the plan so that running it allocates nothing. A plan runs on one
  // thread at a time (the session's).
  std::shared_ptr<std::byte> arena;
  mutable std::vector<void*> ptrs;  // per value
  mutable std::vector<const void*> argPtrs;
  // The argPtrs slots that change from call to call (graph inputs and outputs), and whether the
  // others are filled for the arena bound now: a call whose buffers differ from the last call's
  // (boundIo) then rewrites only those slots instead of gathering every argument of every step
  // (executor/plan_runner.cpp).
  mutable std::vector<int32_t> callArgSlots;
  mutable bool argsBound = false;
  // The steps as the run loop reads them, filled with the arguments: 24 bytes each, where a
  // PlanStep is 88, the output's address resolved (executor/plan_runner.cpp). The steps whose
  // output is the caller's buffer (Storage::kOutput) get theirs again on a call whose buffers
  // differ from the last call's.
  struct RunStep {
    const KernelSpec* kernel;
    void* out;
    int32_t firstArg;  // an index, not a pointer: a copy of the plan has its own argPtrs
  };
  mutable std::vector<RunStep> runSteps;
  mutable std::vector<int32_t> callOutSteps;
  // The input then output buffers of the last call: the same ones again rewrite no slot.
  mutable std::vector<const void*> boundIo;

  std::string summary() const;
};

struct PlanCompileOptions {
  std::string reason;
  // A static plan gets its own arena. Plans that never run at the same time can share one
  // instead (the gears of a session: one call runs one gear): compile them without, then
  // bindArena one arena of the largest hostArenaBytes to each.
  bool allocateArena = true;
  // The plan's id; 0 takes the next process-wide id. A session numbers its own plans from 1 so
  // reports and guard failures ("plan #2") read the same whichever sessions ran before it.
  uint64_t id = 0;
  // Batch tiles (Plan::batchTiles) where they pay; false runs every step over the whole batch.
  bool batchTiles = true;
};

// An arena of at least `bytes` (kArenaAlignment-aligned), and pointing a static plan's arena
// values into it. bindArena needs arena.size >= plan.hostArenaBytes.
std::shared_ptr<std::byte> allocateArena(int64_t bytes);
void bindArena(Plan& plan, std::shared_ptr<std::byte> arena);

// Compiles `g` for `sig`. With a fully static signature every kernel is static; with
// dynamic dims left in `sig` the kernels are shape-generic (dynamic mode). Throws Error.
std::shared_ptr<Plan> compilePlan(std::shared_ptr<const Graph> g, const InputSignature& sig,
                                  KernelCache& kernels, const PlanCompileOptions& options = {});
// Convenience for one-off compiles: the plan keeps its own copy of `g`.
std::shared_ptr<Plan> compilePlan(const Graph& g, const InputSignature& sig, KernelCache& kernels,
                                  const PlanCompileOptions& options = {});

using PlanCache = LruCache<InputSignature, std::shared_ptr<Plan>, SignatureHash>;

}  // namespace gearbox
