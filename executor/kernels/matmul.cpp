// MatMul: reference and optimized kernels. The optimized kernel runs one GEMM per batch, row
// block or column block the compile step chose (compiler/ops/matmul.cpp): for f32 the per-ISA
// GEMM of executor/kernels/gemm.cpp on the path and blocking in the spec, for integer dtypes
// (and f32 on the baseline ISA) Eigen's GEMM, compiled for the baseline. 1-D operands need no
// code of their own: a [K] operand has the memory layout of the [1, K] or [K, 1] matrix it is
// promoted to.
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <new>
#include <type_traits>

// GCC 12 reports false -Wmaybe-uninitialized warnings inside its own AVX-512 intrinsics when
// they are inlined from Eigen's GEMM kernels (a known GCC issue); they would bury real warnings.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>

#include "executor/kernels/common.h"
#include "executor/kernels/gemm.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

// Eigen's packing buffers for one thread. Eigen's own product allocates them on every call
// above its 128 KiB stack limit; keeping them per thread (grown, never shrunk) makes the static
// run path allocation-free after the first call on each thread. Eigen itself stays
// single-threaded (no OpenMP): parallelism comes from oneTBB over batches or row blocks.
template <typename T>
class GemmWorkspace : public Eigen::internal::level3_blocking<T, T> {
 public:
  ~GemmWorkspace() {
    std::free(a_);
    std::free(b_);
  }

  // Sets Eigen's cache blocking for C[m, n] = A[m, k] B[k, n] (row-major) and points it at
  // buffers large enough for the packed panels.
  void prepare(Eigen::Index m, Eigen::Index n, Eigen::Index k) {
    // Eigen runs a row-major product as the transposed column-major one, so its "rows" are n;
    // this mirrors gemm_blocking_space for a row-major destination.
    Eigen::Index kc = k, mc = n, nc = m;
    Eigen::internal::computeProductBlockingSizes<T, T, 1>(kc, mc, nc, Eigen::Index{1});
    this->m_kc = kc;
    this->m_mc = mc;
    this->m_nc = nc;
    this->m_blockA = reserve(a_, capA_, static_cast<size_t>(kc * mc));
    this->m_blockB = reserve(b_, capB_, static_cast<size_t>(kc * nc));
  }

 private:
  static T* reserve(T*& buf, size_t& cap, size_t elems) {
    if (elems > cap) {
      std::free(buf);
      // aligned_alloc needs a multiple of the alignment; 64 bytes suits every vector width.
      const size_t bytes = (elems * sizeof(T) + 63) / 64 * 64;
      buf = static_cast<T*>(std::aligned_alloc(64, bytes));
      if (!buf) throw std::bad_alloc();
      cap = elems;
    }
    return buf;
  }
  T* a_ = nullptr;
  T* b_ = nullptr;
  size_t capA_ = 0, capB_ = 0;
};

template <typename T>
GemmWorkspace<T>& gemmWorkspace() {
  thread_local GemmWorkspace<T> ws;
  return ws;
}

// C[m, n] = A[m, k] B[k, n], all row-major with leading dims k, n and n.
template <typename T>
void gemm(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k) {
  if (m == 0 || n == 0) return;
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<Mat> cm(c, m, n);
  if (k == 0) {
    cm.setZero();
    return;
  }
  // Eigen's own cut-over: tiny products are faster coefficient by coefficient than packed.
  if (m + n + k < 20) {
    cm.noalias() = Eigen::Map<const Mat>(a, m, k).lazyProduct(Eigen::Map<const Mat>(b, k, n));
    return;
  }
  GemmWorkspace<T>& ws = gemmWorkspace<T>();
  ws.prepare(m, n, k);
  cm.setZero();  // Eigen's GEMM accumulates: C += alpha * A * B
  Eigen::internal::general_matrix_matrix_product<Eigen::Index, T, Eigen::RowMajor, false, T,
                                                 Eigen::RowMajor, false, Eigen::RowMajor,
                                                 1>::run(m, n, k, a, k, b, n, c, 1, n, T{1}, ws);
}

}  // namespace

void eigenGemmF32(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                  int64_t m, int64_t n, int64_t k) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  GemmWorkspace<float>& ws = gemmWorkspace<float>();
  ws.prepare(m, n, k);
  for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
  Eigen::internal::general_matrix_matrix_product<Eigen::Index, float, Eigen::RowMajor, false, float,
                                                 Eigen::RowMajor, false, Eigen::RowMajor,
                                                 1>::run(m, n, k, a, lda, b, ldb, c, 1, ldc, 1.0f,
                                                         ws);
}

namespace {

// The fused epilogue's operands (fuse-matmul-epilogue; f32 only, inferMatMul checks): the
// whole output's bias and residual, the clamp from act_min / act_max.
struct Epilogue {
  const float* bias = nullptr;
  const float* res = nullptr;
  bool clamp = false;
  float lo = 0.0f, hi = 0.0f;
  bool any() const { return bias || res || clamp; }
};

// act_min / act_max have no default: an unset bound is no bound.
Epilogue epilogueOf(const Attrs& attrs, size_t inputs, const void* const* in) {
  namespace at = attr::MatMul;
  Epilogue e;
  e.bias = inputs >= 3 ? static_cast<const float*>(in[2]) : nullptr;
  e.res = inputs == 4 ? static_cast<const float*>(in[3]) : nullptr;
  auto bound = [&](int slot, float& v) {
    if (!attrs.has(slot)) return false;
    v = static_cast<float>(attrs.f(slot));
    return true;
  };
  e.lo = -std::numeric_limits<float>::infinity();
  e.hi = std::numeric_limits<float>::infinity();
  const bool lo = bound(at::act_min, e.lo), hi = bound(at::act_max, e.hi);
  e.clamp = lo || hi;
  return e;
}

// One GEMM of the spec: rows x cols of C = A[rows, k] B[k, cols] with the full matrices' leading
// dims (k, n, n), then the epilogue with C[0, 0] at output element `at` (row r0, column c0 of
// its batch). f32 takes the per-ISA GEMM; integers, Eigen's (never with an epilogue).
template <typename T>
void gemmBlock(const MatMulParams& p, const Epilogue& epi, const T* a, const T* b, T* c,
               int64_t rows, int64_t cols, int64_t at, int64_t c0) {
  if constexpr (std::is_same_v<T, float>) {
    GemmEpilogue e;
    e.bias = epi.bias ? epi.bias + c0 : nullptr;
    e.res = epi.res ? epi.res + at : nullptr;
    e.ldr = p.n;
    e.clamp = epi.clamp;
    e.lo = epi.lo;
    e.hi = epi.hi;
    const GemmEpilogue* ep = epi.any() ? &e : nullptr;
    // b is then at the strip holding column c0 (runMatMulT).
    if (p.bPacked) {
      if (!gemmF32StripsB(p.gemm, p.bPacked, a, p.k, b, c, p.n, rows, cols, p.k, ep))
        fail(ErrorKind::kShape, "matmul: B packed in strips of {} columns (48 or 64 run)",
             p.bPacked);
      return;
    }
    gemmF32(p.isa, p.gemm, a, p.k, b, p.n, c, p.n, rows, cols, p.k, ep);
  } else {
    // The integer path has no column split (the compile step splits only f32 by columns).
    gemm<T>(a, b, c, rows, cols, p.k);
  }
}

template <typename T>
[[gnu::noinline]] void runMatMulT(const MatMulParams& p, const Epilogue& epi, int tasks,
                                  const void* const* in, void* out) {
  const T* a = static_cast<const T*>(in[0]);
  const T* b = static_cast<const T*>(in[1]);
  T* c = static_cast<T*>(out);
  const int64_t mn = p.m * p.n;
  auto batches = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      gemmBlock<T>(p, epi, a + p.aOffsets[i], b + p.bOffsets[i], c + i * mn, p.m, p.n, i * mn, 0);
  };
  if (p.rowsPerTask == 0 && p.colsPerTask == 0) {
    detail::runRanges(tasks, p.batch, 1, batches);
    return;
  }
  if (p.colsPerTask > 0) {
    // Column blocks (small M): each item is one GEMM on colsPerTask columns of one batch's B
    // and C, so each task streams only its part of B.
    const int64_t blocks = (p.n + p.colsPerTask - 1) / p.colsPerTask;
    detail::runRanges(tasks, p.batch * blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t bi = item / blocks;
        const int64_t c0 = item % blocks * p.colsPerTask;
        const int64_t cols = std::min(p.colsPerTask, p.n - c0);
        // A packed B (one batch; the plan packs only where c0 is a whole strip): its strip.
        const T* bc = p.bPacked ? b + c0 / p.bPacked * p.k * p.bPacked : b + p.bOffsets[bi] + c0;
        gemmBlock<T>(p, epi, a + p.aOffsets[bi], bc, c + bi * mn + c0, p.m, cols, bi * mn + c0, c0);
      }
    });
    return;
  }
  // Row blocks: each item is one GEMM on rowsPerTask rows of one batch's A and C.
  const int64_t blocks = (p.m + p.rowsPerTask - 1) / p.rowsPerTask;
  detail::runRanges(tasks, p.batch * blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t bi = item / blocks;
      const int64_t r0 = item % blocks * p.rowsPerTask;
      const int64_t rows = std::min(p.rowsPerTask, p.m - r0);
      gemmBlock<T>(p, epi, a + p.aOffsets[bi] + r0 * p.k, b + p.bOffsets[bi],
                   c + bi * mn + r0 * p.n, rows, p.n, bi * mn + r0 * p.n, 0);
    }
  });
}

}  // namespace

void ref::refMatMul(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  using namespace ref::detail;
  const void* ptrs[4] = {};
  for (size_t i = 2; i < ins.size() && i < 4; ++i) ptrs[i] = ins[i].data;
  const Epilogue epi = out.dtype == DType::kF32 ? epilogueOf(attrs, ins.size(), ptrs) : Epilogue{};
  // torch.matmul's 1-D rule: promote to matrices (same data), multiply, drop the added dims.
  TensorView a = ins[0], b = ins[1], o = out;
  if (a.shape.rank() == 1) a.shape = Shape{1, a.shape[0]};
  if (b.shape.rank() == 1) b.shape = Shape{b.shape[0], 1};
  o.shape = Shape(a.shape.begin(), a.shape.end() - 2);
  {
    // The promoted output: broadcast batch dims, then [M, N].
    const int ra = a.shape.rank(), rb = b.shape.rank();
    const int r = std::max(ra, rb) - 2;
    Shape batch;
    for (int i = 0; i < r; ++i) {
      const int ka = i - (r - (ra - 2)), kb = i - (r - (rb - 2));
      const int64_t da = ka >= 0 ? a.shape[ka] : 1, db = kb >= 0 ? b.shape[kb] : 1;
      batch.push(da == 1 ? db : da);
    }
    batch.push(a.shape[ra - 2]);
    batch.push(b.shape[rb - 1]);
    o.shape = batch;
  }
  dispatchDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.as<const T>();
    const T* pb = b.as<const T>();
    T* po = o.as<T>();
    const int ra = a.shape.rank(), rb = b.shape.rank(), ro = o.shape.rank();
    const int64_t m = a.shape[ra - 2], k = a.shape[ra - 1], n = b.shape[rb - 1];
    forEachIndex(o.shape, [&](const int64_t* idx) {
      // Batch dims broadcast like Add's dims; the last two index the matrices.
      const int64_t aBase = broadcastOffset(a.shape, ra - 2, ro - 2, idx) * m * k;
      const int64_t bBase = broadcastOffset(b.shape, rb - 2, ro - 2, idx) * k * n;
      const int64_t row = idx[ro - 2], col = idx[ro - 1];
      T acc{0};
      for (int64_t kk = 0; kk < k; ++kk) acc += pa[aBase + row * k + kk] * pb[bBase + kk * n + col];
      const int64_t at = offsetOf(o.shape, idx);
      if constexpr (std::is_same_v<T, float>) {
        // The fused epilogue as the unfused add(., bias), add(., r), clip compute it.
        if (epi.bias) acc += epi.bias[col];
        if (epi.res) acc += epi.res[at];
        if (epi.clamp) {
          acc = epi.lo > acc ? epi.lo : acc;
          acc = epi.hi < acc ? epi.hi : acc;
        }
      }
      po[at] = acc;
    });
  });
}

bool runMatMul(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<MatMulParams>(&spec.params);
  if (!p) return false;
  const Epilogue epi = spec.key.dtype == DType::kF32
                           ? epilogueOf(spec.key.attrs, spec.key.inputs.size(), in)
                           : Epilogue{};
  dispatchDType(spec.key.dtype,
                [&](auto tag) { runMatMulT<decltype(tag)>(*p, epi, spec.tasks, in, out); });
  return true;
}

}  // namespace gearbox::kernels
