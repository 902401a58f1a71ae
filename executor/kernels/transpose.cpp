// Transpose: reference and optimized kernels. The optimized kernel walks the output in order,
// one row of its innermost (merged) dim at a time, reading the input at the strides the compile
// step derived (compiler/ops/transpose.cpp): a row whose input stride is 1 is one block copy,
// others are a strided gather. A swap of the two innermost dims of 4-byte elements runs, on
// AVX2 and AVX-512 CPUs, as 8 x 8 blocks transposed in registers (isa_avx2 below).
#include "compiler/cpu_isa.h"
#include "executor/kernels/common.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"
#include "executor/simd/isa_target.h"

namespace gearbox::kernels {

#if GEARBOX_HAVE_ISA_REGIONS
GEARBOX_ISA_BEGIN_AVX2
namespace isa_avx2 {
namespace {

// dst[c * ds + r] = src[r * ss + c] for an 8 x 8 block of 32-bit elements: eight row loads,
// three shuffle stages (unpack, shuffle, 128-bit permute), eight row stores.
[[gnu::always_inline]] inline void transpose8x8(const uint32_t* src, int64_t ss, uint32_t* dst,
                                                int64_t ds) {
  auto ld = [&](int r) { return _mm256_loadu_ps(reinterpret_cast<const float*>(src + r * ss)); };
  const __m256 r0 = ld(0), r1 = ld(1), r2 = ld(2), r3 = ld(3), r4 = ld(4), r5 = ld(5), r6 = ld(6),
               r7 = ld(7);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  auto st = [&](int r, __m256 v) { _mm256_storeu_ps(reinterpret_cast<float*>(dst + r * ds), v); };
  st(0, _mm256_permute2f128_ps(u0, u4, 0x20));
  st(1, _mm256_permute2f128_ps(u1, u5, 0x20));
  st(2, _mm256_permute2f128_ps(u2, u6, 0x20));
  st(3, _mm256_permute2f128_ps(u3, u7, 0x20));
  st(4, _mm256_permute2f128_ps(u0, u4, 0x31));
  st(5, _mm256_permute2f128_ps(u1, u5, 0x31));
  st(6, _mm256_permute2f128_ps(u2, u6, 0x31));
  st(7, _mm256_permute2f128_ps(u3, u7, 0x31));
}

}  // namespace

// out[a, b] = in[b * sb + a] for a in [a0, a1), b in [0, cols): whole 8 x 8 blocks in
// registers, the ragged right and bottom edges element by element. The caller's block of rows
// (kTile of them) and all its columns stay in L1 while they are written.
void transposeRows(const uint32_t* in, int64_t sb, uint32_t* out, int64_t cols, int64_t a0,
                   int64_t a1) {
  const int64_t a8 = a0 + (a1 - a0) / 8 * 8, b8 = cols / 8 * 8;
  // Columns of blocks outermost: the eight input rows of a block column are used whole (every
  // 8-float half of their cache lines) before the next eight are loaded. Input rows sb apart
  // (4 KiB for sb = 1024) share one L1 set, so a line left for later would be evicted first.
  for (int64_t b = 0; b < b8; b += 8)
    for (int64_t a = a0; a < a8; a += 8)
      transpose8x8(in + b * sb + a, sb, out + a * cols + b, cols);
  for (int64_t i = a0; i < a8; ++i)
    for (int64_t b = b8; b < cols; ++b) out[i * cols + b] = in[b * sb + i];
  for (int64_t i = a8; i < a1; ++i)
    for (int64_t b = 0; b < cols; ++b) out[i * cols + b] = in[b * sb + i];
}

}  // namespace isa_avx2
GEARBOX_ISA_END
#endif  // GEARBOX_HAVE_ISA_REGIONS

namespace {

// The last two output dims [A, B] read the input at strides [1, sb] (a swap of the two innermost
// dims, NCHW -> NHWC and the like): a row-by-row walk would read one element per cache line.
// Square tiles keep the kTile input lines of a tile in L1 while their elements are written out,
// so each input line is fetched once. Work units are (outer index, tile row) pairs.
template <typename E>
void runTiled(const TransposeParams& p, int tasks, const E* src, E* dst) {
  constexpr int64_t kTile = 16;
  const int last = p.rank - 1;
  const int64_t rows = p.outDims[last - 1], cols = p.outDims[last], sb = p.inStrides[last];
  const int64_t outer = p.numel / (rows * cols);
  const int64_t tileRows = (rows + kTile - 1) / kTile;
  // AVX-512 CPUs run the AVX2 blocks too: the transpose is bound by memory, not by shuffles.
  [[maybe_unused]] const bool avx2 = activeIsa() >= Isa::kAvx2;
  detail::runRanges(tasks, outer * tileRows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t o = unit / tileRows, a0 = unit % tileRows * kTile;
      // The input offset of outer index o over the dims before the last two.
      int64_t off = 0, rem = o;
      for (int d = last - 2; d >= 0; --d) {
        off += rem % p.outDims[d] * p.inStrides[d];
        rem /= p.outDims[d];
      }
      const int64_t a1 = std::min(rows, a0 + kTile);
      E* out = dst + o * rows * cols;
#if GEARBOX_HAVE_ISA_REGIONS
      if constexpr (sizeof(E) == 4) {
        if (avx2) {
          isa_avx2::transposeRows(src + off, sb, out, cols, a0, a1);
          continue;
        }
      }
#endif
      for (int64_t b0 = 0; b0 < cols; b0 += kTile) {
        const int64_t b1 = std::min(cols, b0 + kTile);
        for (int64_t a = a0; a < a1; ++a)
          for (int64_t b = b0; b < b1; ++b) out[a * cols + b] = src[off + a + b * sb];
      }
    }
  });
}

// E is an unsigned integer of the element size: a transpose moves bits, so f32 and i32 share one
// instantiation.
template <typename E>
[[gnu::noinline]] void runTransposeT(const TransposeParams& p, int tasks, const void* in,
                                     void* out) {
  const E* src = static_cast<const E*>(in);
  E* dst = static_cast<E*>(out);
  if (p.numel == 0) return;
  if (p.rank == 0) {
    detail::runRanges(
        tasks, p.numel, 64 / static_cast<int64_t>(sizeof(E)), [&](int64_t begin, int64_t end) {
          std::memcpy(dst + begin, src + begin, static_cast<size_t>(end - begin) * sizeof(E));
        });
    return;
  }
  const int last = p.rank - 1;
  const int64_t len = p.outDims[last], stride = p.inStrides[last];
  if (stride != 1 && p.rank >= 2 && p.inStrides[last - 1] == 1) {
    runTiled(p, tasks, src, dst);
    return;
  }
  detail::runRanges(tasks, p.numel / len, 1, [&](int64_t begin, int64_t end) {
    // The input offset of output row `begin`, then advanced like an odometer.
    int64_t idx[kMaxRank] = {};
    int64_t off = 0, rem = begin;
    for (int d = last - 1; d >= 0; --d) {
      idx[d] = rem % p.outDims[d];
      rem /= p.outDims[d];
      off += idx[d] * p.inStrides[d];
    }
    for (int64_t r = begin; r < end; ++r) {
      E* orow = dst + r * len;
      const E* irow = src + off;
      if (stride == 1) {
        std::memcpy(orow, irow, static_cast<size_t>(len) * sizeof(E));
      } else {
        for (int64_t c = 0; c < len; ++c) orow[c] = irow[c * stride];
      }
      for (int d = last - 1; d >= 0; --d) {
        off += p.inStrides[d];
        if (++idx[d] < p.outDims[d]) break;
        off -= p.inStrides[d] * p.outDims[d];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace

void ref::refTranspose(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  using namespace ref::detail;
  const Shape& perm = *attrs.perm;
  const TensorView& in = ins[0];
  copyElements(ins, out, [&](const int64_t* idx) {
    // Output dim i is input dim perm[i].
    int64_t src[kMaxRank];
    for (int i = 0; i < perm.rank(); ++i) src[perm[i]] = idx[i];
    return std::pair<size_t, int64_t>{0, offsetOf(in.shape, src)};
  });
}

bool runTranspose(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<TransposeParams>(&spec.params);
  if (!p) return false;
  if (dtypeSize(spec.key.dtype) == 8) {
    runTransposeT<uint64_t>(*p, spec.tasks, in[0], out);
  } else {
    runTransposeT<uint32_t>(*p, spec.tasks, in[0], out);
  }
  return true;
}

}  // namespace gearbox::kernels
