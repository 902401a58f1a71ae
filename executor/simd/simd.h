#pragma once
// f32 vector traits for the per-ISA kernels (executor/simd/isa_target.h). A kernel is written
// once as a template over a traits type V:
//   V::R          the register type;        V::kLanes  floats per register;
//   V::kRegs      vector registers the ISA has (16 or 32), for register-blocking decisions;
//   V::zero(), V::load(p), V::store(p, r), V::set1(p) (broadcast *p), V::fma(a, b, c) = a*b+c,
//   V::add(a, b), V::max(a, b) / V::min(a, b) (x86's: a > b ? a : b and a < b ? a : b, so b
//   when either is NaN), V::loadN(p, n) / V::storeN(p, r, n) (the first n lanes,
//   0 <= n <= kLanes; masked: the lanes past n are neither read nor written, so they may lie past
//   an array's end).
// F32x8 also has V::rangeMask(a, b) (lanes [a, b), clamped to [0, 8]) and V::loadMasked(p, m) /
// V::storeMasked(p, r, m) under such a mask (the other lanes zero, and neither read nor written;
// V::loadMaskedOr(p, m, other) takes them from other),
// V::evens(a, b) / V::odds(a, b) / V::inOrder(r) (a stride-2 deinterleave, see there) and
// V::loadHalves(lo, hi) / V::storeHalves(lo, hi, r) (4 floats at each of two addresses).
// 16-lane types also have V::kNative (F32x16 on AVX-512, not the AVX2 stand-in), V::transpose16(r)
// (r[i] lane j <-> r[j] lane i, 16 registers) and V::permute2(lo, idx, hi, keep): lane i is lane
// idx[i] (0..31) of the 32 lanes lo then hi, or zero where bit i of `keep` is clear (AVX-512's
// vpermt2ps); and V::loadMask(p, m): lane i is p[i] where bit i of m is set, else zero, and no
// other lane is read (so p + i may lie outside the array for a clear bit); F32x16 alone has
// V::nanLanes(r) (the lanes holding a NaN, as bits). The AVX-512 kernels are
// the same templates over F32x16; F32x16OnAvx2 runs that exact 16-lane logic (tile shapes, edges,
// blocking for 32 registers) on pairs of AVX2 registers, so the tests exercise the AVX-512
// instantiation's logic on a machine without AVX-512. F32x16Avx2 is that type as an AVX2 kernel
// runs it: V::kHalves (16-lane types have it) says to run a register block as two 8-lane halves
// of V::Half, and its transpose16 stays in registers.
#include <utility>

#include "executor/simd/isa_target.h"

#if GEARBOX_HAVE_ISA_REGIONS

#define GEARBOX_SIMD_INLINE [[gnu::always_inline]] static inline

GEARBOX_ISA_BEGIN_AVX2
namespace gearbox::kernels::isa_avx2 {

struct F32x8 {
  using R = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kRegs = 16;
  GEARBOX_SIMD_INLINE R zero() { return _mm256_setzero_ps(); }
  GEARBOX_SIMD_INLINE R load(const float* p) { return _mm256_loadu_ps(p); }
  GEARBOX_SIMD_INLINE void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  GEARBOX_SIMD_INLINE R set1(const float* p) { return _mm256_broadcast_ss(p); }
  GEARBOX_SIMD_INLINE R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  GEARBOX_SIMD_INLINE R add(R a, R b) { return _mm256_add_ps(a, b); }
  GEARBOX_SIMD_INLINE R max(R a, R b) { return _mm256_max_ps(a, b); }
  GEARBOX_SIMD_INLINE R min(R a, R b) { return _mm256_min_ps(a, b); }
  GEARBOX_SIMD_INLINE __m256i mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  GEARBOX_SIMD_INLINE R loadN(const float* p, int64_t n) { return _mm256_maskload_ps(p, mask(n)); }
  GEARBOX_SIMD_INLINE void storeN(float* p, R v, int64_t n) { _mm256_maskstore_ps(p, mask(n), v); }
  // The lanes [a, b) (a, b any integers: clamped to [0, 8]) as a mask for loadMasked and
  // storeMasked: masked-off lanes are neither read nor written (no fault past an array's end).
  using Mask = __m256i;
  GEARBOX_SIMD_INLINE Mask rangeMask(int64_t a, int64_t b) {
    a = a < 0 ? 0 : a > 8 ? 8 : a;
    b = b < 0 ? 0 : b > 8 ? 8 : b;
    return _mm256_andnot_si256(mask(a), mask(b));
  }
  GEARBOX_SIMD_INLINE R loadMasked(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  // loadMasked with `other`'s lanes where m is clear.
  GEARBOX_SIMD_INLINE R loadMaskedOr(const float* p, Mask m, R other) {
    return _mm256_blendv_ps(other, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  // p[0], p[stride], ..., p[7 * stride] (stride * 7 within int32).
  GEARBOX_SIMD_INLINE R gatherStride(const float* p, int32_t stride) {
    const __m256i idx =
        _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(stride));
    return _mm256_i32gather_ps(p, idx, 4);
  }
  // The sum of the 8 lanes (pairwise: the order is fixed, so equal inputs give equal sums).
  GEARBOX_SIMD_INLINE float sum(R v) {
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 h = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
  }
  // The even (odd) floats of the 16 in a then b, in the order the in-lane shuffle leaves them:
  // 0, 2, 8, 10, 4, 6, 12, 14 (1, 3, 9, 11, 5, 7, 13, 15); inOrder(r) puts a result computed in
  // that order back in order (a lane-crossing permute, once per result rather than per input).
  GEARBOX_SIMD_INLINE R evens(R a, R b) { return _mm256_shuffle_ps(a, b, 0x88); }
  GEARBOX_SIMD_INLINE R odds(R a, R b) { return _mm256_shuffle_ps(a, b, 0xDD); }
  GEARBOX_SIMD_INLINE R inOrder(R r) {
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(r), 0xD8));
  }
  GEARBOX_SIMD_INLINE void storeMasked(float* p, R v, Mask m) { _mm256_maskstore_ps(p, m, v); }
  // 4 floats at lo then 4 at hi (a register's 128-bit halves), and the store back.
  GEARBOX_SIMD_INLINE R loadHalves(const float* lo, const float* hi) {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(lo)), _mm_loadu_ps(hi), 1);
  }
  GEARBOX_SIMD_INLINE void storeHalves(float* lo, float* hi, R v) {
    _mm_storeu_ps(lo, _mm256_castps256_ps128(v));
    _mm_storeu_ps(hi, _mm256_extractf128_ps(v, 1));
  }
  // The 4 x 4 transposes within each 128-bit lane of a, b, c, d (two shuffle stages).
  GEARBOX_SIMD_INLINE void transpose4x4Lanes(R& a, R& b, R& c, R& d) {
    const R u0 = _mm256_unpacklo_ps(a, b), u1 = _mm256_unpackhi_ps(a, b);
    const R u2 = _mm256_unpacklo_ps(c, d), u3 = _mm256_unpackhi_ps(c, d);
    a = _mm256_shuffle_ps(u0, u2, _MM_SHUFFLE(1, 0, 1, 0));
    b = _mm256_shuffle_ps(u0, u2, _MM_SHUFFLE(3, 2, 3, 2));
    c = _mm256_shuffle_ps(u1, u3, _MM_SHUFFLE(1, 0, 1, 0));
    d = _mm256_shuffle_ps(u1, u3, _MM_SHUFFLE(3, 2, 3, 2));
  }
  // out[j] = float j of the rows src + i * stride (i, j < 8): an 8 x 8 transpose read from
  // memory, each register built from two rows' 128-bit halves (vinsertf128 from memory: a load
  // and a uop any vector port takes) so that only the in-lane stages are shuffles, 16 rather
  // than transpose8's 24, on a port of their own on many cores.
  GEARBOX_SIMD_INLINE void transpose8From(const float* src, int64_t stride, R (&out)[8]) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const float* lo = src + i * stride;
      const float* hi = src + (i + 4) * stride;
      out[i] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(lo)), _mm_loadu_ps(hi), 1);
      out[i + 4] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(lo + 4)),
                                        _mm_loadu_ps(hi + 4), 1);
    }
    transpose4x4Lanes(out[0], out[1], out[2], out[3]);
    transpose4x4Lanes(out[4], out[5], out[6], out[7]);
  }
  // Float j of r[i] to dst + j * stride + i (i, j < 8): the transpose stored as 128-bit halves,
  // again without a lane-crossing shuffle.
  GEARBOX_SIMD_INLINE void transpose8To(R (&r)[8], float* dst, int64_t stride) {
    transpose4x4Lanes(r[0], r[1], r[2], r[3]);
    transpose4x4Lanes(r[4], r[5], r[6], r[7]);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      float* lo = dst + j * stride;
      float* hi = dst + (j + 4) * stride;
      _mm_storeu_ps(lo, _mm256_castps256_ps128(r[j]));
      _mm_storeu_ps(lo + 4, _mm256_castps256_ps128(r[j + 4]));
      _mm_storeu_ps(hi, _mm256_extractf128_ps(r[j], 1));
      _mm_storeu_ps(hi + 4, _mm256_extractf128_ps(r[j + 4], 1));
    }
  }
  // r[i] lane j <-> r[j] lane i: three shuffle stages (unpack, shuffle, 128-bit permute).
  GEARBOX_SIMD_INLINE void transpose8(R (&r)[8]) {
    R t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
      u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
      u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
      u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
      u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; ++i) {
      r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
      r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
  }
};

// 16 lanes as two AVX2 registers, with the register budget of AVX-512: the AVX-512 kernels'
// logic, runnable (slowly: it spills) wherever AVX2 is.
struct F32x16OnAvx2 {
  struct R {
    __m256 lo, hi;
  };
  static constexpr int kLanes = 16;
  static constexpr int kRegs = 32;
  // Kernels build some variants only for the native 16-lane ISA (compile time):
  // channel_tile_body.inc.
  static constexpr bool kNative = false;
  static constexpr bool kHalves = false;
  GEARBOX_SIMD_INLINE R zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  GEARBOX_SIMD_INLINE R load(const float* p) {
    return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
  }
  GEARBOX_SIMD_INLINE void store(float* p, R v) {
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + 8, v.hi);
  }
  GEARBOX_SIMD_INLINE R set1(const float* p) {
    const __m256 v = _mm256_broadcast_ss(p);
    return {v, v};
  }
  GEARBOX_SIMD_INLINE R fma(R a, R b, R c) {
    return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
  }
  GEARBOX_SIMD_INLINE R add(R a, R b) {
    return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
  }
  GEARBOX_SIMD_INLINE R max(R a, R b) {
    return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)};
  }
  GEARBOX_SIMD_INLINE R min(R a, R b) {
    return {_mm256_min_ps(a.lo, b.lo), _mm256_min_ps(a.hi, b.hi)};
  }
  GEARBOX_SIMD_INLINE R loadN(const float* p, int64_t n) {
    return {F32x8::loadN(p, n < 8 ? n : 8), F32x8::loadN(p + 8, n > 8 ? n - 8 : 0)};
  }
  GEARBOX_SIMD_INLINE void storeN(float* p, R v, int64_t n) {
    F32x8::storeN(p, v.lo, n < 8 ? n : 8);
    F32x8::storeN(p + 8, v.hi, n > 8 ? n - 8 : 0);
  }
  GEARBOX_SIMD_INLINE R loadMask(const float* p, uint32_t m) {
    alignas(32) float out[16];
    for (int i = 0; i < 16; ++i) out[i] = (m >> i & 1u) ? p[i] : 0.0f;
    return load(out);
  }
  GEARBOX_SIMD_INLINE void transpose16(R (&r)[16]) {
    alignas(32) float m[16][16];
    for (int i = 0; i < 16; ++i) store(m[i], r[i]);
    for (int i = 0; i < 16; ++i)
      for (int j = i + 1; j < 16; ++j) std::swap(m[i][j], m[j][i]);
    for (int i = 0; i < 16; ++i) r[i] = load(m[i]);
  }
  GEARBOX_SIMD_INLINE R permute2(R lo, const int32_t* idx, R hi, uint32_t keep) {
    alignas(32) float both[32], out[16];
    store(both, lo);
    store(both + 16, hi);
    for (int i = 0; i < 16; ++i) out[i] = (keep >> i & 1u) ? both[idx[i] & 31] : 0.0f;
    return load(out);
  }
};

// The depthwise channel-block path's vector type on AVX2 machines (conv_body.inc): the layout
// and 16-lane logic of F32x16OnAvx2, with V::kHalves (a register block of W positions runs as
// two 8-channel halves of F32x8 registers: 8 sums and the loaded input vector stay in registers,
// the 3 x 3 window's 9 weight vectors partly as FMA memory operands, where W sums of two
// registers each would spill sums) and a transpose of 8 x 8 blocks in registers, where the
// stand-in's goes through memory a float at a time.
struct F32x16Avx2 : F32x16OnAvx2 {
  using Half = F32x8;
  static constexpr bool kHalves = true;
  // As four 8 x 8 blocks: [A B; C D] (A: registers 0-7, lanes 0-7) becomes [A' C'; B' D'].
  GEARBOX_SIMD_INLINE void transpose16(R (&r)[16]) {
    __m256 a[8], b[8], c[8], d[8];
    for (int i = 0; i < 8; ++i) {
      a[i] = r[i].lo;
      b[i] = r[i].hi;
      c[i] = r[i + 8].lo;
      d[i] = r[i + 8].hi;
    }
    F32x8::transpose8(a);
    F32x8::transpose8(b);
    F32x8::transpose8(c);
    F32x8::transpose8(d);
    for (int i = 0; i < 8; ++i) {
      r[i] = {a[i], c[i]};
      r[i + 8] = {b[i], d[i]};
    }
  }
};

}  // namespace gearbox::kernels::isa_avx2
GEARBOX_ISA_END

GEARBOX_ISA_BEGIN_AVX512
namespace gearbox::kernels::isa_avx512 {

struct F32x16 {
  using R = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kRegs = 32;
  static constexpr bool kNative = true;
  static constexpr bool kHalves = false;
  GEARBOX_SIMD_INLINE R zero() { return _mm512_setzero_ps(); }
  GEARBOX_SIMD_INLINE R load(const float* p) { return _mm512_loadu_ps(p); }
  GEARBOX_SIMD_INLINE void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  GEARBOX_SIMD_INLINE R set1(const float* p) { return _mm512_set1_ps(*p); }
  GEARBOX_SIMD_INLINE R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  GEARBOX_SIMD_INLINE R add(R a, R b) { return _mm512_add_ps(a, b); }
  GEARBOX_SIMD_INLINE R max(R a, R b) { return _mm512_max_ps(a, b); }
  GEARBOX_SIMD_INLINE R min(R a, R b) { return _mm512_min_ps(a, b); }
  GEARBOX_SIMD_INLINE __mmask16 mask(int64_t n) {
    return static_cast<__mmask16>((1u << static_cast<unsigned>(n)) - 1u);
  }
  GEARBOX_SIMD_INLINE R loadN(const float* p, int64_t n) {
    return _mm512_maskz_loadu_ps(mask(n), p);
  }
  GEARBOX_SIMD_INLINE void storeN(float* p, R v, int64_t n) {
    _mm512_mask_storeu_ps(p, mask(n), v);
  }
  GEARBOX_SIMD_INLINE R loadMask(const float* p, uint32_t m) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>(m), p);
  }
  // r[i] lane j <-> r[j] lane i: in-lane unpacks and shuffles, then two rounds of 128-bit block
  // shuffles (64 one-source-lane or block ops; a vpermt2ps per output vector and stage, the same
  // count, ran at half their rate on Zen 4).
  GEARBOX_SIMD_INLINE void transpose16(R (&r)[16]) {
    R t[16];
    for (int i = 0; i < 16; i += 2) {
      t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
      r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
      r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
      r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
      r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int h = 0; h < 16; h += 8)
      for (int i = 0; i < 4; ++i) {
        t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
        t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xDD);
      }
    for (int i = 0; i < 8; ++i) {
      r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
      r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    }
  }
  GEARBOX_SIMD_INLINE R permute2(R lo, const int32_t* idx, R hi, uint32_t keep) {
    return _mm512_maskz_permutex2var_ps(static_cast<__mmask16>(keep), lo, _mm512_loadu_si512(idx),
                                        hi);
  }
  // The lanes of v that hold a NaN, as a bit mask.
  GEARBOX_SIMD_INLINE uint32_t nanLanes(R v) { return _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q); }
};

}  // namespace gearbox::kernels::isa_avx512
GEARBOX_ISA_END

#undef GEARBOX_SIMD_INLINE

#endif  // GEARBOX_HAVE_ISA_REGIONS
