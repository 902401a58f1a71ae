#pragma once
// What gemm.cpp and gemm_avx512.cpp share. The AVX-512 region (gemm_body.inc, conv_body.inc over
// F32x16) is its own translation unit so that it compiles beside gemm.cpp's AVX2 region: as one
// file, clang's ASan + UBSan build (-O1) took 9.3 minutes for it, the longest step of CI's
// sanitizer build on 2 cores, with the other core idle while the library waited for it.
// Internal to the executor library.

#include <cstddef>
#include <cstdint>

#include "executor/kernels/gemm.h"

namespace gearbox::kernels {

// Per-thread packing buffers (defined in gemm.cpp; GemmBuffers in gemm_body.inc): slots 0-3 for
// the GEMM and conv bodies, 4 and 5 for the Winograd path around its GEMMs.
inline constexpr int kGemmBufferSlots = 6;
float* gemmBuffer(int which, size_t floats);

// The AVX-512 region's entry points, as plain functions (no target attribute, so that gemm.cpp's
// dispatch can call them without seeing the region): each forwards to isa_avx512's function of
// the same name.
namespace on_avx512 {
void gemm(const GemmBlocking& bl, const float* a, int64_t lda, const float* b, int64_t ldb,
          float* c, int64_t ldc, int64_t m, int64_t n, int64_t k, const GemmEpilogue* e);
void gemmDirectStrips(const GemmBlocking& bl, int64_t width, const float* a, int64_t lda,
                      const float* b, float* c, int64_t ldc, int64_t m, int64_t n, int64_t k,
                      const GemmEpilogue* e);
// The direct path (bl.path kDirect) in the given tile (8 x 3 or 6 x 4 vectors) rather than
// gemmDirectTile(m)'s: for a caller that also knows its N (the Winograd path's GEMMs). e:
// MatMul's epilogue, or null.
void gemmDirectInTile(const GemmBlocking& bl, GemmDirectTile tile, const float* a, int64_t lda,
                      const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n,
                      int64_t k, const GemmEpilogue* e);
void convItem(const ConvParams& p, const float* x, const float* w, const float* bias, float lo,
              float hi, float* out, int64_t m0, int64_t m1, int64_t p0, int64_t p1);
void convPack(const ConvParams& p, const float* x, int64_t s0, int64_t s1, int64_t p0, int64_t p1,
              float* packed);
void convFromPacked(const ConvParams& p, const float* packed, const float* w, const float* bias,
                    float lo, float hi, float* out, int64_t m0, int64_t m1, int64_t p0, int64_t p1);
void depthwiseItems(const ConvParams& p, const float* x, const float* w, const float* b, float lo,
                    float hi, float* out, int64_t item0, int64_t item1);
bool maxPoolPlane(const ConvParams& p, const float* in, float* out);
void channelBlockItem(const ConvParams& p, const float* x, const float* w, const float* b, float lo,
                      float hi, float* out, int64_t img, int64_t oc0, int64_t channels, int64_t oy0,
                      int64_t oy1);
}  // namespace on_avx512

}  // namespace gearbox::kernels
