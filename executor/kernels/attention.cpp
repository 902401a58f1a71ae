// Attention: reference and optimized kernels (f32).
//
// The reference is the definition written out: for each batch item and query row, every score
// q_i . k_j * scale + mask in double, a softmax over the keys in double (libm exp; a row with a
// NaN is NaN throughout, as the softmax reference), then the weighted sum of v's rows.
//
// The optimized kernel is NOT FlashAttention's online softmax. It is the blocked two-pass form
// that a CPU's caches allow: the compile step splits each batch item's query rows into blocks
// whose scores [rows, sk] fit in L2 (compiler/ops/attention.cpp), and a block runs start to
// finish on one thread:
//   1. S = q_block k^T on the per-ISA GEMM (executor/kernels/gemm.h), with k transposed once per
//      batch item into a per-thread buffer so it is the GEMM's row-major right operand;
//   2. per row of S, in place: scale, add the mask row, softmax (executor/kernels/softmax.h's
//      softmaxLine: max, exp, sum, normalise, the unfused softmax's own row primitive);
//   3. out_block = S v on the GEMM.
// Only one block of scores exists per thread at a time, and it stays in cache between the three
// steps, where the unfused graph writes the whole [sq, sk] matrix of every item to memory and
// reads it back in each of its five ops. The softmax of a row is exact (two passes over a row
// held in L1), so no running-max rescaling is needed; FlashAttention's key blocking would matter
// only when one row of scores no longer fits in cache (sk in the tens of thousands), where
// this kernel still runs correctly with one-row blocks.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "executor/kernels/common.h"
#include "executor/kernels/gemm.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"
#include "executor/kernels/softmax.h"

namespace gearbox::kernels {
namespace {

// The calling thread's buffer for one block of scores and one transposed k (grown, never
// shrunk: a static plan's run allocates only on a thread's first call of a size, as the GEMM's
// packing buffers do).
float* attentionScratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// kt[e, j] = k[j, e] for a [sk, d] row-major k, in 16 x 16 tiles so both sides stay in L1.
void transposeKeys(const float* k, float* kt, int64_t sk, int64_t d) {
  constexpr int64_t kTile = 16;
  for (int64_t j0 = 0; j0 < sk; j0 += kTile)
    for (int64_t e0 = 0; e0 < d; e0 += kTile) {
      const int64_t j1 = std::min(sk, j0 + kTile), e1 = std::min(d, e0 + kTile);
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t e = e0; e < e1; ++e) kt[e * sk + j] = k[j * d + e];
    }
}

[[gnu::noinline]] void runAttentionF32(const AttentionParams& p, float scale, int tasks,
                                       const void* const* in, float* out) {
  const float* q = static_cast<const float*>(in[0]);
  const float* k = static_cast<const float*>(in[1]);
  const float* v = static_cast<const float*>(in[2]);
  const float* mask = p.mask ? static_cast<const float*>(in[3]) : nullptr;
  if (p.batch == 0 || p.sq == 0 || p.dv == 0) return;
  if (p.sk == 0) {
    // No keys: an empty softmax weights nothing, and P v sums no rows (the unfused matmul's
    // output of an empty contraction).
    std::fill(out, out + p.batch * p.sq * p.dv, 0.0f);
    return;
  }
  const int64_t blocks = (p.sq + p.rowBlock - 1) / p.rowBlock;
  detail::runRanges(tasks, p.batch * blocks, 1, [&](int64_t begin, int64_t end) {
    float* scores = attentionScratch(static_cast<size_t>(p.rowBlock * p.sk + p.d * p.sk));
    float* kt = scores + p.rowBlock * p.sk;
    int64_t transposed = -1;  // the batch item whose k is in kt
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / blocks;
      const int64_t r0 = item % blocks * p.rowBlock;
      const int64_t rows = std::min(p.rowBlock, p.sq - r0);
      if (b != transposed) {
        transposeKeys(k + b * p.sk * p.d, kt, p.sk, p.d);
        transposed = b;
      }
      gemmF32(p.isa, p.qk, q + (b * p.sq + r0) * p.d, p.d, kt, p.sk, scores, p.sk, rows, p.sk, p.d);
      for (int64_t i = 0; i < rows; ++i) {
        // The mask row of this score row: p.sk floats, or one broadcast along it.
        const float* m = mask ? mask + p.maskOffsets[b] + (r0 + i) * p.maskRowStride : nullptr;
        const int64_t mstride = p.maskColStride == 1 ? 1 : 0;
        if (softmaxRowIsa(p.isa, scores + i * p.sk, scores + i * p.sk, p.sk, scale, m, mstride))
          continue;
        detail::ArrayMapF s(scores + i * p.sk, p.sk);
        if (m) {
          if (mstride == 1) {
            s = s * scale + detail::ConstArrayMapF(m, p.sk);
          } else {
            s = s * scale + m[0];
          }
        } else {
          s *= scale;
        }
        detail::softmaxLine(s.data(), s.data(), p.sk);
      }
      gemmF32(p.isa, p.pv, scores, p.sk, v + b * p.sk * p.dv, p.dv, out + (b * p.sq + r0) * p.dv,
              p.dv, rows, p.dv, p.sk);
    }
  });
}

}  // namespace

void ref::refAttention(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  using namespace ref::detail;
  const Shape& qs = ins[0].shape;
  const Shape& vs = ins[2].shape;
  const int r = qs.rank();
  const int64_t sq = qs[r - 2], d = qs[r - 1], sk = vs[r - 2], dv = vs[r - 1];
  const double scale = attrs.f(attr::Attention::scale);
  const float* q = ins[0].as<const float>();
  const float* k = ins[1].as<const float>();
  const float* v = ins[2].as<const float>();
  const bool hasMask = ins.size() == 4;
  float* o = out.as<float>();
  std::vector<double> s(static_cast<size_t>(sk));
  // One odometer walk over (batch..., row) of the output; each row is a softmax over the keys.
  Shape rows(qs.begin(), qs.end() - 1);
  forEachIndex(rows, [&](const int64_t* idx) {
    const int64_t row = offsetOf(rows, idx);  // batch item * sq + i
    const int64_t item = row / std::max<int64_t>(sq, 1);
    int64_t sidx[kMaxRank] = {};
    std::copy(idx, idx + r - 1, sidx);
    double m = -std::numeric_limits<double>::infinity();
    bool nan = false;
    for (int64_t j = 0; j < sk; ++j) {
      double dot = 0;
      for (int64_t e = 0; e < d; ++e)
        dot += static_cast<double>(q[row * d + e]) * k[(item * sk + j) * d + e];
      s[j] = dot * scale;
      if (hasMask) {
        sidx[r - 1] = j;
        s[j] +=
            ins[3].as<const float>()[broadcastOffset(ins[3].shape, ins[3].shape.rank(), r, sidx)];
      }
      nan = nan || std::isnan(s[j]);
      m = std::max(m, s[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < sk; ++j) sum += std::exp(s[j] - m);
    for (int64_t e = 0; e < dv; ++e) {
      double acc = 0;
      for (int64_t j = 0; j < sk; ++j)
        acc += std::exp(s[j] - m) / sum * v[(item * sk + j) * dv + e];
      o[row * dv + e] = nan ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(acc);
    }
  });
}

bool runAttention(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<AttentionParams>(&spec.params);
  if (!p || spec.key.dtype != DType::kF32) return false;
  runAttentionF32(*p, static_cast<float>(spec.key.attrs.f(attr::Attention::scale)), spec.tasks, in,
                  static_cast<float*>(out));
  return true;
}

}  // namespace gearbox::kernels
