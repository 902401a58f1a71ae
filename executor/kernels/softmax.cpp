// Softmax: reference and optimized kernels (f32). The reference computes each line in double
// with libm; the optimized kernel, split over the outer dim, runs lines along the last dim on
// softmaxRowIsa below (AVX2 or AVX-512 vectors) and every other line on executor/kernels/
// softmax.h (Eigen's vectorised exp, compiled for the baseline), sums in f32. They agree to f32
// rounding of the sum, not bit for bit: tests compare them with a tolerance.
#include "executor/kernels/softmax.h"

#include <cmath>
#include <limits>

#include "executor/kernels/op_kernels.h"
#include "executor/simd/simd.h"

// GCC 12 reports false -Wmaybe-uninitialized and -Wuninitialized warnings inside its own AVX-512
// intrinsics (the _mm512_undefined_ps operand of unmasked forms and of _mm512_reduce_*).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace gearbox::kernels {
namespace {

[[gnu::noinline]] void runSoftmaxF32(const NormParams& p, int tasks, const float* x, float* y) {
  const int64_t block = p.n * p.inner;
  const Isa isa = activeIsa();
  detail::runRanges(tasks, p.outer, 1, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      if (p.inner == 1) {
        if (!softmaxRowIsa(isa, x + o * block, y + o * block, p.n, 1.0f, nullptr, 0))
          detail::softmaxLine(x + o * block, y + o * block, p.n);
      } else {
        detail::softmaxStrided(x + o * block, y + o * block, p.n, p.inner);
      }
    }
  });
}

}  // namespace

void ref::refSoftmax(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  const Shape& s = ins[0].shape;
  const int r = s.rank();
  const int64_t a = attrs.i(attr::Softmax::axis);
  const int axis = static_cast<int>(a < 0 ? a + r : a);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < r; ++d) inner *= s[d];
  const int64_t n = s[axis];
  const float* x = ins[0].as<const float>();
  float* y = out.as<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t i) { return (o * n + i) * inner + j; };
      double m = -std::numeric_limits<double>::infinity();
      bool nan = false;
      for (int64_t i = 0; i < n; ++i) {
        nan = nan || std::isnan(x[at(i)]);
        m = std::max(m, static_cast<double>(x[at(i)]));
      }
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += std::exp(x[at(i)] - m);
      for (int64_t i = 0; i < n; ++i)
        y[at(i)] = nan ? std::numeric_limits<float>::quiet_NaN()
                       : static_cast<float>(std::exp(x[at(i)] - m) / sum);
    }
}

bool runSoftmax(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<NormParams>(&spec.params);
  if (!p || spec.key.dtype != DType::kF32) return false;
  runSoftmaxF32(*p, spec.tasks, static_cast<const float*>(in[0]), static_cast<float*>(out));
  return true;
}

// ---- the row softmax per ISA (softmax.h: softmaxRowIsa) ---------------------------------------
//
// exp is Cephes' expf (the form of Eigen's pexp_float and XNNPACK's rr2-p5 kernels): x
// clamped to [-87.3, 88.0], n = round(x log2 e), r = x - n ln 2 in two parts (exact to f32), a
// degree-5 polynomial for e^r on [-ln2 / 2, ln2 / 2], and 2^n built in the exponent bits.
// A row's results lie within 2e-6 (relative) of the definition in double (tests/isa_test.cpp's
// IsaSoftmax, every ISA, tails and underflowing scores included). A NaN stays NaN (the clamps
// keep x86's NaN rule: max(lo, x) and min(hi, x) return x when x is NaN), so a row holding a NaN
// is NaN throughout, as softmaxLine's Eigen form gives.

#if GEARBOX_HAVE_ISA_REGIONS

namespace {
// Cephes expf's constants.
constexpr float kExpHi = 88.0f;  // n <= 127: 2^n stays a normal float
constexpr float kExpLo = -87.33654f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;
}  // namespace

// The body over one ISA's vector type V, given that ISA's expV, sub, maxN, addN, hmax and hsum
// (each region below defines them, then expands this).
#define GEARBOX_SOFTMAX_ROW_BODY                                                              \
  /* Whole vectors unmasked; only a row's tail is masked (AVX2's masked moves are slower). */ \
  namespace {                                                                                 \
  inline V::R ld(const float* p, int64_t m) {                                                 \
    return m == V::kLanes ? V::load(p) : V::loadN(p, m);                                      \
  }                                                                                           \
  inline void st(float* p, V::R v, int64_t m) {                                               \
    if (m == V::kLanes) {                                                                     \
      V::store(p, v);                                                                         \
    } else {                                                                                  \
      V::storeN(p, v, m);                                                                     \
    }                                                                                         \
  }                                                                                           \
  }                                                                                           \
  void softmaxRow(const float* x, float* s, int64_t n, float scale, const float* mask,        \
                  int64_t maskStride) {                                                       \
    constexpr int L = V::kLanes;                                                              \
    const V::R vscale = V::set1(&scale);                                                      \
    const float ninf = -__builtin_inff();                                                     \
    V::R vmax = V::set1(&ninf);                                                               \
    const V::R vmask = mask && maskStride == 0 ? V::set1(mask) : V::zero();                   \
    const bool rowMask = mask && maskStride != 0;                                             \
    for (int64_t i = 0; i < n; i += L) {                                                      \
      const int64_t m = n - i < L ? n - i : L;                                                \
      const V::R add = rowMask ? ld(mask + i, m) : vmask;                                     \
      const V::R t = V::fma(ld(x + i, m), vscale, add);                                       \
      st(s + i, t, m);                                                                        \
      vmax = maxN(vmax, t, m);                                                                \
    }                                                                                         \
    const float mx = hmax(vmax);                                                              \
    const V::R vmx = V::set1(&mx);                                                            \
    V::R vsum = V::zero();                                                                    \
    for (int64_t i = 0; i < n; i += L) {                                                      \
      const int64_t m = n - i < L ? n - i : L;                                                \
      const V::R e = expV(sub(ld(s + i, m), vmx));                                            \
      st(s + i, e, m);                                                                        \
      vsum = addN(vsum, e, m);                                                                \
    }                                                                                         \
    const float inv = 1.0f / hsum(vsum);                                                      \
    const V::R vinv = V::set1(&inv);                                                          \
    for (int64_t i = 0; i < n; i += L) {                                                      \
      const int64_t m = n - i < L ? n - i : L;                                                \
      st(s + i, V::fma(ld(s + i, m), vinv, V::zero()), m);                                    \
    }                                                                                         \
  }

GEARBOX_ISA_BEGIN_AVX2
namespace isa_avx2 {
namespace {
using V = F32x8;

inline __m256 sub(__m256 a, __m256 b) {
  return _mm256_sub_ps(a, b);
}

inline __m256 expV(__m256 x) {
  x = _mm256_min_ps(_mm256_set1_ps(kExpHi), x);
  x = _mm256_max_ps(_mm256_set1_ps(kExpLo), x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kP0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// The lanes past m (a row's tail) leave the running max and sum as they were.
inline __m256 maxN(__m256 acc, __m256 t, int64_t m) {
  const __m256 mx = _mm256_max_ps(t, acc);  // acc where t is NaN: the exp pass makes it NaN
  return m == 8 ? mx : _mm256_blendv_ps(acc, mx, _mm256_castsi256_ps(V::mask(m)));
}
inline __m256 addN(__m256 acc, __m256 e, int64_t m) {
  const __m256 sum = _mm256_add_ps(acc, e);
  return m == 8 ? sum : _mm256_blendv_ps(acc, sum, _mm256_castsi256_ps(V::mask(m)));
}
inline float hmax(__m256 v) {
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  x = _mm_max_ss(x, _mm_shuffle_ps(x, x, 1));
  return _mm_cvtss_f32(x);
}
inline float hsum(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_shuffle_ps(x, x, 1));
  return _mm_cvtss_f32(x);
}
}  // namespace

GEARBOX_SOFTMAX_ROW_BODY
}  // namespace isa_avx2
GEARBOX_ISA_END

GEARBOX_ISA_BEGIN_AVX512
namespace isa_avx512 {
namespace {
using V = F32x16;

inline __m512 sub(__m512 a, __m512 b) {
  return _mm512_sub_ps(a, b);
}

inline __m512 expV(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(kExpHi), x);
  x = _mm512_max_ps(_mm512_set1_ps(kExpLo), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kP0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i e =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

inline __m512 maxN(__m512 acc, __m512 t, int64_t m) {
  return _mm512_mask_max_ps(acc, V::mask(m), t, acc);
}
inline __m512 addN(__m512 acc, __m512 e, int64_t m) {
  return _mm512_mask_add_ps(acc, V::mask(m), acc, e);
}
inline float hmax(__m512 v) {
  return _mm512_reduce_max_ps(v);
}
inline float hsum(__m512 v) {
  return _mm512_reduce_add_ps(v);
}
}  // namespace

GEARBOX_SOFTMAX_ROW_BODY
}  // namespace isa_avx512
GEARBOX_ISA_END

#undef GEARBOX_SOFTMAX_ROW_BODY

#endif  // GEARBOX_HAVE_ISA_REGIONS

bool softmaxRowIsa(Isa isa, const float* x, float* s, int64_t n, float scale, const float* mask,
                   int64_t maskStride) {
#if GEARBOX_HAVE_ISA_REGIONS
  if (n <= 0) return true;
  if (isa == Isa::kAvx512) {
    isa_avx512::softmaxRow(x, s, n, scale, mask, maskStride);
    return true;
  }
  if (isa == Isa::kAvx2) {
    isa_avx2::softmaxRow(x, s, n, scale, mask, maskStride);
    return true;
  }
#else
  (void)isa, (void)x, (void)s, (void)n, (void)scale, (void)mask, (void)maskStride;
#endif
  return false;
}

}  // namespace gearbox::kernels
