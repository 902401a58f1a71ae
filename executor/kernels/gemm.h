#pragma once
// The f32 GEMM the MatMul kernel runs (executor/kernels/gemm.cpp), for other kernels that reduce
// to one too: conv2d's im2col and 1x1 paths. Internal to the executor library.

#include <cstdint>

#include "compiler/kernel_spec.h"

namespace gearbox::kernels {

// C[m, n] = A[m, k] B[k, n], row-major with leading dims lda, ldb, ldc (in elements), on the
// path and blocking the compile step chose for `isa` (MatMulParams). Runs in the calling thread
// with its per-thread packing buffers. An `isa` above activeIsa() runs on activeIsa() with the
// blocking chosen for it, so any spec runs correctly on any CPU.
void gemmF32(Isa isa, const GemmBlocking& blocking, const float* a, int64_t lda, const float* b,
             int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n, int64_t k);

// The same, with the path and blocking chosen now for activeIsa() (conv2d, whose GEMM shapes
// are known only inside its loop).
void gemmF32(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
             int64_t m, int64_t n, int64_t k);

// Eigen's GEMM compiled for the baseline ISA (executor/kernels/matmul.cpp).
void eigenGemmF32(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                  int64_t m, int64_t n, int64_t k);

// For tests: the AVX-512 kernels' logic (the same templates over 16-lane vectors: 12 x 32 tiles
// and their packing, 16-lane skinny streams) run on pairs of AVX2 registers, with a blocking
// chosen for Isa::kAvx512. False (nothing run) when this CPU has no AVX2.
bool gemmF32Avx512LogicOnAvx2(const GemmBlocking& blocking, const float* a, int64_t lda,
                              const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m,
                              int64_t n, int64_t k);

}  // namespace gearbox::kernels
