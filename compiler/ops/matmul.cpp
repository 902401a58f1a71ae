// MatMul: the compiler's hooks (compiler/ops/op_hooks.h). 1-D operands follow torch.matmul: a
// [K] left operand is a [1, K] matrix and a [K] right operand a [K, 1] one, whose added dim is
// dropped from the output; the memory layout is the same, so the kernel is unchanged.
#include <fmt/format.h>

#include "compiler/ops/gemm_params.h"
#include "compiler/ops/op_hooks.h"

namespace gearbox::ops {

static int64_t roundUp(int64_t x, int64_t to) {
  return (x + to - 1) / to * to;
}

namespace {

// The thread split. MatMul splits on the spinning fork-join pool (executor/fork_join.h), where a
// split costs under a microsecond: kernels_bench's n = 64 product (0.5 MFLOP) ran in 4.7 us on
// one task and 3.1 us on two, 0.7 us over half. So a product splits from 0.5 MFLOP (~5 us at
// 100 GFLOP/s), where two tasks save at least a third of the time; below that the saving would
// be under a microsecond. The generic threshold (kParallelFlopThreshold, which also covers ops
// run on oneTBB) split only from 8 MFLOP and left M = 1 x 1024 x 1024 (a 4 MiB stream of B,
// 2 MFLOP) on one thread at 0.74 of oneDNN on two.
constexpr double kMatMulSplitFlops = 0.25e6;

// The operands and output as matrices (rank >= 2), promoting 1-D operands as torch.matmul does.
struct MatrixShapes {
  Shape a, b, out;
};

MatrixShapes asMatrices(const Shape& a, const Shape& b) {
  MatrixShapes m{a, b, {}};
  if (a.rank() == 1) m.a = Shape{1, a[0]};
  if (b.rank() == 1) m.b = Shape{b[0], 1};
  // Output: broadcast batch dims, then [M, N].
  const int ra = m.a.rank(), rb = m.b.rank();
  const int r = std::max(ra, rb) - 2;
  for (int i = 0; i < r; ++i) {
    const int ka = i - (r - (ra - 2)), kb = i - (r - (rb - 2));
    const int64_t da = ka >= 0 ? m.a[ka] : 1, db = kb >= 0 ? m.b[kb] : 1;
    m.out.push(da == 1 ? db : da);
  }
  m.out.push(m.a[ra - 2]);
  m.out.push(m.b[rb - 1]);
  return m;
}

MatMulParams compileMatrices(const Shape& a, const Shape& b, const Shape& out) {
  MatMulParams p;
  const int ra = a.rank(), rb = b.rank(), ro = out.rank();
  p.m = a[ra - 2];
  p.k = a[ra - 1];
  p.n = b[rb - 1];
  p.batch = product(out, 0, ro - 2);
  p.aOffsets.resize(p.batch);
  p.bOffsets.resize(p.batch);
  // Each operand's batch offset: walk the output's batch index and map it right-aligned onto
  // the operand's batch dims, where a size-1 dim always reads batch 0.
  int64_t idx[kMaxRank] = {};
  for (int64_t bi = 0; bi < p.batch; ++bi) {
    int64_t rem = bi;
    for (int d = ro - 3; d >= 0; --d) {
      idx[d] = rem % out[d];
      rem /= out[d];
    }
    auto offset = [&](const Shape& s, int rs, int64_t matrixElems) {
      int64_t lin = 0;
      for (int d = 0; d < rs - 2; ++d) {
        const int od = d + (ro - rs);
        lin = lin * s[d] + (s[d] == 1 ? 0 : idx[od]);
      }
      return lin * matrixElems;
    };
    p.aOffsets[bi] = offset(a, ra, p.m * p.k);
    p.bOffsets[bi] = offset(b, rb, p.k * p.n);
  }
  // When every batch uses the same B and A's batches are contiguous ([B, M, K] x [K, N]), the
  // batch folds into M: one tall GEMM instead of many short ones.
  if (p.batch > 1) {
    bool fold = true;
    for (int64_t bi = 0; bi < p.batch && fold; ++bi)
      fold = p.bOffsets[bi] == p.bOffsets[0] && p.aOffsets[bi] == bi * p.m * p.k;
    if (fold) {
      p.m *= p.batch;
      p.batch = 1;
      p.aOffsets.resize(1);
      p.bOffsets.resize(1);
    }
  }
  return p;
}

// The rows of the micro-kernel tile on the path's ISA (8 for Eigen's register blocks).
int64_t tileRows(const MatMulParams& p) {
  if (p.gemm.path == GemmPath::kEigen) return 8;
  if (p.gemm.path == GemmPath::kDirect)
    return p.isa == Isa::kAvx512 ? gemmDirectTile(p.m).rows : kGemmDirectMrAvx2;
  return p.isa == Isa::kAvx512 ? kGemmMrAvx512 : kGemmMrAvx2;
}

// The columns a task's share of N on the direct path is a whole number of: the tile's on
// AVX-512 (48 or 64: whole cache lines, and a plan's packed strips), two tiles on AVX2 (48:
// 24 columns are 96 bytes, so an odd number of tiles would end a task's rows mid line).
int64_t directSplitCols(const MatMulParams& p) {
  return p.isa == Isa::kAvx512 ? gemmDirectTile(p.m).vectors * 16 : 2 * kGemmDirectNrAvx2;
}

}  // namespace

void compileMatMul(KernelSpec& spec) {
  const MatrixShapes s = asMatrices(spec.key.inputs[0].shape, spec.key.inputs[1].shape);
  MatMulParams p = compileMatrices(s.a, s.b, s.out);
  spec.work = 2.0 * static_cast<double>(p.batch) * static_cast<double>(p.m) *
              static_cast<double>(p.n) * static_cast<double>(p.k);
  p.isa = activeIsa();
  p.gemm = chooseGemmBlocking(p.isa, spec.key.dtype, p.m, p.n, p.k);
  spec.tasks = splitMatMul(p, decideTasks(spec.work, kMatMulSplitFlops));
  spec.params = std::move(p);
}

KernelCost kernelCostMatMul(const KernelKey& key) {
  // 2 M N K per batch (a multiply and an add per term); each operand read once, C written once.
  auto dim = [](int64_t d) { return d >= 0 ? static_cast<double>(d) : 1.0; };
  Shape a = key.inputs[0].shape, b = key.inputs[1].shape;
  for (Shape* s : {&a, &b})
    for (int i = 0; i < s->rank(); ++i) (*s)[i] = std::max<int64_t>((*s)[i], 1);
  const MatrixShapes m = asMatrices(a, b);
  const int ro = m.out.rank();
  double batch = 1;
  for (int i = 0; i < ro - 2; ++i) batch *= dim(m.out[i]);
  const double mm = dim(m.out[ro - 2]), nn = dim(m.out[ro - 1]), kk = dim(m.a[m.a.rank() - 1]);
  const double esize = static_cast<double>(dtypeSize(key.dtype));
  // The fused epilogue (fuse-matmul-epilogue): the bias and the residual are read once and each
  // adds once per output element (the clamp's comparisons are not charged, as Clip's are not
  // FLOPs either); the adds' own passes over the output are gone with their nodes.
  double bytes = 0.0;
  for (const TensorType& t : key.inputs) bytes += elementBytes(t);
  const double adds = static_cast<double>(key.inputs.size() - 2);
  return KernelCost{2.0 * batch * mm * nn * kk + adds * batch * mm * nn,
                    bytes + batch * mm * nn * esize};
}
CompileCostTerms compileCostMatMul() {
  return {800, "oneDNN: matmul primitive creation 0.8 ms for 256x256 (Sapphire Rapids)", 10,
          "assumption: tile-size search grows with the log of the problem size (autotuners "
          "enumerate power-of-two tiles per dim); 10 us per doubling of FLOPs"};
}

void paramsToJsonMatMul(const KernelSpec& spec, Json& p) {
  const MatMulParams& v = paramsAs<MatMulParams>(spec);
  p["batch"] = v.batch;
  p["m"] = v.m;
  p["n"] = v.n;
  p["k"] = v.k;
  p["a_offsets"] = v.aOffsets;
  p["b_offsets"] = v.bOffsets;
  p["rows_per_task"] = v.rowsPerTask;
  p["cols_per_task"] = v.colsPerTask;
  ops::isaToJson(v.isa, p);
  ops::gemmToJson(v.gemm, "", p);
}

void paramsFromJsonMatMul(const Json& p, KernelSpec& spec) {
  const std::string where = "kernel.params";
  const ErrorKind io = ErrorKind::kIo;
  MatMulParams m;
  m.batch = getInt(p, "batch", where, io);
  m.m = getInt(p, "m", where, io);
  m.n = getInt(p, "n", where, io);
  m.k = getInt(p, "k", where, io);
  m.aOffsets = getIntArray(p, "a_offsets", where, io);
  m.bOffsets = getIntArray(p, "b_offsets", where, io);
  m.rowsPerTask = getInt(p, "rows_per_task", where, io);
  m.colsPerTask = getInt(p, "cols_per_task", where, io);
  m.isa = ops::isaFromJson(p);
  m.gemm = ops::gemmFromJson(p, "");
  spec.params = std::move(m);
}

void checkParamsMatMul(const KernelSpec& s) {
  const MatMulParams& m = paramsAs<MatMulParams>(s);
  const int64_t na = s.key.inputs[0].shape.numel(), nb = s.key.inputs[1].shape.numel();
  auto bad = [&](const char* what) { paramsMismatch(s, what); };
  if (m.batch < 1 || m.m < 0 || m.n < 0 || m.k < 0 || m.rowsPerTask < 0 || m.colsPerTask < 0)
    bad("negative extent");
  if (m.rowsPerTask > 0 && m.colsPerTask > 0) bad("both a row and a column split");
  // The blocking sizes the executor's packing buffers: positive and bounded on the packed paths.
  const GemmBlocking& g = m.gemm;
  if (g.path != GemmPath::kEigen &&
      (g.kc < 1 || g.mc < 1 || g.nc < 1 || g.kc > 65536 || g.mc > 65536 || g.nc > 65536))
    bad("GEMM blocking out of range");
  if (g.path != GemmPath::kEigen && (s.key.dtype != DType::kF32 || m.isa == Isa::kBaseline))
    bad("GEMM path needs f32 and AVX2 or AVX-512");
  if (checkedProduct({m.batch, m.m, m.n}) != s.output.shape.numel()) bad("output size");
  if (m.aOffsets.size() != static_cast<size_t>(m.batch) ||
      m.bOffsets.size() != static_cast<size_t>(m.batch))
    bad("one offset per batch expected");
  const int64_t aElems = checkedProduct({m.m, m.k}), bElems = checkedProduct({m.k, m.n});
  if (aElems < 0 || bElems < 0) bad("matrix size overflows");
  for (int64_t b = 0; b < m.batch; ++b) {
    const int64_t ao = m.aOffsets[b], bo = m.bOffsets[b];
    if (ao < 0 || bo < 0 || ao > na - aElems || bo > nb - bElems) bad("batch offset out of range");
  }
}

std::string opInfoInputNameMatMul(size_t i, size_t) {
  return i == 0 ? "self" : i == 1 ? "mat2" : i == 2 ? "bias" : "residual";
}

}  // namespace gearbox::ops

namespace gearbox {

using ops::roundUp;

std::string_view gemmPathName(GemmPath path) {
  switch (path) {
    case GemmPath::kEigen: return "eigen";
    case GemmPath::kPacked: return "packed";
    case GemmPath::kSkinny: return "skinny";
    case GemmPath::kDirect: return "direct";
  }
  return "eigen";
}

std::optional<GemmPath> parseGemmPath(std::string_view text) {
  for (GemmPath p : {GemmPath::kEigen, GemmPath::kPacked, GemmPath::kSkinny, GemmPath::kDirect})
    if (text == gemmPathName(p)) return p;
  return std::nullopt;
}

// Blocking in the BLIS manner, for the cache sizes of the CPUs gearbox runs on (32-48 KiB L1d,
// 512 KiB-2 MiB L2): a kc x nr panel of packed B stays in L1 while the micro-kernel walks the
// mc x kc block of packed A held in L2. BLIS's Zen configuration uses mc 144, kc 256 for sgemm.
// GEMMs with at most this many rows take the skinny path, on AVX2 and AVX-512. On Zen 3 (issue
// 23, K = N = 1024) streaming B's rows once beat packing B up to M = 16-32, and AVX2 kept 16;
// on the Xeon forced to AVX2 (kernels_bench, one thread | two, us, skinny against packed) it
// wins only below 4 rows on one thread (level at 4; on two, packing wins from 3): M = 2 145 | 114
// against 308 | 157, M = 3 289 | 202 against 310 | 162, M = 4 292 | 223 against 305 | 161, M = 8
// 586 | 433 against 426 | 223, M = 16 1,167 | 873 against 512 | 266 (oneDNN limited to AVX2: 302 |
// 160 at M = 8). Its pairs of rows each stream all of B (4 MiB here) from L3, and it scales poorly
// on two threads. Where B fits in L2 (1 MiB: K = 256, N = 1024, or K = 1024, N = 256) the skinny
// path still ran M = 8 1.35-1.57x faster on one thread, and 1.1-2x slower on two; not made a rule
// of.
// On AVX-512 a MatMul takes it up to 2 rows where it reads B in place (kGemmSkinnyMaxMAvx512),
// and not at all where a static plan packs B in strips (bPacked; compiler.cpp's
// bindPackedMatMulB switches such a spec to the direct path). K = N = 1024, kernels_bench, one |
// two threads, us, skinny against the direct path:
// - Zen 5 (2026-12-05), B in place: M = 1 63 | 46 against 99-126 | 72-74 (oneDNN 58-60 | 57-58),
//   M = 2 70 | 70 against 90-99 | 62-70, M = 3 134 | 99 against 91 | 55 (the direct path's 3-row
//   tile); B in the plan's strips, direct: M = 1 52 | 34, M = 2 55 | 37.
// - the Xeon (2026-12-04), B in place: M = 1 143 | 83 against 140 | 66, M = 2 143 | 88 against
//   140 | 65, M = 3 288 | 179 against 214 | 88; B in strips 140 | 34, 140 | 36, 171 | 48.
// So reading B in place, the direct path's 1- and 2-row tiles (a page of B per row of the tile,
// prefetched a few rows ahead) lose up to half on Zen 5 and win up to a fifth on the Xeon's two
// threads, while the skinny path's sequential row streams meet oneDNN on both; from strips the
// direct path wins on both. (Zen 4 had measured the direct path at M = 3 at 26 GF/s against 60,
// before its B prefetch and strips.) Attention's row blocks keep the limits they had.
constexpr int64_t kGemmSkinnyMaxM = 3, kGemmSkinnyMaxMRowBlocks = 16, kGemmSkinnyMaxMAvx512 = 2;
// On AVX-512, the direct path (A in place, 6 x 64 or 8 x 48 tiles) from 3 rows to 1024 (from 1
// row where a plan packs B in strips: kGemmSkinnyMaxMAvx512 above).
// Measured on Zen 4 (GF/s at K = N = 1024, one thread; issue 23's note): M = 3 skinny 60,
// direct 26; M = 4 skinny 74, direct 86; M = 8 skinny 76, packed 41, direct 96; M = 64 packed
// 83, direct 109; M = 512 (N = 4096) packed 95, direct 99; M = 2048 packed 99.5, direct 99.
// With AVX2's 16 registers these direct tiles (6 x 16, B in place for every row tile) fell to
// 45-50 GF/s from M = 16 on, where packing held 63-104; AVX2's direct path is another walk
// (kGemmDirectMaxMAvx2 below). The limit is 1024, not 512, as measured on an
// Intel Xeon (2 MiB L2; docs/performance.md, "SMT siblings"): the BERT-style encoder's Linear
// layers at batch 8 are M = 1024 with K = 256, where packing A (once per 512-column block of B)
// is a larger share than at K = 1024; one thread, the shapes of those layers 5-15% faster
// direct, the encoder at batch 8 6-7% (six rounds interleaved, each rank of the sorted minima).
// 1024^3 read the same either way (first quartiles 97-106 GFLOP/s packed, 93-101 direct), and
// so did M = 4096, so 1025 rows and up keep packing.
constexpr int64_t kGemmDirectMaxMAvx512 = 1024;
// On AVX2, the direct path (4 x 24 tiles, B copied panel by panel: gemm_body.inc's
// gemmDirectPanels) from 4 rows to 128, where the packed path's pass over B before the FMAs cost
// more than its panels save. Measured on the Xeon of docs/performance.md forced to AVX2
// (kernels_bench, K = N = 1024 unless named, one thread | two, packed -> direct, us; the first
// build of the walk, whose prefetch stopped at each panel's end): M = 4 297 | 148 -> 230 | 118,
// M = 6 324 | 162 -> 309 | 152, M = 8 399 | 201 -> 312 | 156, M = 16 531 | 266 -> 467 | 232,
// M = 32 863 | 439 -> 782 | 394, M = 64 1,457 | 733 -> 1,401 | 701, M = 128 2,738 | 1,377 ->
// 2,663 | 1,364; M = 8, K = 256 79 | 42 -> 47 | 26; n = 64 5.8 | 3.9 -> 5.0 | 3.2. Level at
// M = 256 (5,033 | 2,606 -> 5,245 | 2,609), and 0.80 at M = 1024. (Two threads then split M = 64
// by rows; splitMatMul now splits AVX2's direct path by columns.) Attention's row blocks
// (rowBlock) keep the packed path.
constexpr int64_t kGemmDirectMaxMAvx2 = 128;

GemmBlocking chooseGemmBlocking(Isa isa, DType dtype, int64_t m, int64_t n, int64_t k,
                                bool rowBlock, bool bPacked) {
  GemmBlocking b;
  if (dtype != DType::kF32 || isa == Isa::kBaseline) return b;  // Eigen, compiled for baseline
  const int64_t mr = isa == Isa::kAvx512 ? kGemmMrAvx512 : kGemmMrAvx2;
  const int64_t nr = isa == Isa::kAvx512 ? kGemmNrAvx512 : kGemmNrAvx2;
  // kc near 256, split evenly: k = 300 runs as 2 x 150 rather than 256 + 44.
  const int64_t kBlocks = std::max<int64_t>(1, (k + 255) / 256);
  b.kc = std::max<int64_t>(1, (k + kBlocks - 1) / kBlocks);
  const bool avx512 = isa == Isa::kAvx512;
  const int64_t skinnyMaxM =
      rowBlock ? (avx512 ? kGemmSkinnyMaxM : kGemmSkinnyMaxMRowBlocks)
               : (avx512 ? (bPacked ? 0 : kGemmSkinnyMaxMAvx512) : kGemmSkinnyMaxM);
  if (m <= skinnyMaxM) {
    // Too few rows to pay for packing B, which would move as many bytes as the product reads.
    // B's rows are streamed once per pair of A rows, k = 4096 deep at a time (sequential reads
    // the prefetchers follow), against 1024 columns of C held in L1 (4 KiB per row).
    b.path = GemmPath::kSkinny;
    b.kc = std::min<int64_t>(std::max<int64_t>(k, 1), 4096);
    b.mc = m;
    b.nc = std::min<int64_t>(roundUp(std::max<int64_t>(n, 1), 64), 1024);
    return b;
  }
  if (!avx512 && !rowBlock && m <= kGemmDirectMaxMAvx2) {
    // B read in place once, each panel copied by its first row tile for the others
    // (gemmDirectPanels); the whole N as one block up to 16 rows (to 4,080 columns, 170 tiles),
    // as on AVX-512, and blocks of 528 columns (22 tiles) above, so that an m x nc block of C
    // stays in L2 across the K slices.
    b.path = GemmPath::kDirect;
    b.mc = m;
    b.nc = std::min<int64_t>(roundUp(std::max<int64_t>(n, 1), kGemmDirectNrAvx2),
                             (m <= 16 ? 170 : 22) * kGemmDirectNrAvx2);
    return b;
  }
  if (avx512 && m <= kGemmDirectMaxMAvx512) {
    // Up to 16 rows every element of B feeds at most three tiles, so the whole N is one block
    // (up to 4,096 columns: M = 8, N = 4,096 ran 87 GF/s so, 77 in 512-column blocks); more
    // rows walk a 512-column block of B (kc x 512, 512 KiB) from L2 once per row tile.
    b.path = GemmPath::kDirect;
    b.mc = m;
    b.nc = std::min<int64_t>(roundUp(std::max<int64_t>(n, 1), 64), m <= 16 ? 4096 : 512);
    return b;
  }
  b.path = GemmPath::kPacked;
  b.mc = std::min<int64_t>(roundUp(m, mr), 144 / mr * mr);
  // nc 512: a kc x nc block of B (512 KiB) in L2/L3 rather than all of N, which measured faster
  // at n = 1024 on Zen 3.
  b.nc = std::min<int64_t>(roundUp(std::max<int64_t>(n, 1), nr), 512 / nr * nr);
  return b;
}

// Chooses MatMul's split: whole batches per task when there are enough of them; for the skinny
// path, and the packed path with at most 8 tiles of rows, blocks of N columns (each task then
// reads and packs only its share of B, which is what a small-M product is bound by); else blocks
// of M rows (each task runs one GEMM on its rows) unless whole 64-column blocks share N out more
// evenly than whole row tiles share M. Returns the task count actually usable.
//
// Why the even share decides (Zen 5, kernels_bench, two threads, ratio to oneDNN's two): M = 64
// on the direct path's 6-row tiles split as 36 + 28 rows, so one task did 56% of the work and
// two threads bought 1.69x (0.84 of oneDNN); N = 1024 splits as 512 + 512 columns. A column
// split also packs less on the packed path: at n = 1024 (two nc = 512 blocks of B) a row task
// packs all of B and its rows of A once per nc block, a column task its half of B and A once.
int splitMatMul(MatMulParams& p, int tasks) {
  using ops::tileRows;
  p.rowsPerTask = 0;
  p.colsPerTask = 0;
  if (tasks <= 1 || p.batch >= tasks) return tasks;
  const int64_t blocksPerBatch = (tasks + p.batch - 1) / p.batch;
  const bool f32Tiles = p.gemm.path == GemmPath::kPacked || p.gemm.path == GemmPath::kDirect;
  // Small M on the packed path splits columns too: rows would round to whole micro-kernel tiles
  // (M = 32 on AVX-512's 12-row tiles: 24 + 8, so two threads bought 1.2x) and every task would
  // pack all of B; column blocks are even and each task packs only its part of B. So does
  // AVX2's direct path at any of its M (up to 128) where N has a column block for every task:
  // a row task would read all of B from memory, a column task its share (M = 64, K = N = 1024,
  // two threads: 824-852 -> 772-776 us).
  const bool avx2Direct = p.isa == Isa::kAvx2 && p.gemm.path == GemmPath::kDirect;
  // Whole 64-float (256-byte) column blocks: cache-line aligned rows of B and C per task. On the
  // direct path, whole tiles instead (64 or 48 columns, lines too) where that leaves as many
  // blocks: then each task starts on a strip of a B the plan packs (compiler.cpp,
  // bindPackedMatMulB), and none runs a narrower tile before its last (M = 8, N = 1024 on two
  // threads: 528 + 496 columns, 11 + 10 tiles and a 16-column one, where 512 + 512 ran 10 tiles
  // and a 32-column one each; the peers' MLP at batch 8 and 32, B packed, 16% and 10% faster).
  const int64_t share = (p.n + blocksPerBatch - 1) / blocksPerBatch;
  int64_t cols = roundUp(share, 64);
  if (p.gemm.path == GemmPath::kDirect) {
    const int64_t tiles = roundUp(share, ops::directSplitCols(p));
    if ((p.n + tiles - 1) / tiles == (p.n + cols - 1) / cols) cols = tiles;
  }
  const bool fewRows = f32Tiles && (p.m <= 8 * tileRows(p) ||
                                    (avx2Direct && (p.n + cols - 1) / cols >= blocksPerBatch));
  auto splitColumns = [&] {
    p.colsPerTask = cols;
    const int64_t items = p.batch * ((p.n + cols - 1) / cols);
    return static_cast<int>(std::min<int64_t>(tasks, items));
  };
  if ((p.gemm.path == GemmPath::kSkinny || fewRows) && cols < p.n) return splitColumns();
  int64_t rows = (p.m + blocksPerBatch - 1) / blocksPerBatch;
  // Whole micro-kernel tiles in every task but the last.
  const int64_t mr = tileRows(p);
  if (p.m >= 2 * mr) rows = roundUp(rows, mr);
  // The largest task's share of the batch's work: rows / m against cols / n, cross-multiplied
  // in double (exact for these sizes; no int64 product of two dims can overflow).
  if (f32Tiles && cols < p.n &&
      static_cast<double>(cols) * static_cast<double>(p.m) <
          static_cast<double>(rows) * static_cast<double>(p.n))
    return splitColumns();
  if (rows >= p.m) return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(tasks, p.batch)));
  p.rowsPerTask = rows;
  const int64_t items = p.batch * ((p.m + rows - 1) / rows);
  return static_cast<int>(std::min<int64_t>(tasks, items));
}

}  // namespace gearbox
