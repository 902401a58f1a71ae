#include "compiler/compiler.h"

#include <fmt/format.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>

#include "compiler/compile_log.h"
#include "compiler/cpu_isa.h"
#include "compiler/memory_plan.h"
#include "compiler/weight_pack.h"
#include "graph/error.h"

namespace gearbox {

std::string Plan::summary() const {
  return fmt::format(
      "plan #{} [{}]: {} {}, {} {} compiled, {} reused, arena {} B (without reuse {} B)", id,
      signatureToString(*graph, signature), steps.size(), steps.size() == 1 ? "step" : "steps",
      kernelsCompiled, kernelsCompiled == 1 ? "kernel" : "kernels", kernelsReused, arenaBytes,
      naiveBytes);
}

namespace {
std::atomic<uint64_t> gNextPlanId{1};

bool isStaticSignature(const InputSignature& sig) {
  for (const Shape& s : sig)
    if (!s.isStatic()) return false;
  return true;
}
}  // namespace

std::shared_ptr<std::byte> allocateArena(int64_t bytes) {
  const size_t size = static_cast<size_t>(std::max<int64_t>(bytes, kArenaAlignment));
  auto* p = static_cast<std::byte*>(std::aligned_alloc(kArenaAlignment, size));
  if (!p) throw std::bad_alloc();
  return std::shared_ptr<std::byte>(p, [](std::byte* q) { std::free(q); });
}

void bindArena(Plan& plan, std::shared_ptr<std::byte> arena) {
  plan.arena = std::move(arena);
  for (size_t v = 0; v < plan.storage.size(); ++v)
    if (plan.storage[v] == Storage::kArena) plan.ptrs[v] = plan.arena.get() + plan.location[v];
  plan.argsBound = false;
}

std::shared_ptr<Plan> compilePlan(const Graph& g, const InputSignature& sig, KernelCache& kernels,
                                  const PlanCompileOptions& options) {
  return compilePlan(std::make_shared<const Graph>(g), sig, kernels, options);
}

namespace {

// When each value is made and last read, by step index (-1: not made by a step / never read).
struct Lifetimes {
  std::vector<int> producerStep, lastUse;
};

// A MatMul whose B is a constant the direct path reads in strips (matMulStripWidth says where)
// gets B packed (shared with the graph's other plans) and its own copy of the spec, which says in
// which width: its own tile's, or the other tile's where another plan (another gear) already
// holds B in those strips.
void bindPackedMatMulB(Plan& plan, const Graph& g, const Node& node, PlanStep& step) {
  // GEARBOX_PACK_MATMUL=0 keeps every B in place (A/B timing, as GEARBOX_BATCH_TILES=0).
  static const bool off = [] {
    const char* e = std::getenv("GEARBOX_PACK_MATMUL");
    return e && std::string_view(e) == "0";
  }();
  if (off || !std::holds_alternative<MatMulParams>(step.kernel->params) ||
      std::get<MatMulParams>(step.kernel->params).bPacked)
    return;
  // A skinny spec on AVX-512 (M <= 2, the path for B in place) as the direct path would run it.
  const std::shared_ptr<const KernelSpec> forStrips = matMulSpecForStrips(step.kernel);
  const auto* p = &std::get<MatMulParams>(forStrips->params);
  // Gears whose M pick the other tile (M = 8 and 32: 8 x 48; 6, 13 and 16: 6 x 64) read the
  // strips another gear's plan holds, in that width's tile (gemmF32StripsB runs any width's
  // tile whatever M), rather than packing a second copy of B (4 MiB more for a 1024 x 1024
  // weight): ONNX Runtime and TorchAir keep one packed weight per session whatever the shapes.
  // The plan's own width first; it packs only its own.
  const int64_t own = matMulStripWidth(*p);
  const int64_t other = gemmDirectTile(p->m).vectors * 16 == 48 ? 64 : 48;
  const int64_t share = matMulStripsFit(*p, other) ? other : 0;
  const ValueId b = node.inputs[1];
  const TensorType& bt = plan.types[b];
  if ((own == 0 && share == 0) || plan.storage[b] != Storage::kConst || bt.dtype != DType::kF32 ||
      bt.shape.rank() != 2 || bt.shape[0] != p->k || bt.shape[1] != p->n)
    return;
  const Node& producer = g.nodes[g.values[b].producer];
  bool packedNow = false;
  int64_t width = 0;
  auto packed =
      weightPackCache().getMatMulB(producer.constant, p->k, p->n, own, share, &width, &packedNow);
  if (!packed) return;  // only the other width fits, and no plan holds it
  step.packedWeight = std::move(packed);
  plan.packedWeightBytes +=
      matMulPackedBFloats(p->k, p->n, width) * static_cast<int64_t>(sizeof(float));
  plan.weightsPackedNow += packedNow ? 1 : 0;
  auto spec = std::make_shared<KernelSpec>(*forStrips);
  std::get<MatMulParams>(spec->params).bPacked = width;
  step.kernel = std::move(spec);
}

// A conv2d on the channel-tile path (or the depthwise channel-block path, or AVX2's 1x1 into or
// from channel blocks) whose weight is a constant gets the weight packed for the path (shared
// with the graph's other plans) and its own copy of the spec, which says so. Any other weight (a
// graph input, a computed value) keeps the path the spec falls back to (channel blocks then
// transpose the weights per item). MatMul's B: bindPackedMatMulB.
void bindPackedWeight(Plan& plan, const Graph& g, const Node& node, PlanStep& step) {
  if (node.kind == OpKind::kMatMul && plan.isStatic) bindPackedMatMulB(plan, g, node, step);
  if (node.kind != OpKind::kConv2d || !plan.isStatic) return;
  const auto* p = std::get_if<ConvParams>(&step.kernel->params);
  if (!p || !(p->channelTiles || p->channelBlocks || p->outBlocked || p->inBlocked) ||
      p->weightsPacked)
    return;
  const ValueId w = node.inputs[1];
  if (plan.storage[w] != Storage::kConst) return;
  const Node& producer = g.nodes[g.values[w].producer];
  bool packedNow = false;
  step.packedWeight = weightPackCache().get(producer.constant, *p, &packedNow);
  plan.packedWeightBytes += convPackedWeightFloats(*p) * static_cast<int64_t>(sizeof(float));
  plan.weightsPackedNow += packedNow ? 1 : 0;
  // Last: the old spec (and *p) may be the plan's own copy, freed when replaced.
  auto spec = std::make_shared<KernelSpec>(*step.kernel);
  std::get<ConvParams>(spec->params).weightsPacked = 1;
  step.kernel = std::move(spec);
}

// Activations in channel blocks. Between a conv and the 3 x 3 depthwise conv it feeds
// (MobileNetV2's expanding 1x1 and its stem, ShuffleNetV2's 1x1s), and between that depthwise
// conv and the 1x1 conv after it, a static plan on AVX-512 keeps the tensor as
// [n, c / 16, h, w, 16]: the depthwise channel-block path then reads its rows in place instead
// of transposing them in and out (16 shuffles per output vector at stride 2 against 9 FMAs;
// 20% of MobileNetV2 at batch 32), and the channel-tile conv stores its 7 x 64 tile as 28
// vectors instead of 448 scalars. ONNX Runtime's NCHWc transformer and oneDNN's nChw16c do the
// same. The value must be made and read by nothing else (one use, not a graph output: nobody
// else sees the layout) and have a multiple of 16 channels; the conv on the other side runs the
// channel-tile path, switched to it here if its own compile chose the im2col or in-place 1x1
// path (those write and read planes), which needs a constant weight to pack and, to read
// blocks, no padding (it reads them in place). Two dense convs in a row keep planes: the layout
// pays where a depthwise conv would transpose. On AVX2 (no channel-tile path) a 1x1 conv writes
// blocks from its GEMM tiles run as positions x channels (convBlocksFromGemmFit: the expanding
// 1x1 before a depthwise conv; its weight packed as the channel tiles' is), and a 1x1 conv reads
// them from tiles run the same way (convPointwiseFromBlocksFit: the projecting 1x1 after a
// depthwise conv), transposing 4 x 8 of its output per store: the depthwise conv, whose outputs
// take 9 FMAs each against the 1x1's K, no longer transposes its output back to planes.
// A wide depthwise conv there, which its own compile put on planes (transposing its input in
// would cost more than the planes' row loop), is switched to channel blocks when its input
// comes in blocks: kernels_bench, Zen 5 forced to AVX2, one thread, MobileNetV2's 56 x 56 x 144
// 113-134 us in blocks against 134-189 on planes (oneDNN 114-120), 112 -> 56 x 96 at stride 2
// 105-115 against 192-250 (oneDNN 98-106).
struct BlockSide {
  bool ok = false, switchToTiles = false, switchToBlocks = false;
};

BlockSide blockSide(const Plan& plan, const Graph& g, const PlanStep& step, bool reads) {
  const Node& node = g.nodes[step.node];
  const auto* p = std::get_if<ConvParams>(&step.kernel->params);
  if (node.kind != OpKind::kConv2d || !p) return {};
  // A residual (fuse-conv-residual) is added to an output in planes.
  if (!reads && node.inputs.size() > 3) return {};
  const TensorType& t = plan.types[reads ? node.inputs[0] : node.output];
  if (t.dtype != DType::kF32 || t.shape.rank() != 4 || t.shape[1] % 16 != 0) return {};
  if (p->channelBlocks) return {true, false};
  if (reads && convDepthwiseBlocksFit(*p)) return {true, false, true};
  if (p->winograd) return {};  // its transforms read and write planes
  if (plan.storage[node.inputs[1]] != Storage::kConst) return {};
  if (!reads && !p->inBlocked && convBlocksFromGemmFit(*p)) return {true, false};
  if (reads && convPointwiseFromBlocksFit(*p)) return {true, false};
  if (!convChannelTilesFit(*p)) return {};
  if (reads && !p->readsInputInPlace()) return {};
  return {true, p->channelTiles == 0};
}

void blockActivations(Plan& plan, const Graph& g, const Lifetimes& life) {
  if (!plan.isStatic) return;
  std::vector<int> uses(g.values.size(), 0);
  for (const Node& node : g.nodes)
    for (ValueId v : node.inputs) ++uses[v];
  for (ValueId v : g.outputs) uses[v] += 2;  // never blocked
  std::vector<int> readerStep(g.values.size(), -1);
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const Node& node = g.nodes[plan.steps[s].node];
    if (!node.inputs.empty()) readerStep[node.inputs[0]] = static_cast<int>(s);
  }
  auto edit = [&](PlanStep& step, auto&& change) {
    auto spec = std::make_shared<KernelSpec>(*step.kernel);
    change(std::get<ConvParams>(spec->params));
    step.kernel = std::move(spec);
  };
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const ValueId v = plan.steps[s].out;
    const int r = readerStep[v];
    if (uses[v] != 1 || r < 0 || life.producerStep[v] != static_cast<int>(s)) continue;
    PlanStep& maker = plan.steps[s];
    PlanStep& reader = plan.steps[static_cast<size_t>(r)];
    const BlockSide out = blockSide(plan, g, maker, false), in = blockSide(plan, g, reader, true);
    if (!out.ok || !in.ok) continue;
    if (!std::get<ConvParams>(maker.kernel->params).channelBlocks &&
        !std::get<ConvParams>(reader.kernel->params).channelBlocks && !in.switchToBlocks)
      continue;
    edit(maker, [&](ConvParams& p) {
      p.outBlocked = 1;
      p.channelTiles = p.channelTiles || out.switchToTiles ? 1 : 0;
    });
    edit(reader, [&](ConvParams& p) {
      p.inBlocked = 1;
      p.channelTiles = p.channelTiles || in.switchToTiles ? 1 : 0;
      p.channelBlocks = p.channelBlocks || in.switchToBlocks ? 1 : 0;
    });
    plan.blockedValues += 1;
    // A conv switched to the channel-tile (or channel-block) path needs its weight packed, as
    // planSteps packs those whose own compile chose the path.
    for (PlanStep* step : {&maker, &reader})
      if (!std::get<ConvParams>(step->kernel->params).weightsPacked)
        bindPackedWeight(plan, g, g.nodes[step->node], *step);
  }
}

// Step one: a step per non-constant node, its kernel from `kernels` (each distinct op shape
// asked for once), and where constants and graph outputs live. Returns the values' lifetimes.
Lifetimes planSteps(Plan& plan, const Graph& g, KernelCache& kernels) {
  const size_t nv = g.values.size();
  Lifetimes life{std::vector<int>(nv, -1), std::vector<int>(nv, -1)};
  size_t numArgs = 0;
  for (const Node& node : g.nodes) numArgs += node.inputs.size();
  plan.steps.reserve(g.nodes.size());
  plan.args.reserve(numArgs);
  // Each distinct op shape of the plan goes to the shared cache once; repeats (a ShuffleNet
  // stage repeats its units) are served from this memo. Parallel gear compiles then write the
  // shared cache's lines (lock, recency list) a few times per plan instead of once per op.
  struct Memo {
    size_t hash;
    std::shared_ptr<const KernelSpec> spec;  // spec->key is the key
  };
  std::vector<Memo> memo;
  memo.reserve(g.nodes.size());
  int64_t memoHits = 0;
  KernelKey key;                    // scratch, rebuilt in place for every op
  key.threads = kernels.threads();  // the compile target of every kernel of the plan
  for (NodeId n = 0; n < static_cast<NodeId>(g.nodes.size()); ++n) {
    const Node& node = g.nodes[n];
    if (node.kind == OpKind::kConst) {
      plan.storage[node.output] = Storage::kConst;
      plan.constData[node.output] = node.constant->data();
      continue;
    }
    PlanStep step;
    step.node = n;
    step.out = node.output;
    step.firstArg = static_cast<int32_t>(plan.args.size());
    step.numArgs = static_cast<int32_t>(node.inputs.size());
    const int stepIndex = static_cast<int>(plan.steps.size());
    for (ValueId v : node.inputs) {
      plan.args.push_back(v);
      life.lastUse[v] = stepIndex;
    }
    makeKernelKeyInto(key, g, plan.types, n);
    const size_t hash = key.hash();
    auto seen = std::find_if(memo.begin(), memo.end(),
                             [&](const Memo& m) { return m.hash == hash && m.spec->key == key; });
    int compiled = 0;
    if (seen != memo.end()) {
      step.kernel = seen->spec;
      ++memoHits;
    } else {
      step.kernel = kernels.get(key, hash, &compiled);
      memo.push_back(Memo{hash, step.kernel});
    }
    bindPackedWeight(plan, g, node, step);
    step.compiled = compiled > 0;
    plan.kernelsCompiled += compiled;
    plan.kernelsReused += compiled ? 0 : 1;
    life.producerStep[node.output] = stepIndex;
    plan.steps.push_back(std::move(step));
  }
  // Graph outputs produced by a kernel are written straight into the caller's buffers; the
  // first occurrence owns the buffer, repeats (and returned inputs/consts) are copied.
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const ValueId v = g.outputs[i];
    if (life.producerStep[v] >= 0 && plan.storage[v] == Storage::kNone) {
      plan.storage[v] = Storage::kOutput;
      plan.location[v] = static_cast<int64_t>(i);
    }
  }
  kernels.countMemoHits(memoHits);
  return life;
}

// Step two: a reshape moves no element (tensors are contiguous), nor do flatten, squeeze and
// unsqueeze, so in a static plan their output is a view: it shares its input's arena bytes,
// whose lifetime grows to cover the view's uses, and the kernel finds out == in and returns.
// Inputs, constants and graph outputs keep their own buffers (the kernel copies), as do dynamic
// plans, which allocate per call. Returns, per value, the value it views (-1: none).
std::vector<ValueId> planViews(const Plan& plan, const Graph& g, Lifetimes& life) {
  std::vector<ValueId> viewOf(g.values.size(), -1);
  if (!plan.isStatic) return viewOf;
  for (const PlanStep& step : plan.steps) {
    const Node& node = g.nodes[step.node];
    const bool moves = node.kind != OpKind::kReshape && node.kind != OpKind::kFlatten &&
                       node.kind != OpKind::kSqueeze && node.kind != OpKind::kUnsqueeze;
    if (moves || plan.storage[node.output] != Storage::kNone) continue;
    const ValueId in = node.inputs[0];
    const ValueId root = viewOf[in] >= 0 ? viewOf[in] : in;
    if (life.producerStep[root] < 0 || plan.storage[root] != Storage::kNone) continue;
    viewOf[node.output] = root;
    life.lastUse[root] =
        std::max({life.lastUse[root], life.lastUse[node.output], life.producerStep[node.output]});
  }
  return viewOf;
}

// Batch tiles (Plan::batchTiles). A conv step is tiled where the batch's images are
// independent through it (every conv is: image i of its output reads image i of its input and
// residual, and constants) and its activations (input, output, residual) per image are at
// least its weight's bytes: reading the weight again per tile then costs less than the
// activations' round trip through memory it saves. MobileNetV2 at batch 32 ran 0.83 of its
// batched time image by image (docs/performance.md); ResNet-18, whose deep layers hold 2.4 MB
// of weight per 100 KB image, ran 1.09. Runs of two or more such steps are tiled (one step
// alone saves no round trip), unless the whole batch's activations fit kTileBytes already. A tile
// is as many images as divide the batch and keep the run's largest step's activations within
// kTileBytes (at least one image) and leave a tile for every thread. On more than one thread the
// threads run whole tiles (lanes), each tile's kernels on one task, rather than splitting each
// kernel of each tile: a fork-join per tile and step cost ShuffleNetV2 at batch 32 on two threads
// 7% against no tiles, and each lane's tile stays in its own core's L2.
constexpr int64_t kTileBytes = 1 << 20;  // a Zen 4 / Ice Lake core's L2: the tile's working set

// Per value, whether it lives only inside one batch tile's run (made there, read only there,
// not a graph output, not viewed): it then needs a tile's images, not the batch's.
std::vector<bool> planBatchTiles(Plan& plan, const Graph& g, const Lifetimes& life,
                                 const std::vector<ValueId>& viewOf, int threads) {
  std::vector<bool> inner(g.values.size(), false);
  plan.argTileStride.assign(plan.args.size(), 0);
  plan.argLaneStride.assign(plan.args.size(), 0);
  // The thread cap the plan's kernels are compiled for (0: every thread of the compiling arena,
  // as decideTasks takes it).
  const int64_t cap = threads > 0 ? threads : std::max(1, tbb::this_task_arena::max_concurrency());
  if (!plan.isStatic) return inner;
  static const bool off = [] {
    const char* e = std::getenv("GEARBOX_BATCH_TILES");
    return e && std::string_view(e) == "0";
  }();
  if (off) return inner;
  auto bytesOf = [&](ValueId v) {
    const TensorType& t = plan.types[v];
    return t.shape.numel() * static_cast<int64_t>(dtypeSize(t.dtype));
  };
  // The batch of a tileable step (0: not tileable) and its activations' bytes per image.
  auto tileable = [&](const PlanStep& step, int64_t* perImage) -> int64_t {
    const Node& node = g.nodes[step.node];
    if (node.kind != OpKind::kConv2d || !std::holds_alternative<ConvParams>(step.kernel->params) ||
        node.inputs.size() > 4)  // x, w, b, residual: what the runner's tile arguments hold
      return 0;
    const TensorType& x = plan.types[node.inputs[0]];
    const int64_t n = x.shape[0];
    if (n < 2 || plan.types[node.output].shape[0] != n) return 0;
    for (size_t i = 1; i < node.inputs.size() && i < 3; ++i)
      if (plan.storage[node.inputs[i]] != Storage::kConst) return 0;
    int64_t act = bytesOf(node.inputs[0]) + bytesOf(node.output);
    if (node.inputs.size() > 3) {
      if (plan.types[node.inputs[3]].shape[0] != n) return 0;
      act += bytesOf(node.inputs[3]);
    }
    *perImage = act / n;
    return *perImage >= bytesOf(node.inputs[1]) ? n : 0;
  };
  const auto numSteps = static_cast<int32_t>(plan.steps.size());
  for (int32_t s = 0; s < numSteps;) {
    int64_t perImage = 0;
    const int64_t n = tileable(plan.steps[s], &perImage);
    int32_t e = s + 1;
    int64_t most = perImage;
    for (int64_t p = 0; n > 0 && e < numSteps && tileable(plan.steps[e], &p) == n; ++e)
      most = std::max(most, p);
    if (n == 0 || e - s < 2) {
      s = e;
      continue;
    }
    if (n * most <= kTileBytes) {  // the whole batch stays in cache already
      s = e;
      continue;
    }
    int64_t images = 1;
    for (int64_t d = 2; d <= n / 2; ++d)
      if (n % d == 0 && d * most <= kTileBytes && n / d >= cap) images = d;
    const int64_t tiles = n / images, lanes = std::min(cap, tiles);
    plan.batchTiles.push_back(Plan::BatchTile{s, e, images, tiles, static_cast<int>(lanes)});
    for (int32_t i = s; i < e; ++i) {
      const ValueId v = plan.steps[i].out;
      inner[v] = viewOf[v] < 0 && plan.storage[v] == Storage::kNone && life.lastUse[v] >= 0 &&
                 life.lastUse[v] < e;
    }
    for (int32_t i = s; i < e; ++i) {
      PlanStep& step = plan.steps[i];
      const Node& node = g.nodes[step.node];
      KernelKey key = step.kernel->key;
      key.threads = lanes > 1 ? 1 : key.threads;  // a lane runs its tile's kernels alone
      key.inputs[0].shape[0] = images;
      if (key.inputs.size() > 3) key.inputs[3].shape[0] = images;
      auto spec = std::make_shared<KernelSpec>(*compileKernelSpec(key));
      // The plan's decisions (compiler.cpp's bindPackedWeight and blockActivations) hold for a
      // tile too: the packed weight is bound, and the layout is the whole batch's.
      const auto& whole = std::get<ConvParams>(step.kernel->params);
      auto& tile = std::get<ConvParams>(spec->params);
      tile.channelTiles = whole.channelTiles;
      tile.channelBlocks = whole.channelBlocks;
      tile.winograd = whole.winograd;  // the packed weight's layout
      tile.weightsPacked = whole.weightsPacked;
      tile.inBlocked = whole.inBlocked;
      tile.outBlocked = whole.outBlocked;
      step.tileKernel = std::move(spec);
      // A value of the batch (x, the residual, the output; a constant too) moves a tile's
      // images per tile; the weight and bias stay; a value inside the run stays in its lane's
      // block (planArena sets the lane strides).
      auto tileStride = [&](ValueId v) { return inner[v] ? 0 : bytesOf(v) / n * images; };
      step.outTileStride = tileStride(node.output);
      for (int32_t a = 0; a < step.numArgs; ++a) {
        const int32_t slot = step.firstArg + a;
        plan.argTileStride[slot] = a == 1 || a == 2 ? 0 : tileStride(plan.args[slot]);
      }
    }
    s = e;
  }
  return inner;
}

// Step three: every other value a step makes lives in the arena; a static plan gets its offsets
// from the memory planner (views at their root's offset), a dynamic one allocates per call. With
// batch tiles, the arena the host allocates is planned again: a value made and read inside a
// tile's run holds a tile's images, and every other value a run reads or writes stays live
// through the whole run (tile t reads its input after tile t - 1 ran every step). arenaBytes is
// the plan without tiles either way.
void planArena(Plan& plan, const Graph& g, const Lifetimes& life,
               const std::vector<ValueId>& viewOf, const std::vector<bool>& inner) {
  const size_t nv = plan.storage.size();
  std::vector<BufferRequest> requests, hostRequests;
  std::vector<ValueId> requestValue;
  requests.reserve(nv);
  requestValue.reserve(nv);
  for (ValueId v = 0; v < static_cast<ValueId>(nv); ++v) {
    if (life.producerStep[v] < 0 || plan.storage[v] != Storage::kNone) continue;
    plan.storage[v] = Storage::kArena;
    if (!plan.isStatic || viewOf[v] >= 0) continue;  // dynamic: per-call pool; views: below
    const TensorType& t = plan.types[v];
    requests.push_back(BufferRequest{
        static_cast<int64_t>(t.shape.numel()) * static_cast<int64_t>(dtypeSize(t.dtype)),
        life.producerStep[v], std::max(life.producerStep[v], life.lastUse[v])});
    requestValue.push_back(v);
  }
  if (!plan.isStatic) return;
  MemoryPlan mp = planMemory(requests);
  plan.arenaBytes = mp.arenaBytes;
  plan.naiveBytes = mp.naiveBytes;
  plan.hostArenaBytes = mp.arenaBytes;
  for (size_t i = 0; i < requests.size(); ++i) plan.location[requestValue[i]] = mp.offsets[i];
  if (!plan.batchTiles.empty()) {
    // The values inside a run get a block per lane: planned once at a tile's size (their own
    // plan, offsets within the block), the block repeated for each lane. Lanes run unsynchronised
    // (lane 0 at the run's fifth step while lane 1 is at its second), so two values may share
    // bytes only within a lane's block: planned among the run's other values, a value whose
    // lifetime ends before another's starts would share offsets with it across lanes too, and
    // lane 1's copy of one would overlap lane 0's of the other where their sizes differ.
    std::vector<size_t> requestOf(nv, SIZE_MAX);
    for (size_t i = 0; i < requests.size(); ++i) requestOf[requestValue[i]] = i;
    std::vector<bool> placed(requests.size(), true);  // in hostRequests as itself
    hostRequests = requests;
    struct Block {
      std::vector<ValueId> values;
      std::vector<int64_t> offsets;
      int64_t bytes = 0;
    };
    std::vector<Block> blocks(plan.batchTiles.size());
    for (size_t r = 0; r < plan.batchTiles.size(); ++r) {
      const Plan::BatchTile& tile = plan.batchTiles[r];
      std::vector<BufferRequest> own;
      for (int32_t s = tile.first; s < tile.end; ++s) {
        const PlanStep& step = plan.steps[s];
        // A value the run reads from before it or leaves for after it lives through the run.
        auto widen = [&](ValueId v) {
          const ValueId root = viewOf[v] >= 0 ? viewOf[v] : v;
          if (inner[root] || requestOf[root] == SIZE_MAX) return;
          BufferRequest& q = hostRequests[requestOf[root]];
          q.first = std::min(q.first, tile.first);
          q.last = std::max(q.last, tile.end - 1);
        };
        widen(step.out);
        for (ValueId v : g.nodes[step.node].inputs) widen(v);
        if (!inner[step.out]) continue;
        const BufferRequest& whole = requests[requestOf[step.out]];
        own.push_back(BufferRequest{whole.bytes / tile.tiles, whole.first, whole.last});
        blocks[r].values.push_back(step.out);
        placed[requestOf[step.out]] = false;
      }
      const MemoryPlan sub = planMemory(own);
      blocks[r].offsets = sub.offsets;
      blocks[r].bytes = (sub.arenaBytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
    }
    std::vector<BufferRequest> host;
    std::vector<ValueId> hostValue;  // -1 - r: run r's lane blocks
    for (size_t i = 0; i < hostRequests.size(); ++i)
      if (placed[i]) {
        host.push_back(hostRequests[i]);
        hostValue.push_back(requestValue[i]);
      }
    for (size_t r = 0; r < blocks.size(); ++r) {
      const Plan::BatchTile& tile = plan.batchTiles[r];
      if (blocks[r].values.empty()) continue;
      host.push_back(BufferRequest{blocks[r].bytes * tile.lanes, tile.first, tile.end - 1});
      hostValue.push_back(-1 - static_cast<ValueId>(r));
    }
    const MemoryPlan hp = planMemory(host);
    plan.hostArenaBytes = hp.arenaBytes;
    for (size_t i = 0; i < host.size(); ++i) {
      if (hostValue[i] >= 0) {
        plan.location[hostValue[i]] = hp.offsets[i];
        continue;
      }
      const Block& b = blocks[static_cast<size_t>(-1 - hostValue[i])];
      for (size_t k = 0; k < b.values.size(); ++k)
        plan.location[b.values[k]] = hp.offsets[i] + b.offsets[k];
    }
    // A value inside a run moves a lane's block per lane.
    for (size_t r = 0; r < blocks.size(); ++r)
      for (int32_t s = plan.batchTiles[r].first; s < plan.batchTiles[r].end; ++s) {
        PlanStep& step = plan.steps[s];
        if (inner[step.out]) step.outLaneStride = blocks[r].bytes;
        for (int32_t a = 0; a < step.numArgs; ++a) {
          const int32_t slot = step.firstArg + a;
          if (inner[plan.args[slot]]) plan.argLaneStride[slot] = blocks[r].bytes;
        }
      }
  }
  for (ValueId v = 0; v < static_cast<ValueId>(nv); ++v)
    if (viewOf[v] >= 0) plan.location[v] = plan.location[viewOf[v]];
}

}  // namespace

std::shared_ptr<Plan> compilePlan(std::shared_ptr<const Graph> graph, const InputSignature& sig,
                                  KernelCache& kernels, const PlanCompileOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const Graph& g = *graph;
  auto plan = std::make_shared<Plan>();
  plan->id = options.id ? options.id : gNextPlanId++;
  plan->signature = sig;
  plan->types = specializeTypes(g, sig);
  plan->graph = std::move(graph);
  plan->isStatic = isStaticSignature(sig);
  plan->reason = options.reason;
  const size_t nv = g.values.size();
  plan->storage.assign(nv, Storage::kNone);
  plan->location.assign(nv, -1);
  plan->constData.assign(nv, nullptr);
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    plan->storage[g.inputs[i]] = Storage::kInput;
    plan->location[g.inputs[i]] = static_cast<int64_t>(i);
  }

  Lifetimes life = planSteps(*plan, g, kernels);
  blockActivations(*plan, g, life);
  const std::vector<ValueId> viewOf = planViews(*plan, g, life);
  const std::vector<bool> inner = options.batchTiles
                                      ? planBatchTiles(*plan, g, life, viewOf, kernels.threads())
                                      : std::vector<bool>(nv, false);
  if (plan->argTileStride.empty()) plan->argTileStride.assign(plan->args.size(), 0);
  if (plan->argLaneStride.empty()) plan->argLaneStride.assign(plan->args.size(), 0);
  planArena(*plan, g, life, viewOf, inner);

  plan->ptrs.assign(nv, nullptr);
  plan->argPtrs.assign(plan->args.size(), nullptr);
  for (ValueId v = 0; v < static_cast<ValueId>(nv); ++v)
    if (plan->storage[v] == Storage::kConst) plan->ptrs[v] = const_cast<void*>(plan->constData[v]);
  if (plan->isStatic && options.allocateArena)
    bindArena(*plan, allocateArena(plan->hostArenaBytes));
  plan->compileSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto& log = compileLogger();
  if (log->should_log(spdlog::level::info))
    log->info("Compiled graph {} plan #{} for [{}] ({}): {} {} compiled, {} reused", g.name,
              plan->id, signatureToString(g, sig), options.reason, plan->kernelsCompiled,
              plan->kernelsCompiled == 1 ? "kernel" : "kernels", plan->kernelsReused);
  return plan;
}

}  // namespace gearbox
