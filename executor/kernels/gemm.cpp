// The f32 GEMM behind MatMul and conv2d (executor/kernels/gemm.h): a BLIS-style packed GEMM and
// a skinny (small-M) GEMM, written once over vector traits (gemm_body.inc) and compiled per ISA
// in target regions (isa_target.h), chosen at run time. The baseline ISA runs Eigen's GEMM
// (executor/kernels/matmul.cpp), compiled for the baseline like the rest of the library. The
// same regions hold conv2d's own paths and max_pool2d's walk (conv_body.inc), which share the
// micro-kernel, the packing and the per-thread buffers. This file holds the AVX2 region (and the
// AVX-512 logic on AVX2 registers the tests run) and the entry points; the AVX-512 region is
// gemm_avx512.cpp (gemm_isa.h says why).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

// GCC 12 reports false -Wmaybe-uninitialized warnings inside its own AVX-512 intrinsics.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "executor/kernels/gemm.h"
#include "executor/kernels/gemm_isa.h"
#include "executor/simd/simd.h"

namespace gearbox::kernels {

// Per-thread packing buffers (slots 0-3: B panels, A panels, and conv2d's gathered row and phased
// input; 4-5: a Winograd block's transformed input V and products M, whose GEMMs use 0-3), grown
// and never shrunk, so the static run path allocates only on a thread's first GEMM of a new size.
// 64-byte aligned: whole cache lines per panel.
float* gemmBuffer(int which, size_t floats) {
  struct Buffers {
    float* ptr[kGemmBufferSlots] = {};
    size_t cap[kGemmBufferSlots] = {};
    ~Buffers() {
      for (float* p : ptr) std::free(p);
    }
  };
  thread_local Buffers bufs;
  if (floats > bufs.cap[which]) {
    std::free(bufs.ptr[which]);
    bufs.ptr[which] = nullptr;
    bufs.cap[which] = 0;
    const size_t bytes = (std::max<size_t>(floats, 16) * sizeof(float) + 63) / 64 * 64;
    auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (!p) throw std::bad_alloc();
    bufs.ptr[which] = p;
    bufs.cap[which] = bytes / sizeof(float);
  }
  return bufs.ptr[which];
}

namespace {

// MatMul's epilogue on all of C, in scalars: for the Eigen path (the baseline ISA) and K = 0,
// the same adds in the same order and Clip's comparisons as finishBlock's vectors.
void finishScalar(const GemmEpilogue& e, float* c, int64_t ldc, int64_t m, int64_t n) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float x = c[i * ldc + j];
      if (e.bias) x += e.bias[j];
      if (e.res) x += e.res[i * e.ldr + j];
      if (e.clamp) {
        x = e.lo > x ? e.lo : x;
        x = e.hi < x ? e.hi : x;
      }
      c[i * ldc + j] = x;
    }
}

}  // namespace

#if GEARBOX_HAVE_ISA_REGIONS

GEARBOX_ISA_BEGIN_AVX2
namespace isa_avx2 {
#include "executor/simd/gemm_body.inc"
// conv2d's paths, on gemm_body.inc's micro-kernel and packing (so after it).
#include "executor/simd/conv_body.inc"

void gemm(const GemmBlocking& bl, const float* a, int64_t lda, const float* b, int64_t ldb,
          float* c, int64_t ldc, int64_t m, int64_t n, int64_t k, const GemmEpilogue* e) {
  const GemmArgs g{a, lda, b, ldb, c, ldc, m, n, k, e};
  const GemmBuffers buf{gemmBuffer};
  if (bl.path == GemmPath::kSkinny) {
    gemmSkinny<F32x8>(g, bl.kc, bl.nc);
  } else if (bl.path == GemmPath::kDirect) {
    gemmDirectPanels<F32x8, kGemmDirectMrAvx2, kGemmDirectNrAvx2 / F32x8::kLanes,
                     kPanelPrefetchRows>(g, bl.kc, bl.nc, buf);
  } else {
    gemmPacked<F32x8, kGemmMrAvx2, kGemmNrAvx2 / F32x8::kLanes>(g, bl.kc, bl.mc, bl.nc, buf);
  }
}

// gemmDirectStrips' AVX-512 logic on AVX2 (tests, and a plan packed for AVX-512 run after the
// ISA was lowered).
void gemmDirectStripsAvx512Logic(const GemmBlocking& bl, int64_t width, const float* a, int64_t lda,
                                 const float* b, float* c, int64_t ldc, int64_t m, int64_t n,
                                 int64_t k, const GemmEpilogue* e) {
  directStrips<F32x16OnAvx2>(GemmArgs{a, lda, b, width, c, ldc, m, n, k, e}, width, bl.kc, bl.nc,
                             GemmBuffers{gemmBuffer});
}

// The AVX-512 kernels' logic (12 x 32 tiles and 16-lane streams) on AVX2.
void gemmAvx512Logic(const GemmBlocking& bl, const float* a, int64_t lda, const float* b,
                     int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n, int64_t k,
                     const GemmEpilogue* e) {
  const GemmArgs g{a, lda, b, ldb, c, ldc, m, n, k, e};
  const GemmBuffers buf{gemmBuffer};
  using V = F32x16OnAvx2;
  if (bl.path == GemmPath::kSkinny) {
    gemmSkinny<V>(g, bl.kc, bl.nc);
  } else if (bl.path == GemmPath::kDirect) {
    if (gemmDirectTile(m).rows == 8) {
      gemmDirectInPlace<V, 8, 3>(g, bl.kc, bl.nc, buf);
    } else {
      gemmDirectInPlace<V, 6, 4>(g, bl.kc, bl.nc, buf);
    }
  } else {
    gemmPacked<V, kGemmMrAvx512, kGemmNrAvx512 / V::kLanes>(g, bl.kc, bl.mc, bl.nc, buf);
  }
}
void convItem(const ConvParams& p, const float* x, const float* w, const float* bias, float lo,
              float hi, float* out, int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  convItem<F32x8, kGemmMrAvx2, kGemmNrAvx2 / F32x8::kLanes>(p, x, w, bias, lo, hi, out, m0, m1, p0,
                                                            p1, GemmBuffers{gemmBuffer});
}

void convItemToBlocks(const ConvParams& p, const float* x, const float* wp, const float* bias,
                      float lo, float hi, float* out, int64_t j0, int64_t j1, int64_t p0,
                      int64_t p1) {
  convItemToBlocks<F32x8, kGemmMrAvx2, kGemmNrAvx2 / F32x8::kLanes>(p, x, wp, bias, lo, hi, out, j0,
                                                                    j1, p0, p1);
}

void convItemFromBlocks(const ConvParams& p, const float* x, const float* wp, const float* bias,
                        float lo, float hi, float* out, const float* res, int64_t c0, int64_t c1,
                        int64_t p0, int64_t p1) {
  convItemFromBlocks<F32x8>(p, x, wp, bias, lo, hi, out, res, c0, c1, p0, p1);
}

void convPack(const ConvParams& p, const float* x, int64_t s0, int64_t s1, int64_t p0, int64_t p1,
              float* packed) {
  convPackSlices<F32x8, kGemmNrAvx2 / F32x8::kLanes>(p, x, s0, s1, p0, p1, packed,
                                                     GemmBuffers{gemmBuffer});
}
void convFromPacked(const ConvParams& p, const float* packed, const float* w, const float* bias,
                    float lo, float hi, float* out, int64_t m0, int64_t m1, int64_t p0,
                    int64_t p1) {
  convFromPacked<F32x8, kGemmMrAvx2, kGemmNrAvx2 / F32x8::kLanes>(p, packed, w, bias, lo, hi, out,
                                                                  m0, m1, p0, p1);
}

void depthwiseItems(const ConvParams& p, const float* x, const float* w, const float* b, float lo,
                    float hi, float* out, int64_t item0, int64_t item1) {
  depthwiseItems<F32x8>(p, x, w, b, lo, hi, out, item0, item1, GemmBuffers{gemmBuffer});
}

bool maxPoolPlane(const ConvParams& p, const float* in, float* out) {
  return maxPoolPlane<F32x8>(p, in, out, GemmBuffers{gemmBuffer});
}

void depthwiseItemsAvx512Logic(const ConvParams& p, const float* x, const float* w, const float* b,
                               float lo, float hi, float* out, int64_t item0, int64_t item1) {
  depthwiseItems<F32x16OnAvx2>(p, x, w, b, lo, hi, out, item0, item1, GemmBuffers{gemmBuffer});
}

void convItemAvx512Logic(const ConvParams& p, const float* x, const float* w, const float* bias,
                         float lo, float hi, float* out, int64_t m0, int64_t m1, int64_t p0,
                         int64_t p1) {
  using V = F32x16OnAvx2;
  convItem<V, kConvMrAvx512, kConvNrAvx512 / V::kLanes>(p, x, w, bias, lo, hi, out, m0, m1, p0, p1,
                                                        GemmBuffers{gemmBuffer});
}
void channelBlockItemAvx512Logic(const ConvParams& p, const float* x, const float* w,
                                 const float* b, float lo, float hi, float* out, int64_t img,
                                 int64_t oc0, int64_t channels, int64_t oy0, int64_t oy1) {
  channelBlockItem<F32x16OnAvx2>(p, x, w, b, lo, hi, out, img, oc0, channels, oy0, oy1,
                                 GemmBuffers{gemmBuffer});
}
void channelBlockItem(const ConvParams& p, const float* x, const float* w, const float* b, float lo,
                      float hi, float* out, int64_t img, int64_t oc0, int64_t channels, int64_t oy0,
                      int64_t oy1) {
  channelBlockItem<F32x16Avx2>(p, x, w, b, lo, hi, out, img, oc0, channels, oy0, oy1,
                               GemmBuffers{gemmBuffer});
}
}  // namespace isa_avx2
GEARBOX_ISA_END

// The instantiations below are the tiles gemmDirectTile() names.
static_assert(gemmDirectTile(8).rows == 8 && gemmDirectTile(8).vectors == 3 &&
              gemmDirectTile(6).rows == 6 && gemmDirectTile(6).vectors == 4);

#endif  // GEARBOX_HAVE_ISA_REGIONS

void gemmF32(Isa isa, const GemmBlocking& blocking, const float* a, int64_t lda, const float* b,
             int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n, int64_t k,
             const GemmEpilogue* e) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    if (e) finishScalar(*e, c, ldc, m, n);
    return;
  }
  // Never above what this process runs: a spec compiled for a larger ISA (built by hand, or
  // from a file that bypassed validation) takes the blocking of the ISA that runs it.
  GemmBlocking bl = blocking;
  const Isa active = activeIsa();
  if (isa > active) {
    isa = active;
    bl = chooseGemmBlocking(isa, DType::kF32, m, n, k);
  }
#if GEARBOX_HAVE_ISA_REGIONS
  if (bl.path != GemmPath::kEigen) {
    switch (isa) {
      case Isa::kAvx512: on_avx512::gemm(bl, a, lda, b, ldb, c, ldc, m, n, k, e); return;
      case Isa::kAvx2: isa_avx2::gemm(bl, a, lda, b, ldb, c, ldc, m, n, k, e); return;
      case Isa::kBaseline: break;
    }
  }
#endif
  eigenGemmF32(a, lda, b, ldb, c, ldc, m, n, k);
  if (e) finishScalar(*e, c, ldc, m, n);
}

bool gemmF32StripsB(const GemmBlocking& blocking, int64_t width, const float* a, int64_t lda,
                    const float* b, float* c, int64_t ldc, int64_t m, int64_t n, int64_t k,
                    const GemmEpilogue* e, bool avx512LogicOnAvx2) {
  if (width != 48 && width != 64) return false;
  if (m <= 0 || n <= 0) return true;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    if (e) finishScalar(*e, c, ldc, m, n);
    return true;
  }
#if GEARBOX_HAVE_ISA_REGIONS
  const Isa active = activeIsa();
  if (!avx512LogicOnAvx2 && active >= Isa::kAvx512) {
    on_avx512::gemmDirectStrips(blocking, width, a, lda, b, c, ldc, m, n, k, e);
    return true;
  }
  if (active >= Isa::kAvx2) {
    isa_avx2::gemmDirectStripsAvx512Logic(blocking, width, a, lda, b, c, ldc, m, n, k, e);
    return true;
  }
#endif
  if (avx512LogicOnAvx2) return false;
  // The baseline (a plan packed on AVX-512, run after GEARBOX_ISA lowered the ISA): the sums in
  // k order, column j of B at strip j / width, lane j % width.
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float* col = b + j / width * k * width + j % width;
      float sum = 0.0f;
      for (int64_t p = 0; p < k; ++p) sum += a[i * lda + p] * col[p * width];
      c[i * ldc + j] = sum;
    }
  if (e) finishScalar(*e, c, ldc, m, n);
  return true;
}

void gemmF32(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
             int64_t m, int64_t n, int64_t k) {
  const Isa isa = activeIsa();
  gemmF32(isa, chooseGemmBlocking(isa, DType::kF32, m, n, k), a, lda, b, ldb, c, ldc, m, n, k);
}

bool convGemmItemF32(const ConvParams& p, const float* x, const float* w, const float* bias,
                     float lo, float hi, float* out, int64_t m0, int64_t m1, int64_t p0,
                     int64_t p1) {
#if GEARBOX_HAVE_ISA_REGIONS
  switch (activeIsa()) {
    case Isa::kAvx512: on_avx512::convItem(p, x, w, bias, lo, hi, out, m0, m1, p0, p1); return true;
    case Isa::kAvx2: isa_avx2::convItem(p, x, w, bias, lo, hi, out, m0, m1, p0, p1); return true;
    case Isa::kBaseline: break;
  }
#endif
  return false;
}

bool convItemToBlocksF32(const ConvParams& p, const float* x, const float* wp, const float* bias,
                         float lo, float hi, float* out, int64_t j0, int64_t j1, int64_t p0,
                         int64_t p1) {
#if GEARBOX_HAVE_ISA_REGIONS
  // AVX2's tiles on AVX-512 too: a plan built under GEARBOX_ISA=avx2 (or an override) may run
  // after the ISA is raised, and AVX-512's 1x1 paths read and write planes only.
  if (activeIsa() >= Isa::kAvx2) {
    isa_avx2::convItemToBlocks(p, x, wp, bias, lo, hi, out, j0, j1, p0, p1);
    return true;
  }
#endif
  return false;
}

bool convItemFromBlocksF32(const ConvParams& p, const float* x, const float* wp, const float* bias,
                           float lo, float hi, float* out, const float* res, int64_t c0, int64_t c1,
                           int64_t p0, int64_t p1) {
#if GEARBOX_HAVE_ISA_REGIONS
  // AVX2's tiles on AVX-512 too, as convItemToBlocksF32's.
  if (activeIsa() >= Isa::kAvx2) {
    isa_avx2::convItemFromBlocks(p, x, wp, bias, lo, hi, out, res, c0, c1, p0, p1);
    return true;
  }
#endif
  return false;
}

bool convPointwiseInPlaceF32() {
#if GEARBOX_HAVE_ISA_REGIONS
  return activeIsa() == Isa::kAvx512;
#else
  return false;
#endif
}

int64_t convPackedFloatsF32(const ConvParams& p, int64_t p0, int64_t p1) {
#if GEARBOX_HAVE_ISA_REGIONS
  switch (activeIsa()) {
    case Isa::kAvx512: return isa_avx2::convPackedFloats<kConvNrAvx512>(p, p0, p1);
    case Isa::kAvx2: return isa_avx2::convPackedFloats<kGemmNrAvx2>(p, p0, p1);
    case Isa::kBaseline: break;
  }
#endif
  return 0;
}

bool convPackF32(const ConvParams& p, const float* x, int64_t s0, int64_t s1, int64_t p0,
                 int64_t p1, float* packed) {
#if GEARBOX_HAVE_ISA_REGIONS
  switch (activeIsa()) {
    case Isa::kAvx512: on_avx512::convPack(p, x, s0, s1, p0, p1, packed); return true;
    case Isa::kAvx2: isa_avx2::convPack(p, x, s0, s1, p0, p1, packed); return true;
    case Isa::kBaseline: break;
  }
#endif
  return false;
}

bool convFromPackedF32(const ConvParams& p, const float* packed, const float* w, const float* bias,
                       float lo, float hi, float* out, int64_t m0, int64_t m1, int64_t p0,
                       int64_t p1) {
#if GEARBOX_HAVE_ISA_REGIONS
  switch (activeIsa()) {
    case Isa::kAvx512:
      on_avx512::convFromPacked(p, packed, w, bias, lo, hi, out, m0, m1, p0, p1);
      return true;
    case Isa::kAvx2:
      isa_avx2::convFromPacked(p, packed, w, bias, lo, hi, out, m0, m1, p0, p1);
      return true;
    case Isa::kBaseline: break;
  }
#endif
  return false;
}

bool convDepthwiseItemsF32(const ConvParams& p, const float* x, const float* w, const float* b,
                           float lo, float hi, float* out, int64_t item0, int64_t item1) {
#if GEARBOX_HAVE_ISA_REGIONS
  switch (activeIsa()) {
    case Isa::kAvx512:
      on_avx512::depthwiseItems(p, x, w, b, lo, hi, out, item0, item1);
      return true;
    case Isa::kAvx2: isa_avx2::depthwiseItems(p, x, w, b, lo, hi, out, item0, item1); return true;
    case Isa::kBaseline: break;
  }
#endif
  return false;
}

bool convChannelBlockItemF32(const ConvParams& p, const float* x, const float* w, const float* b,
                             float lo, float hi, float* out, int64_t img, int64_t oc0,
                             int64_t channels, int64_t oy0, int64_t oy1, bool avx512LogicOnAvx2) {
#if GEARBOX_HAVE_ISA_REGIONS
  if (avx512LogicOnAvx2) {
    if (activeIsa() < Isa::kAvx2) return false;
    isa_avx2::channelBlockItemAvx512Logic(p, x, w, b, lo, hi, out, img, oc0, channels, oy0, oy1);
    return true;
  }
  if (activeIsa() == Isa::kAvx512) {
    on_avx512::channelBlockItem(p, x, w, b, lo, hi, out, img, oc0, channels, oy0, oy1);
    return true;
  }
  if (activeIsa() == Isa::kAvx2) {
    isa_avx2::channelBlockItem(p, x, w, b, lo, hi, out, img, oc0, channels, oy0, oy1);
    return true;
  }
#endif
  return false;
}

int64_t depthwiseGroup(const ConvParams& p) {
  const int64_t plane = std::max<int64_t>(p.h * p.w, 1);
  return std::clamp<int64_t>(8192 / plane, 1, 8);
}

bool maxPoolPlaneF32(const PoolParams& pool, const float* in, float* out) {
#if GEARBOX_HAVE_ISA_REGIONS
  // The window walk in conv_body.inc's terms: a conv's geometry without channels.
  ConvParams p;
  p.h = pool.h;
  p.w = pool.w;
  p.oh = pool.oh;
  p.ow = pool.ow;
  p.kh = pool.kh;
  p.kw = pool.kw;
  p.sh = pool.sh;
  p.sw = pool.sw;
  p.dh = pool.dh;
  p.dw = pool.dw;
  p.pt = pool.pt;
  p.pl = pool.pl;
  if (p.oh <= 0 || p.ow <= 0) return true;
  switch (activeIsa()) {
    case Isa::kAvx512: return on_avx512::maxPoolPlane(p, in, out);
    case Isa::kAvx2: return isa_avx2::maxPoolPlane(p, in, out);
    case Isa::kBaseline: break;
  }
#endif
  return false;
}

bool convDepthwiseItemF32Avx512LogicOnAvx2(const ConvParams& p, const float* x, const float* w,
                                           const float* b, float lo, float hi, float* out,
                                           int64_t item0, int64_t item1) {
#if GEARBOX_HAVE_ISA_REGIONS
  if (activeIsa() < Isa::kAvx2) return false;
  isa_avx2::depthwiseItemsAvx512Logic(p, x, w, b, lo, hi, out, item0, item1);
  return true;
#else
  return false;
#endif
}

bool convGemmItemF32Avx512LogicOnAvx2(const ConvParams& p, const float* x, const float* w,
                                      const float* bias, float lo, float hi, float* out, int64_t m0,
                                      int64_t m1, int64_t p0, int64_t p1) {
#if GEARBOX_HAVE_ISA_REGIONS
  if (activeIsa() < Isa::kAvx2) return false;
  isa_avx2::convItemAvx512Logic(p, x, w, bias, lo, hi, out, m0, m1, p0, p1);
  return true;
#else
  return false;
#endif
}

bool gemmF32Avx512LogicOnAvx2(const GemmBlocking& blocking, const float* a, int64_t lda,
                              const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m,
                              int64_t n, int64_t k, const GemmEpilogue* e) {
#if GEARBOX_HAVE_ISA_REGIONS
  if (activeIsa() < Isa::kAvx2) return false;
  if (m <= 0 || n <= 0) return true;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    if (e) finishScalar(*e, c, ldc, m, n);
    return true;
  }
  isa_avx2::gemmAvx512Logic(blocking, a, lda, b, ldb, c, ldc, m, n, k, e);
  return true;
#else
  return false;
#endif
}

}  // namespace gearbox::kernels
