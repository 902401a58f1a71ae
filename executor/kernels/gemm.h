#pragma once
// The GEMM the MatMul kernel runs (executor/kernels/matmul.cpp), for other kernels that reduce
// to one: conv2d's im2col and 1x1 paths.

#include <cstdint>

namespace gearbox::kernels {

// C[m, n] = A[m, k] B[k, n], row-major with leading dims lda, ldb, ldc (in elements). Runs in
// the calling thread with its per-thread packing buffers.
void gemmF32(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
             int64_t m, int64_t n, int64_t k);

}  // namespace gearbox::kernels
