// The AVX-512 region of the f32 GEMM and conv2d's paths (gemm.cpp holds the rest; gemm_isa.h says
// why they are apart), and its plain entry points.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

// GCC 12 reports false -Wmaybe-uninitialized warnings inside its own AVX-512 intrinsics.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "executor/kernels/gemm.h"
#include "executor/kernels/gemm_isa.h"
#include "executor/simd/simd.h"

namespace gearbox::kernels {

#if GEARBOX_HAVE_ISA_REGIONS

GEARBOX_ISA_BEGIN_AVX512
namespace isa_avx512 {
#include "executor/simd/gemm_body.inc"
// conv2d's paths, on gemm_body.inc's micro-kernel and packing (so after it).
#include "executor/simd/conv_body.inc"

// The direct path in the given tile: gemm below passes gemmDirectTile(m)'s, the Winograd path's
// GEMMs the one their N also chooses (winogradGemmTile).
void gemmDirectInTile(const GemmBlocking& bl, GemmDirectTile tile, const float* a, int64_t lda,
                      const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n,
                      int64_t k, const GemmEpilogue* e) {
  const GemmArgs g{a, lda, b, ldb, c, ldc, m, n, k, e};
  const GemmBuffers buf{gemmBuffer};
  if (tile.rows == 8) {
    gemmDirect<F32x16, 8, 3>(g, bl.kc, bl.nc, buf);
  } else {
    gemmDirect<F32x16, 6, 4>(g, bl.kc, bl.nc, buf);
  }
}
void gemm(const GemmBlocking& bl, const float* a, int64_t lda, const float* b, int64_t ldb,
          float* c, int64_t ldc, int64_t m, int64_t n, int64_t k, const GemmEpilogue* e) {
  const GemmArgs g{a, lda, b, ldb, c, ldc, m, n, k, e};
  const GemmBuffers buf{gemmBuffer};
  if (bl.path == GemmPath::kDirect) {
    if (gemmDirectTile(m).rows == 8) {
      gemmDirectInPlace<F32x16, 8, 3>(g, bl.kc, bl.nc, buf);
    } else {
      gemmDirectInPlace<F32x16, 6, 4>(g, bl.kc, bl.nc, buf);
    }
  } else if (bl.path == GemmPath::kSkinny) {
    gemmSkinny<F32x16>(g, bl.kc, bl.nc);
  } else {
    gemmPacked<F32x16, kGemmMrAvx512, kGemmNrAvx512 / F32x16::kLanes>(g, bl.kc, bl.mc, bl.nc, buf);
  }
}
void gemmDirectStrips(const GemmBlocking& bl, int64_t width, const float* a, int64_t lda,
                      const float* b, float* c, int64_t ldc, int64_t m, int64_t n, int64_t k,
                      const GemmEpilogue* e) {
  directStrips<F32x16>(GemmArgs{a, lda, b, width, c, ldc, m, n, k, e}, width, bl.kc, bl.nc,
                       GemmBuffers{gemmBuffer});
}
void convItem(const ConvParams& p, const float* x, const float* w, const float* bias, float lo,
              float hi, float* out, int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  convItem<F32x16, kConvMrAvx512, kConvNrAvx512 / F32x16::kLanes>(
      p, x, w, bias, lo, hi, out, m0, m1, p0, p1, GemmBuffers{gemmBuffer});
}
void convPack(const ConvParams& p, const float* x, int64_t s0, int64_t s1, int64_t p0, int64_t p1,
              float* packed) {
  convPackSlices<F32x16, kConvNrAvx512 / F32x16::kLanes>(p, x, s0, s1, p0, p1, packed,
                                                         GemmBuffers{gemmBuffer});
}
void convFromPacked(const ConvParams& p, const float* packed, const float* w, const float* bias,
                    float lo, float hi, float* out, int64_t m0, int64_t m1, int64_t p0,
                    int64_t p1) {
  convFromPacked<F32x16, kConvMrAvx512, kConvNrAvx512 / F32x16::kLanes>(p, packed, w, bias, lo, hi,
                                                                        out, m0, m1, p0, p1);
}
void depthwiseItems(const ConvParams& p, const float* x, const float* w, const float* b, float lo,
                    float hi, float* out, int64_t item0, int64_t item1) {
  depthwiseItems<F32x16>(p, x, w, b, lo, hi, out, item0, item1, GemmBuffers{gemmBuffer});
}

bool maxPoolPlane(const ConvParams& p, const float* in, float* out) {
  return maxPoolPlane<F32x16>(p, in, out, GemmBuffers{gemmBuffer});
}
void channelBlockItem(const ConvParams& p, const float* x, const float* w, const float* b, float lo,
                      float hi, float* out, int64_t img, int64_t oc0, int64_t channels, int64_t oy0,
                      int64_t oy1) {
  channelBlockItem<F32x16>(p, x, w, b, lo, hi, out, img, oc0, channels, oy0, oy1,
                           GemmBuffers{gemmBuffer});
}
}  // namespace isa_avx512
GEARBOX_ISA_END

namespace on_avx512 {
void gemm(const GemmBlocking& bl, const float* a, int64_t lda, const float* b, int64_t ldb,
          float* c, int64_t ldc, int64_t m, int64_t n, int64_t k, const GemmEpilogue* e) {
  isa_avx512::gemm(bl, a, lda, b, ldb, c, ldc, m, n, k, e);
}
void gemmDirectStrips(const GemmBlocking& bl, int64_t width, const float* a, int64_t lda,
                      const float* b, float* c, int64_t ldc, int64_t m, int64_t n, int64_t k,
                      const GemmEpilogue* e) {
  isa_avx512::gemmDirectStrips(bl, width, a, lda, b, c, ldc, m, n, k, e);
}
void gemmDirectInTile(const GemmBlocking& bl, GemmDirectTile tile, const float* a, int64_t lda,
                      const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n,
                      int64_t k, const GemmEpilogue* e) {
  isa_avx512::gemmDirectInTile(bl, tile, a, lda, b, ldb, c, ldc, m, n, k, e);
}

void convItem(const ConvParams& p, const float* x, const float* w, const float* bias, float lo,
              float hi, float* out, int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  isa_avx512::convItem(p, x, w, bias, lo, hi, out, m0, m1, p0, p1);
}

void convPack(const ConvParams& p, const float* x, int64_t s0, int64_t s1, int64_t p0, int64_t p1,
              float* packed) {
  isa_avx512::convPack(p, x, s0, s1, p0, p1, packed);
}

void convFromPacked(const ConvParams& p, const float* packed, const float* w, const float* bias,
                    float lo, float hi, float* out, int64_t m0, int64_t m1, int64_t p0,
                    int64_t p1) {
  isa_avx512::convFromPacked(p, packed, w, bias, lo, hi, out, m0, m1, p0, p1);
}

void depthwiseItems(const ConvParams& p, const float* x, const float* w, const float* b, float lo,
                    float hi, float* out, int64_t item0, int64_t item1) {
  isa_avx512::depthwiseItems(p, x, w, b, lo, hi, out, item0, item1);
}

bool maxPoolPlane(const ConvParams& p, const float* in, float* out) {
  return isa_avx512::maxPoolPlane(p, in, out);
}

void channelBlockItem(const ConvParams& p, const float* x, const float* w, const float* b, float lo,
                      float hi, float* out, int64_t img, int64_t oc0, int64_t channels, int64_t oy0,
                      int64_t oy1) {
  isa_avx512::channelBlockItem(p, x, w, b, lo, hi, out, img, oc0, channels, oy0, oy1);
}
}  // namespace on_avx512

#endif  // GEARBOX_HAVE_ISA_REGIONS

}  // namespace gearbox::kernels
