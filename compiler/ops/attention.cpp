// Attention: the compiler's hooks (compiler/ops/op_hooks.h). The batch dims are flattened into
// `batch` items of q [sq, d], k [sk, d], v [sk, dv]; the work is split into blocks of `rowBlock`
// query rows per item, each of which the kernel runs start to finish: scores [rowBlock, sk] =
// q_block k^T on the per-ISA GEMM, scale + mask + softmax per row in place, out_block = P v on
// the GEMM again (executor/kernels/attention.cpp). The compile step sizes the block so its
// scores stay cache-resident and decides both GEMMs' blocking for it.
#include "compiler/ops/gemm_params.h"
#include "compiler/ops/op_hooks.h"

namespace gearbox::ops {
namespace {

// Scores of one row block held per thread: 64 Ki floats (256 KiB), half of a Zen 3 core's
// 512 KiB L2 (and an eighth of the 2 MiB of the Xeon CI machines'), so the block is still in
// L2 when the softmax and the second GEMM read it back. Unfused, the whole [sq, sk] matrix of
// every batch item goes to memory and back three times (scale, mask, softmax).
constexpr int64_t kScoreBlockFloats = 64 * 1024;

int64_t ceilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// A dim of a key as a count for the cost model: a dynamic dim (< 0) counts as 1, as every op's
// cost does (compiler/kernel_cost.h).
double countOf(int64_t d) {
  return d >= 0 ? static_cast<double>(d) : 1.0;
}

}  // namespace

void compileAttention(KernelSpec& spec) {
  const Shape& q = spec.key.inputs[0].shape;
  const Shape& v = spec.key.inputs[2].shape;
  const int r = q.rank();
  AttentionParams p;
  p.batch = product(q, 0, r - 2);
  p.sq = q[r - 2];
  p.d = q[r - 1];
  p.sk = v[r - 2];
  p.dv = v[r - 1];
  if (spec.key.inputs.size() == 4) {
    // Mask element (batch item b, row i, key j) at maskOffsets[b] + i * rowStride + j * colStride:
    // the mask's dims right-aligned with the scores [batch..., sq, sk], stride 0 where it
    // broadcasts (a causal [sq, sk] mask repeats for every item, a padding [B, 1, 1, sk] one for
    // every head and row).
    const Shape& m = spec.key.inputs[3].shape;
    const int mr = m.rank();
    int64_t stride[kMaxRank] = {};
    int64_t s = 1;
    for (int j = mr - 1; j >= 0; --j) {
      stride[j] = m[j] == 1 ? 0 : s;
      s *= m[j];
    }
    auto strideOfScoreDim = [&](int d) {
      const int j = d - (r - mr);
      return j >= 0 ? stride[j] : 0;
    };
    p.mask = 1;
    p.maskRowStride = strideOfScoreDim(r - 2);
    p.maskColStride = strideOfScoreDim(r - 1);
    // One offset per batch item, as MatMul keeps one per batch: none when the output is empty
    // (the kernel then reads no mask), so the table never outgrows the output it serves.
    const bool reads = p.sq > 0 && p.dv > 0;
    p.maskOffsets.resize(reads ? static_cast<size_t>(p.batch) : 0);
    for (int64_t b = 0; reads && b < p.batch; ++b) {
      int64_t rem = b, off = 0;
      for (int d = r - 3; d >= 0; --d) {
        off += rem % q[d] * strideOfScoreDim(d);
        rem /= q[d];
      }
      p.maskOffsets[static_cast<size_t>(b)] = off;
    }
  }
  spec.work = kernelCostAttention(spec.key).flops;
  int tasks = decideTasks(spec.work, kParallelFlopThreshold);
  // Row blocks: as many rows as keep the scores block within kScoreBlockFloats, and at least
  // as many blocks in all as there are tasks; whole micro-kernel tiles (6 rows on AVX2, 12 on
  // AVX-512) per block when there are enough rows.
  p.isa = activeIsa();
  const int64_t maxRows = std::max<int64_t>(1, kScoreBlockFloats / std::max<int64_t>(p.sk, 1));
  const int64_t sq = std::max<int64_t>(p.sq, 1);
  int64_t blocks = std::max(ceilDiv(sq, maxRows), ceilDiv(tasks, std::max<int64_t>(p.batch, 1)));
  blocks = std::min(blocks, sq);
  p.rowBlock = ceilDiv(sq, blocks);
  const int64_t tile = p.isa == Isa::kAvx512 ? kGemmMrAvx512 : kGemmMrAvx2;
  if (p.rowBlock >= 2 * tile && p.rowBlock < sq)
    p.rowBlock = std::min(sq, ceilDiv(p.rowBlock, tile) * tile);
  const int64_t items = p.batch * ceilDiv(sq, p.rowBlock);
  spec.tasks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(tasks, items)));
  p.qk = chooseGemmBlocking(p.isa, DType::kF32, p.rowBlock, p.sk, p.d, true);
  p.pv = chooseGemmBlocking(p.isa, DType::kF32, p.rowBlock, p.dv, p.sk, true);
  spec.params = std::move(p);
}

KernelCost kernelCostAttention(const KernelKey& key) {
  // FLOPs: the two GEMMs, 2 sq sk d (q k^T) + 2 sq sk dv (P v) per batch item -- the 4 N^2 d
  // of FlashAttention's forward pass (Dao et al. 2022, section 3 / appendix) for d = dv -- plus
  // per score the scale (1), the mask add (1, with a mask) and softmax's terms as the softmax
  // op counts them (max, subtract, exp, sum, normalise: 4 + flops::kExp), and one division per
  // row. Bytes: q, k, v and the mask read once and the output written once, the IO of an
  // attention kernel that never writes the [sq, sk] scores to memory (FlashAttention's point;
  // on a device, one batch item's k and v staying on chip across its query blocks, which holds
  // for the head sizes and lengths of the bundled models). The unfused chain moves the scores
  // through memory once per op instead: MatMul writes them, Mul/Div, Add and Softmax each read
  // and write them, MatMul reads them.
  const Shape& q = key.inputs[0].shape;
  const Shape& v = key.inputs[2].shape;
  const int r = q.rank();
  double batch = 1;
  for (int d = 0; d < r - 2; ++d) batch *= countOf(q[d]);
  const double sq = countOf(q[r - 2]), d = countOf(q[r - 1]);
  const double sk = countOf(v[r - 2]), dv = countOf(v[r - 1]);
  const bool mask = key.inputs.size() == 4;
  const double scores = batch * sq * sk;
  const double flops = 2 * scores * d + 2 * scores * dv +
                       scores * (1 + (mask ? 1 : 0) + 4 + flops::kExp) + batch * sq;
  double bytes = 0;
  for (const TensorType& t : key.inputs) {
    double n = 1;
    for (int i = 0; i < t.shape.rank(); ++i) n *= countOf(t.shape[i]);
    bytes += n * static_cast<double>(dtypeSize(t.dtype));
  }
  bytes += batch * sq * dv * static_cast<double>(dtypeSize(key.dtype));
  return KernelCost{flops, bytes};
}
CompileCostTerms compileCostAttention() {
  return {800,
          "assumption: as MatMul (oneDNN: matmul primitive creation 0.8 ms for 256x256): the "
          "kernel tiles two GEMMs around a row softmax",
          10, "assumption: as MatMul, 10 us per doubling of FLOPs for the tile search"};
}

void paramsToJsonAttention(const KernelSpec& spec, Json& j) {
  const AttentionParams& p = paramsAs<AttentionParams>(spec);
  j["batch"] = p.batch;
  j["sq"] = p.sq;
  j["sk"] = p.sk;
  j["d"] = p.d;
  j["dv"] = p.dv;
  j["mask"] = p.mask;
  j["mask_offsets"] = p.maskOffsets;
  j["mask_row_stride"] = p.maskRowStride;
  j["mask_col_stride"] = p.maskColStride;
  j["row_block"] = p.rowBlock;
  ops::isaToJson(p.isa, j);
  ops::gemmToJson(p.qk, "qk_", j);
  ops::gemmToJson(p.pv, "pv_", j);
}

void paramsFromJsonAttention(const Json& j, KernelSpec& spec) {
  const std::string where = "kernel.params";
  const ErrorKind io = ErrorKind::kIo;
  AttentionParams p;
  p.batch = getInt(j, "batch", where, io);
  p.sq = getInt(j, "sq", where, io);
  p.sk = getInt(j, "sk", where, io);
  p.d = getInt(j, "d", where, io);
  p.dv = getInt(j, "dv", where, io);
  p.mask = getInt(j, "mask", where, io);
  p.maskOffsets = getIntArray(j, "mask_offsets", where, io);
  p.maskRowStride = getInt(j, "mask_row_stride", where, io);
  p.maskColStride = getInt(j, "mask_col_stride", where, io);
  p.rowBlock = getInt(j, "row_block", where, io);
  p.isa = ops::isaFromJson(j);
  p.qk = ops::gemmFromJson(j, "qk_");
  p.pv = ops::gemmFromJson(j, "pv_");
  spec.params = std::move(p);
}

void checkParamsAttention(const KernelSpec& s) {
  // What the kernel's memory accesses rest on, re-derived from the key: the extents, the mask's
  // offsets and strides (exactly what compiling the key gives), a row block within the rows,
  // and GEMM blocking that sizes the packing buffers sanely. The ISA and blocking may be
  // another machine's (the loader then replaces the spec: compiler/kernel_validate.h).
  const AttentionParams& p = paramsAs<AttentionParams>(s);
  KernelSpec fresh;
  fresh.key = s.key;
  fresh.output = s.output;
  compileAttention(fresh);
  const AttentionParams& f = std::get<AttentionParams>(fresh.params);
  auto bad = [&](const char* what) { paramsMismatch(s, what); };
  if (p.batch != f.batch || p.sq != f.sq || p.sk != f.sk || p.d != f.d || p.dv != f.dv)
    bad("extents differ from the key");
  if (p.mask != f.mask || p.maskOffsets != f.maskOffsets || p.maskRowStride != f.maskRowStride ||
      p.maskColStride != f.maskColStride)
    bad("mask layout differs from the key");
  if (p.rowBlock < 1 || p.rowBlock > std::max<int64_t>(p.sq, 1)) bad("row block out of range");
  for (const GemmBlocking* g : {&p.qk, &p.pv}) {
    if (g->path != GemmPath::kEigen &&
        (g->kc < 1 || g->mc < 1 || g->nc < 1 || g->kc > 65536 || g->mc > 65536 || g->nc > 65536))
      bad("GEMM blocking out of range");
    if (g->path != GemmPath::kEigen && p.isa == Isa::kBaseline)
      bad("GEMM path needs AVX2 or AVX-512");
  }
}

std::string opInfoInputNameAttention(size_t i, size_t) {
  // aclnnFlashAttentionScore's names (TorchAir's fused attention).
  static constexpr const char* kNames[] = {"query", "key", "value", "attenMaskOptional"};
  return i < std::size(kNames) ? kNames[i] : "input";
}

}  // namespace gearbox::ops
