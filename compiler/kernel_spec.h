#pragma once
// Kernel keys and compiled kernel specs.
//
// "Compiling a kernel" in gearbox is the CPU analogue of a device kernel compile: every
// decision that depends on the static shape is taken once -- loop bounds, strides, the code
// path (same-shape / scalar / row broadcast / general for Add, GEMM blocking for MatMul,
// contiguous row blocks for IndexSelect and Cat) and the thread split (one task for small
// work, oneTBB tasks only where the work is large enough) -- and stored in a KernelSpec.
// The executor (executor/kernels.h) runs a spec with no further shape work.
//
// A key whose shapes contain dynamic dims gives a shape-generic spec: the executor then
// derives the parameters from the runtime shapes on every call (what dynamic mode pays).

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "compiler/cpu_isa.h"
#include "graph/graph.h"

namespace gearbox {

struct KernelKey {
  OpKind kind = OpKind::kAdd;
  DType dtype = DType::kF32;       // dtype of input 0 (the data dtype)
  std::string format = "ND";       // layout; only ND today, kept for the op-info files
  std::vector<TensorType> inputs;  // every input's dtype and shape
  Attrs attrs;                     // dim already wrapped to [0, rank)
  // The thread cap the kernel is compiled for (--threads): its thread split (`tasks`) and
  // every decision that follows from it are taken for at most this many threads, so a spec is
  // a function of its key, as oneDNN keys its primitive cache by thread count too. 0 (the
  // default) means no cap: the concurrency of the oneTBB arena that compiles it, every core.
  // A key with a cap names it ("__threads=1"), so kernel_meta files and bundles of different
  // caps never mix. makeKernelKeyInto leaves it as the caller set it.
  int threads = 0;

  bool operator==(const KernelKey& o) const;
  size_t hash() const;
  bool isStatic() const;
  // Readable kernel name, unique per key, in the format of compiler/kernel_name.h, e.g.
  // "MatMul_float_ND_64_128__128_32", "Cat_float_ND_2_3__2_5__dim1",
  // "IndexSelect_float_ND_4_5__3_int32__dim0", "Transpose_float_ND_2_3_4__perm0_2_1".
  std::string name() const;
};

// Builds the key for one node of a graph, with the value types taken from `types` (indexed by
// ValueId), into an existing key, reusing its storage: a plan compile builds one key per op
// and allocates only for the distinct ones it keeps. key.threads is left as the caller set it
// (the compile target, the same for every op of a plan).
void makeKernelKeyInto(KernelKey& key, const Graph& g, std::span<const TensorType> types,
                       NodeId node);
KernelKey makeKernelKey(OpKind kind, const std::vector<TensorType>& inputs, const Attrs& attrs,
                        int threads = 0);
// A reshape key whose target names dims anywhere in its input (or expressions of them, or a
// graph input's symbols) takes its output shape as the target, so the key never depends on how
// the target was spelled; targets that resolve positionally are kept as written. An expand key
// always takes its (static) output shape as the target.
void resolveReshapeTarget(KernelKey& key, const Shape& output);

// ---- Per-op parameters decided at compile time -------------------------------------------

// Add: out[i] = a[ia(i)] + b[ib(i)].
struct AddParams {
  enum class Path : uint8_t {
    kSameShape,  // both contiguous with the output: one flat loop
    kScalarB,    // b has one element
    kScalarA,    // a has one element
    kRowB,       // b is a row broadcast along the leading dims: out[r, :] = a[r, :] + b[:]
    kRowA,       // a is the row
    kGeneral,    // arbitrary broadcast: strided loops over up to 6 dims
  };
  Path path = Path::kGeneral;
  int64_t numel = 0;
  int64_t rows = 0, cols = 0;  // kRowA / kRowB
  int rank = 0;                // kGeneral
  int64_t outDims[kMaxRank] = {};
  int64_t aStrides[kMaxRank] = {};  // 0 on broadcast dims
  int64_t bStrides[kMaxRank] = {};
  bool streamingStores = false;  // flat and row paths: see kStreamingStoreBytes
};

// Mul: out[i] = a[ia(i)] * b[ib(i)], with Add's broadcast machinery (compiler/ops/broadcast.h).
using BinaryParams = AddParams;

// How one f32 GEMM runs (executor/kernels/gemm.cpp), decided per shape and ISA by
// chooseGemmBlocking. Integer GEMMs always take kEigen.
enum class GemmPath : uint8_t {
  kEigen,   // Eigen's GEMM compiled for the baseline ISA (GEARBOX_ISA=baseline, integer dtypes)
  kPacked,  // BLIS-style: kc x nc panels of B and mc x kc panels of A packed, then a
            // register-blocked micro-kernel (6x16 on AVX2+FMA, 12x32 on AVX-512)
  kSkinny,  // small M: B's rows are streamed where they are (no packing, which would cost as
            // much as the product), A's rows read in place, blocked by kc x nc for the cache
  kDirect,  // A read in place: the micro-kernel broadcasts A and loads B where it is (or from
            // a plan's strips, MatMulParams::bPacked; or, from 256 rows with B's rows a page
            // apart, from strips it packs per K slice), in register tiles of gemmDirectTile()
            // (AVX-512's choice for M = 3..1024, and from 1 row in strips); on AVX2 (M = 4..128),
            // 4 x 24 tiles, B read in place by each panel's first row tile and copied for the
            // others, as AVX-512 does in its own tiles from 16 rows to 255 where B's rows are a
            // page apart (directCopiesB below)
};
std::string_view gemmPathName(GemmPath path);  // "eigen", "packed", "skinny", "direct"
std::optional<GemmPath> parseGemmPath(std::string_view text);

// Cache blocking of one GEMM: kc deep, mc rows of A and nc columns of B per block. Zero for
// kEigen (Eigen blocks for itself).
struct GemmBlocking {
  GemmPath path = GemmPath::kEigen;
  int64_t kc = 0, mc = 0, nc = 0;
  bool operator==(const GemmBlocking&) const = default;
};

// The micro-kernel tile (rows x columns of C held in registers) of each ISA's packed path. The
// executor's kernels are instantiated with these values; the blocking is rounded to them.
inline constexpr int kGemmMrAvx2 = 6, kGemmNrAvx2 = 16;
inline constexpr int kGemmMrAvx512 = 12, kGemmNrAvx512 = 32;
// conv2d's im2col tile on AVX-512 (conv_body.inc): the weights read in place, B gathered into
// panels of 64 columns.
inline constexpr int kConvMrAvx512 = 6, kConvNrAvx512 = 64;
// conv2d's channel-tile path (ConvParams::channelTiles): 7 positions x 64 channels per tile,
// 28 accumulators + 4 weight vectors of AVX-512's 32 registers; 7 divides every plane width
// of ResNet, MobileNet and ShuffleNet at 224 x 224 (224 = 32 x 7).
inline constexpr int kConvTileRows = 7, kConvTileChannels = 64;

// The direct path's tile for a GEMM of m rows: 6 x 64 (24 accumulators, 4 loads of B and 6
// broadcasts per 24 FMAs, against 12 x 32's 2 + 12), or 8 x 48 where 6-row tiles would leave
// more rows to the 2- and 1-row tiles after the 4-row ones (m = 8: 6 + 2 rows, 77 GF/s on
// Zen 4, against 96 as one 8-row tile). The compile step (splits) and the executor (which
// instantiation runs) both ask this, so they agree. `rows` x `vectors` 16-lane vectors.
struct GemmDirectTile {
  int rows, vectors;
};
inline constexpr GemmDirectTile gemmDirectTile(int64_t m) {
  return (m % 8) % 4 < (m % 6) % 4 ? GemmDirectTile{8, 3} : GemmDirectTile{6, 4};
}

// AVX2's direct path tile (gemm_body.inc, gemmDirectPanels): 4 x 24, 12 accumulators, 3 loads of
// B and 4 broadcasts per 12 FMAs, AVX2's 16 registers exactly; M = 8 as two whole tiles. A 6 x 16
// tile for M = 6 (one tile, not 4 + 2 rows) ran slower: K = N = 1024, one thread, 348-350 us
// against 309 (Xeon forced to AVX2, 2026-12-05).
inline constexpr int kGemmDirectMrAvx2 = 4, kGemmDirectNrAvx2 = 24;

// Where AVX-512's direct path, reading B in place (not a plan's strips), walks B a panel of
// tile columns at a time, the first row tile copying each row of the panel it loads for the
// other row tiles to read (gemm_body.inc, gemmDirectPanels; AVX2's direct path always walks so):
// from 16 rows (three row tiles or more) while the walk does not pack B per K slice itself
// (directPacksB, from 256 rows), and where B's rows are a page or more apart (ldb >= 1024
// floats), so that every row of a tile's panel falls in the same L1 sets and the tiles after the
// first would read it from L2, through a TLB entry per row; the copy is contiguous. The K
// slices stay the tile walk's (near 256): the walk then sums every element of C in the order a
// plan's strips do, so eager, dynamic and static runs of a MatMul agree bit for bit (`gearbox
// compare` checks the modes agree). Slices near 128 ran up to 5% faster on one thread and 5-20%
// on two, and broke that. Zen 5, kernels_bench, K = N = 1024, one thread | two, us, the tile walk
// -> the panel walk (kc 256) -> (kc 128), two rounds: M = 64 803-876 | 582 -> 668-769 | 446-448
// -> 661-722 | 424-426 (oneDNN 774 | 409), M = 128 1,474-1,680 | 998-1,078 -> 1,263-1,437 |
// 862-937 -> 1,312-1,516 | 890-917, M = 32 380-407 | 290 -> 368-419 | 248-253 -> 360-386 |
// 225-244, M = 16 225-238 | 155-159 -> 221-244 | 156-159 -> 192-204 | 124-130. Below 16 rows
// the walk lost (kc 128: M = 8 109-112 | 70-71 -> 136-159 | 94-95, M = 12 166-187 | 99-110 ->
// 190-196 | 115-118), and so it did with rows 1 KiB apart (N = 256: M = 32 85-90 | 56-60 ->
// 97-102 | 66-73).
inline constexpr int64_t kDirectCopyMinM = 16, kDirectCopyMaxM = 255, kDirectCopyMinLdb = 1024;
inline constexpr bool directCopiesB(int64_t m, int64_t ldb) {
  return m >= kDirectCopyMinM && m <= kDirectCopyMaxM && ldb >= kDirectCopyMinLdb;
}

// The path and blocking for C[m, n] = A[m, k] B[k, n] in `dtype` on `isa`
// (compiler/ops/matmul.cpp). gemmF32, which conv2d calls with shapes known only inside its
// loop, asks the same function at run time. rowBlock: the product is one of many row blocks
// that share B (attention's score and value products), which keep the skinny path up to 3 rows
// on AVX-512 and 16 on AVX2 (MatMul: 2 on AVX-512, 3 on AVX2; the other limits were not
// measured on attention's shapes). bPacked: B is a constant a static plan packs in strips for
// AVX-512's direct path (compiler.cpp, bindPackedMatMulB), which then takes every M up to 1024.
GemmBlocking chooseGemmBlocking(Isa isa, DType dtype, int64_t m, int64_t n, int64_t k,
                                bool rowBlock = false, bool bPacked = false);

// MatMul: batch of [M, K] x [K, N], row-major.
struct MatMulParams {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  // Per-batch offsets (in elements) of A and B; broadcast batch dims give repeated offsets.
  std::vector<int64_t> aOffsets, bOffsets;
  // Parallel split: rows of M per task when a single GEMM is large; 0 = split over batch.
  int64_t rowsPerTask = 0;
  // Parallel split for small M (the skinny path): columns of N per task, so that each task
  // reads only its part of B; 0 = no column split. At most one of the two splits is non-zero.
  int64_t colsPerTask = 0;
  // The ISA the blocking was chosen for (a spec is a cache: a kernel file compiled for another
  // ISA is recompiled on load, and the executor never runs an ISA above activeIsa()).
  Isa isa = Isa::kBaseline;
  GemmBlocking gemm;
  // Not a compile decision: a static plan sets it on its own copy of the spec when it binds B, a
  // constant, packed in strips of a direct tile's width (compiler/weight_pack.h, packMatMulB)
  // in place of input 1: that width, 48 or 64 (its own tile's, or the other tile's where
  // another plan holds those strips; the GEMM then runs that width's tile). Never stored or
  // compared with a recompile (a stored spec always has 0), as ConvParams::weightsPacked.
  int64_t bPacked = 0;
};

// MatMul's thread split over at most `tasks` tasks, from p's shape and GEMM path (set before):
// whole batches, else rows or columns per task (p.rowsPerTask / p.colsPerTask), whichever shares
// the work more evenly (compiler/ops/matmul.cpp says when each is chosen). Returns the task
// count the split can use.
int splitMatMul(MatMulParams& p, int tasks);

// IndexSelect: out viewed as [outer, count, inner], input as [outer, dimSize, inner].
struct GatherParams {
  int64_t outer = 1, dimSize = 0, count = 0, inner = 1;
  DType indexType = DType::kI64;
  bool streamingStores = false;  // see kStreamingStoreBytes
};

// Cat: input i viewed as [outer, dim_i * inner]; out rows are the concatenation.
struct CatParams {
  int64_t outer = 1;
  std::vector<int64_t> rowElems;  // dim_i * inner per input
  int64_t outRowElems = 0;
  bool streamingStores = false;  // see kStreamingStoreBytes
};

// CatGather: inputs viewed as [outer, dim_i, inner]; index picks rows of the virtual cat.
struct CatGatherParams {
  int64_t outer = 1, inner = 1, count = 0;
  std::vector<int64_t> dimSizes;  // dim_i per input
  DType indexType = DType::kI64;
  bool streamingStores = false;  // see kStreamingStoreBytes
};

// Relu, Clip, Sigmoid, and the copy of Reshape, Flatten, Squeeze, Unsqueeze: one flat loop over
// numel contiguous elements.
struct ElementwiseParams {
  int64_t numel = 0;
  bool streamingStores = false;  // see kStreamingStoreBytes
};

// Transpose: out[i0..ir) = in[sum i_k * inStrides[k]], over the output's dims after merging
// runs of dims that stay adjacent and in order (a [B, C, H, W] -> [B, H, W, C] transpose is
// [B, C, HW] -> [B, HW, C]). rank == 0 means a plain copy of numel elements.
struct TransposeParams {
  int rank = 0;
  int64_t numel = 0;
  int64_t outDims[kMaxRank] = {};
  int64_t inStrides[kMaxRank] = {};  // per output dim, in elements
};

// Conv2d on NCHW f32. Work items are (image, group, block of output channels, block of output
// positions); each item runs one GEMM W_g [~mg / mSplit, K] x cols [K, colBlock] -> out,
// K = cg * kh * kw, kc deep at a time (executor/simd/conv_body.inc).
struct ConvParams {
  enum class Path : uint8_t {
    kIm2col,     // cols gathered per item, kc rows at a time, straight into GEMM panels
    kPointwise,  // 1x1, stride 1, no padding: the input rows are the cols, no gather
    kDepthwise,  // one input channel per group: a direct loop per output plane
  };
  Path path = Path::kIm2col;
  int64_t n = 0, c = 0, h = 0, w = 0, m = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;
  int64_t group = 1, cg = 0, mg = 0;
  int64_t bias = 0;      // 1: a third input adds one value per output channel
  int64_t colBlock = 0;  // output positions per item (im2col and pointwise)
  int64_t mSplit = 1;    // items per group's output channels, [channelBound(j), ...(j + 1))
  int64_t kc = 0;        // rows of K per gathered block (im2col and pointwise)
  // 1: where the plan holds the weight as a constant, it runs the channel-tile path instead
  // (AVX-512, one group, column stride 1 or 2): tiles of kConvTileRows output positions of one
  // row x kConvTileChannels output channels, the weight pre-packed by the plan (below), the
  // input read in place (or from a zero-padded copy). No im2col, and no part-tile where a plane
  // is narrower than a 64-position tile (ResNet's 7 x 7 layers ran at 0.52 of oneDNN on those).
  int64_t channelTiles = 0;
  // 1: the depthwise path runs in channel blocks instead (AVX-512, AVX2; 3 x 3, stride 1 or 2, one
  // output channel per group; on AVX2 the compile sets it only for output rows under 24 columns
  // at stride 1, under 48 at stride 2, and a static plan on its own copy of the spec for wider
  // ones whose input it keeps in blocks): 16 channels at a time in the vector lanes, each input
  // row transposed once into a padded blocked row, each output row transposed back
  // (executor/simd/conv_body.inc's channelBlockItem). Items are (image, 16 channels, row band).
  int64_t channelBlocks = 0;
  // 1 (with channelTiles): where the plan packs the weight, it runs F(2 x 2, 3 x 3) Winograd
  // instead of the channel tiles (AVX-512; 3 x 3, stride 1, padded by 1 on every side, one
  // group: ResNet's 3 x 3 layers), the weight packed as its 16 transformed components
  // (executor/kernels/winograd.cpp). Where the weight is not packed, the im2col path runs.
  int64_t winograd = 0;
  // Not a compile decision: a static plan sets it on its own copy of the spec when it binds the
  // packed weight (compiler/weight_pack.h) in place of input 1, for the channel-tile path, the
  // depthwise channel-block path (its taps as 9 vectors per 16 channels) or AVX2's 1x1 into or
  // from channel blocks (outBlocked or inBlocked, the channel tiles' layout). Never stored or
  // compared with a recompile (a stored spec always has 0).
  int64_t weightsPacked = 0;
  // Not compile decisions either: a static plan sets them on its own copy of the spec where it
  // keeps the value between two such convs in channel blocks (compiler.cpp's blockActivations):
  // the tensor [n, c, h, w] stored as [n, c / 16, h, w, 16] (c a multiple of 16), the layout
  // oneDNN calls nChw16c. inBlocked: input 0 is blocked; outBlocked: the output is. Only the
  // channel-block depthwise path and the channel-tile path (its input read in place) read or
  // write them, and on AVX2 a 1x1 conv writes them from its GEMM tiles (weightsPacked and
  // outBlocked without channelTiles: conv_body.inc's convItemToBlocks) or reads them into planes
  // (weightsPacked and inBlocked without channelTiles: convItemFromBlocks); never stored (a
  // stored spec always has 0).
  int64_t inBlocked = 0, outBlocked = 0;
  // The first output channel (of a group) of channel item j: j * mg / mSplit rounded down to a
  // multiple of 12 (the micro-kernel's rows on AVX-512, twice AVX2's), so that only a group's
  // last item has a partial tile. The compile step keeps mSplit <= mg / 24: no item is empty.
  int64_t channelBound(int64_t j) const { return j >= mSplit ? mg : j * mg / mSplit / 12 * 12; }
  // No padding and every tap inside the input: the channel-tile path reads x itself, not a
  // zero-padded copy. The plan blocks only such a conv's input (a blocked input is never copied),
  // so compiler.cpp's blockActivations and the kernel ask this one question.
  bool readsInputInPlace() const {
    return pt == 0 && pl == 0 && (oh - 1) * sh + (kh - 1) * dh < h &&
           (ow - 1) * sw + (kw - 1) * dw < w;
  }
  bool operator==(const ConvParams&) const = default;
};

// MaxPool2d / AvgPool2d on NCHW f32: planes = N * C, each pooled on its own.
struct PoolParams {
  int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  int64_t countIncludePad = 0;  // avg only
  bool operator==(const PoolParams&) const = default;
};

// Mean and ReduceSum over axes: when the axes are one run of dims the input is
// [outer, reduce, inner];
// otherwise `general` walks the input dims with `mask` marking reduced ones.
struct ReduceParams {
  int64_t outer = 1, reduce = 1, inner = 1;
  int64_t general = 0;
  int64_t rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t mask = 0;  // bit d: dim d is reduced
  bool operator==(const ReduceParams&) const = default;
};

// Slice: out[i0..ir) = in[offset + sum i_k * inStrides[k]] over the output's dims after merging
// dims that stay contiguous (a slice of the leading dim of a [N, C, H, W] is [n', C*H*W]).
// Strides are negative where a step is. rank == 0: nothing to read (an empty output).
struct SliceParams {
  int rank = 0;
  int64_t numel = 0, offset = 0;
  int64_t outDims[kMaxRank] = {};
  int64_t inStrides[kMaxRank] = {};  // per output dim, in elements
  bool operator==(const SliceParams&) const = default;
};

// Pad (constant mode): dims merged wherever a dim has no pads (it joins the dim before it), so
// the innermost dim is the longest run the kernel can copy as one block. begins may be negative
// (a crop). rank >= 1.
struct PadParams {
  int rank = 0;
  int64_t numel = 0;
  int64_t inDims[kMaxRank] = {};
  int64_t outDims[kMaxRank] = {};
  int64_t begins[kMaxRank] = {};
  bool operator==(const PadParams&) const = default;
};

// BatchNorm: x viewed as [outer, channels, inner]; each (outer, channel) plane is one affine map.
struct BatchNormParams {
  int64_t outer = 0, channels = 0, inner = 0;
  bool operator==(const BatchNormParams&) const = default;
};

// Softmax and LayerNorm: x viewed as [outer, n, inner]; each (outer, inner) line of n elements
// along the reduced axis is one softmax (LayerNorm normalises [outer, n] rows: inner is 1 and n
// the product of the normalised dims). scale / bias: 1 when LayerNorm has that input.
struct NormParams {
  int64_t outer = 1, n = 0, inner = 1;
  int64_t scale = 0, bias = 0;
  bool operator==(const NormParams&) const = default;
};

// Where: out[i] = cond[ic(i)] != 0 ? x[ix(i)] : y[iy(i)] over the output's dims (merged where
// all three operands step through them as one); a stride is 0 where an operand broadcasts.
// rank == 0: every operand has the output's element count (one flat loop).
struct WhereParams {
  int rank = 0;
  int64_t numel = 0;
  int64_t outDims[kMaxRank] = {};
  int64_t condStrides[kMaxRank] = {};
  int64_t xStrides[kMaxRank] = {};
  int64_t yStrides[kMaxRank] = {};
  bool operator==(const WhereParams&) const = default;
};

// Expand: out[i0..ir) = in[sum i_k * inStrides[k]] over the output's dims (merged where the
// input steps through them as one); a broadcast dim has stride 0. rank == 0: a plain copy.
struct ExpandParams {
  int rank = 0;
  int64_t numel = 0;
  int64_t outDims[kMaxRank] = {};
  int64_t inStrides[kMaxRank] = {};
  bool operator==(const ExpandParams&) const = default;
};

// Trilu: x viewed as [batch, rows, cols]; element (i, j) is kept when j - i >= k (upper) or
// j - i <= k (lower), else 0.
struct TriluParams {
  int64_t batch = 1, rows = 0, cols = 0, k = 0, upper = 1;
  bool operator==(const TriluParams&) const = default;
};

// Attention: `batch` items of q [sq, d], k [sk, d], v [sk, dv] and out [sq, dv], contiguous and
// in step (the batch dims are shared). The mask, when there is one (mask = 1), is read for item
// b, row i, key j at maskOffsets[b] + i * maskRowStride + j * maskColStride (stride 0 where it
// broadcasts). Work items are blocks of rowBlock query rows of one batch item; qk and pv are
// the blocking of the two GEMMs of a block, [rowBlock, d] x [d, sk] and [rowBlock, sk] x
// [sk, dv], chosen for `isa` (compiler/ops/attention.cpp).
struct AttentionParams {
  int64_t batch = 1, sq = 0, sk = 0, d = 0, dv = 0;
  int64_t mask = 0;
  std::vector<int64_t> maskOffsets;
  int64_t maskRowStride = 0, maskColStride = 0;
  int64_t rowBlock = 1;
  Isa isa = Isa::kBaseline;
  GemmBlocking qk, pv;
};

struct KernelSpec {
  KernelKey key;
  std::string name;
  TensorType output;
  bool generic = false;  // built for dynamic dims: params are derived at run time
  int tasks = 1;         // 1 = runs in the calling thread; > 1 = oneTBB tasks
  double work = 0;       // flops (MatMul) or bytes moved (others): drives `tasks`
  std::variant<std::monostate, AddParams, MatMulParams, GatherParams, CatParams, CatGatherParams,
               ElementwiseParams, TransposeParams, ConvParams, PoolParams, ReduceParams,
               SliceParams, PadParams, BatchNormParams, NormParams, WhereParams, ExpandParams,
               TriluParams, AttentionParams>
      params;
};

// The compile step for one kernel: derives every per-shape decision. For a key with dynamic
// dims it returns a generic spec (params empty). Throws Error(kShape) if the key is invalid.
std::shared_ptr<const KernelSpec> compileKernelSpec(const KernelKey& key);
// Derives the params for concrete shapes at run time (dynamic mode); not cached.
// `output`, when given, is the output shape the graph's inference gave (a reshape's target).
KernelSpec specializeKernelSpec(const KernelSpec& generic, const std::vector<TensorType>& inputs,
                                const Shape* output = nullptr);

// Work above which a kernel is split across oneTBB tasks (oneTBB's guidance: a task should
// hold on the order of 1M cycles of work).
constexpr double kParallelFlopThreshold = 4.0e6;
// The largest thread cap a key or --threads may hold: far above any machine gearbox runs on,
// and far below the 65536 tasks a kernel file may declare.
constexpr int kMaxThreads = 1024;
// Bytes moved above which a memory-bound kernel (copies, transposes, elementwise, norms) splits:
// two tasks from 2 MiB. Such kernels split on the spinning fork-join pool (executor/fork_join.h),
// where a split costs a microsecond or two, and 1 MiB takes 20-40 us to move on one core here.
// At 4 MiB (8 MiB before a second task) every memory op of the BERT-style encoder at batch 8
// (transposes, slices, the residual Add and LayerNorm, 2-3 MiB each) ran on one thread while the
// other spun: a quarter of the second thread's time idle. 1 MiB: that cell (two threads) 14.2-14.8
// -> 13.5-13.8 ms on an Intel Xeon (stop 48, four rounds interleaved), other models unchanged
// within their noise (docs/performance.md, "SMT siblings").
constexpr double kParallelByteThreshold = 1.0 * 1024 * 1024;

// Copy kernels (IndexSelect, Cat, CatGather) and Add whose output is at least this large, and
// whose rows are at least kStreamingRowBytes long, write with non-temporal (streaming) stores:
// an output that size will not stay in the core's private caches for its consumer anyway, and a
// regular store first reads every destination line for ownership, which costs a third of the
// memory traffic of a copy. Smaller outputs keep regular stores so the next op finds them cached.
constexpr double kStreamingStoreBytes = 8.0 * 1024 * 1024;
constexpr int64_t kStreamingRowBytes = 256;

}  // namespace gearbox

template <>
struct std::hash<gearbox::KernelKey> {
  size_t operator()(const gearbox::KernelKey& k) const { return k.hash(); }
};
