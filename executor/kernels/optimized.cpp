// Optimized kernels: run a KernelSpec whose every shape decision was taken at compile time
// (compiler/kernel_spec.cpp). The run path does no shape arithmetic beyond loop bounds and
// allocates nothing: MatMul's GEMM packing buffers live in a per-thread workspace that only
// grows, Add runs plain loops GCC vectorises, and the copies move whole contiguous rows.
// Threads come only from spec.tasks: one task runs inline, more become oneTBB tasks over
// contiguous ranges (threading is the compiled plan's policy, not the kernels').
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

// GCC 12 reports false -Wmaybe-uninitialized warnings inside its own AVX-512 intrinsics when
// they are inlined from Eigen's GEMM kernels (a known GCC issue); they would bury real warnings.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "executor/kernels.h"
#include "graph/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define GEARBOX_STREAMING_STORES 1
#else
#define GEARBOX_STREAMING_STORES 0
#endif

namespace gearbox::kernels {
namespace {

// ---- threading --------------------------------------------------------------------------------

// Runs fn(begin, end) over `tasks` contiguous slices of [0, n). Slice bounds (except the last)
// are rounded down to multiples of `align` so vector loops start on whole vectors. The static
// partitioner gives each task exactly one slice: the split was decided at compile time.
//
// Never inlined: oneTBB's cache-aligned task objects would otherwise make every caller realign
// its stack frame, a cost the single-task path must not pay.
template <typename Fn>
[[gnu::noinline]] void parallelRanges(int tasks, int64_t n, int64_t align, const Fn& fn) {
  auto bound = [&](int t) {
    if (t >= tasks) return n;
    const int64_t x = n / tasks * t + n % tasks * t / tasks;
    return align > 1 ? x / align * align : x;
  };
  tbb::parallel_for(
      tbb::blocked_range<int>(0, tasks, 1),
      [&](const tbb::blocked_range<int>& r) {
        for (int t = r.begin(); t < r.end(); ++t) {
          const int64_t b = bound(t), e = bound(t + 1);
          if (b < e) fn(b, e);
        }
      },
      tbb::static_partitioner());
}

// Runs inline for one task (no oneTBB involvement at all), else splits.
template <typename Fn>
void runRanges(int tasks, int64_t n, int64_t align, const Fn& fn) {
  if (tasks <= 1 || n <= 1) {
    if (n > 0) fn(0, n);
  } else {
    parallelRanges(tasks, n, align, fn);
  }
}

// ---- streaming stores --------------------------------------------------------------------------

// Copies `bytes` writing the 64-byte-aligned body of the destination with non-temporal stores,
// which skip the read-for-ownership of each destination line (the compile step chooses this for
// large outputs only: see kStreamingStoreBytes). The unaligned head and tail use memcpy.
void streamCopy(void* dst, const void* src, size_t bytes) {
#if GEARBOX_STREAMING_STORES
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  const size_t head = std::min(bytes, (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64);
  std::memcpy(d, s, head);
  size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
#if defined(__AVX512F__)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), _mm512_loadu_si512(s + i));
#elif defined(__AVX__)
    for (size_t v = 0; v < 64; v += 32)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + v),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + v)));
#else
    for (size_t v = 0; v < 64; v += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + v),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + v)));
#endif
  }
  std::memcpy(d + i, s + i, bytes - i);
#else
  std::memcpy(dst, src, bytes);
#endif
}

// Streaming stores are weakly ordered: each task fences its own before it reports completion,
// so whoever reads the output next (another task, the caller) sees every byte.
void streamFence() {
#if GEARBOX_STREAMING_STORES
  _mm_sfence();
#endif
}

void copyRow(void* dst, const void* src, size_t bytes, bool stream) {
  if (stream) {
    streamCopy(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

// ---- Add ------------------------------------------------------------------------------------

// The loops below are kept in the simplest form GCC auto-vectorises at -O3. The pointers are
// deliberately not __restrict: an executor may run Add in place (out == a), which restrict
// would make undefined; GCC versions the loop with a cheap overlap check instead.
// Writes out[0, n) through compute(dst, offset, len), which fills dst[0, len) with the elements
// at out[offset, offset + len). Without streaming, compute writes the output directly; with
// streaming, it fills an L1-resident block that is then streamed out, so the vectorised loops stay
// plain C++ and only the final stores become non-temporal. The streamed variant lives in its
// own (never inlined) function: its 4 KiB block would otherwise enlarge the stack frame, and the
// stack probes, of every small Add.
template <typename T, typename Compute>
[[gnu::noinline]] void emitStreamed(T* out, int64_t n, const Compute& compute) {
  constexpr int64_t kBlock = 4096 / sizeof(T);
  alignas(64) T block[kBlock];
  for (int64_t off = 0; off < n; off += kBlock) {
    const int64_t len = std::min(kBlock, n - off);
    compute(block, off, len);
    streamCopy(out + off, block, static_cast<size_t>(len) * sizeof(T));
  }
}

template <typename T, typename Compute>
inline void emitBlocks(T* out, int64_t n, bool stream, const Compute& compute) {
  if (stream) {
    emitStreamed(out, n, compute);
  } else {
    compute(out, 0, n);
  }
}

template <typename T>
void addRange(const AddParams& p, const T* a, const T* b, T* o, int64_t begin, int64_t end) {
  using Path = AddParams::Path;
  const bool stream = p.streamingStores;
  switch (p.path) {
    case Path::kSameShape:
      emitBlocks(o + begin, end - begin, stream, [&](T* d, int64_t off, int64_t len) {
        const T* ai = a + begin + off;
        const T* bi = b + begin + off;
        for (int64_t i = 0; i < len; ++i) d[i] = ai[i] + bi[i];
      });
      break;
    case Path::kScalarB: {
      const T s = b[0];
      emitBlocks(o + begin, end - begin, stream, [&](T* d, int64_t off, int64_t len) {
        const T* ai = a + begin + off;
        for (int64_t i = 0; i < len; ++i) d[i] = ai[i] + s;
      });
      break;
    }
    case Path::kScalarA: {
      const T s = a[0];
      emitBlocks(o + begin, end - begin, stream, [&](T* d, int64_t off, int64_t len) {
        const T* bi = b + begin + off;
        for (int64_t i = 0; i < len; ++i) d[i] = s + bi[i];
      });
      break;
    }
    case Path::kRowB: {
      const int64_t cols = p.cols;
      for (int64_t r = begin; r < end; ++r) {
        const T* ar = a + r * cols;
        emitBlocks(o + r * cols, cols, stream, [&](T* d, int64_t off, int64_t len) {
          for (int64_t c = 0; c < len; ++c) d[c] = ar[off + c] + b[off + c];
        });
      }
      break;
    }
    case Path::kRowA: {
      const int64_t cols = p.cols;
      for (int64_t r = begin; r < end; ++r) {
        const T* br = b + r * cols;
        emitBlocks(o + r * cols, cols, stream, [&](T* d, int64_t off, int64_t len) {
          for (int64_t c = 0; c < len; ++c) d[c] = a[off + c] + br[off + c];
        });
      }
      break;
    }
    case Path::kGeneral: {
      // Rows of the innermost (coalesced) dim; the outer dims advance like an odometer, so the
      // operands' offsets are updated by adding strides instead of re-deriving them.
      const int last = p.rank - 1;
      const int64_t len = p.outDims[last];
      const int64_t sa = p.aStrides[last], sb = p.bStrides[last];
      int64_t idx[kMaxRank] = {};
      int64_t aOff = 0, bOff = 0;
      int64_t rem = begin;
      for (int d = last - 1; d >= 0; --d) {
        idx[d] = rem % p.outDims[d];
        rem /= p.outDims[d];
        aOff += idx[d] * p.aStrides[d];
        bOff += idx[d] * p.bStrides[d];
      }
      for (int64_t r = begin; r < end; ++r) {
        const T* ar = a + aOff;
        const T* br = b + bOff;
        T* orow = o + r * len;
        if (sa == 1 && sb == 1) {
          for (int64_t c = 0; c < len; ++c) orow[c] = ar[c] + br[c];
        } else if (sa == 1 && sb == 0) {
          const T s = br[0];
          for (int64_t c = 0; c < len; ++c) orow[c] = ar[c] + s;
        } else if (sa == 0 && sb == 1) {
          const T s = ar[0];
          for (int64_t c = 0; c < len; ++c) orow[c] = s + br[c];
        } else {
          for (int64_t c = 0; c < len; ++c) orow[c] = ar[c * sa] + br[c * sb];
        }
        for (int d = last - 1; d >= 0; --d) {
          aOff += p.aStrides[d];
          bOff += p.bStrides[d];
          if (++idx[d] < p.outDims[d]) break;
          aOff -= p.aStrides[d] * p.outDims[d];
          bOff -= p.bStrides[d] * p.outDims[d];
          idx[d] = 0;
        }
      }
      break;
    }
  }
  if (stream) streamFence();
}

// The per-op entry points are not inlined into run(), so run() stays a small switch whose frame
// costs nothing; each op pays only for its own frame.
template <typename T>
[[gnu::noinline]] void runAdd(const AddParams& p, int tasks, const void* const* in, void* out) {
  const T* a = static_cast<const T*>(in[0]);
  const T* b = static_cast<const T*>(in[1]);
  T* o = static_cast<T*>(out);
  using Path = AddParams::Path;
  int64_t units = p.numel;  // elements for the flat paths
  if (p.path == Path::kRowA || p.path == Path::kRowB) units = p.rows;
  if (p.path == Path::kGeneral) units = p.numel / p.outDims[p.rank - 1];
  const int64_t align = units == p.numel ? 64 / static_cast<int64_t>(sizeof(T)) : 1;
  runRanges(tasks, units, align,
            [&](int64_t begin, int64_t end) { addRange<T>(p, a, b, o, begin, end); });
}

// ---- MatMul ---------------------------------------------------------------------------------

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

template <typename T>
[[gnu::noinline]] void runMatMul(const MatMulParams& p, int tasks, const void* const* in,
                                 void* out) {
  const T* a = static_cast<const T*>(in[0]);
  const T* b = static_cast<const T*>(in[1]);
  T* c = static_cast<T*>(out);
  const int64_t mn = p.m * p.n;
  auto batches = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      gemm<T>(a + p.aOffsets[i], b + p.bOffsets[i], c + i * mn, p.m, p.n, p.k);
  };
  if (p.rowsPerTask == 0) {
    runRanges(tasks, p.batch, 1, batches);
    return;
  }
  // Row blocks: each item is one GEMM on rowsPerTask rows of one batch's A and C.
  const int64_t blocks = (p.m + p.rowsPerTask - 1) / p.rowsPerTask;
  runRanges(tasks, p.batch * blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t bi = item / blocks;
      const int64_t r0 = item % blocks * p.rowsPerTask;
      const int64_t rows = std::min(p.rowsPerTask, p.m - r0);
      gemm<T>(a + p.aOffsets[bi] + r0 * p.k, b + p.bOffsets[bi], c + bi * mn + r0 * p.n, rows, p.n,
              p.k);
    }
  });
}

// ---- index checks ---------------------------------------------------------------------------

[[noreturn, gnu::cold, gnu::noinline]] void failIndex(int64_t value, int64_t pos, int64_t dim,
                                                      int64_t size) {
  fail(ErrorKind::kIndex, "index value {} at position {} is out of range for dim {} of size {}",
       value, pos, dim, size);
}

// Checks every index value before any data is read, so a bad index can never cause a wild read.
// The first pass is branch-free (a negative value becomes a huge unsigned one) and vectorises;
// only on failure does a second pass find the first offending position for the message.
template <typename I>
void checkIndices(const I* idx, int64_t count, int64_t size, int64_t dim) {
  bool bad = false;
  for (int64_t j = 0; j < count; ++j)
    bad |= static_cast<uint64_t>(static_cast<int64_t>(idx[j])) >= static_cast<uint64_t>(size);
  if (!bad) return;
  for (int64_t j = 0; j < count; ++j)
    if (idx[j] < 0 || idx[j] >= size) failIndex(idx[j], j, dim, size);
}

// ---- IndexSelect and CatGather --------------------------------------------------------------

// Output rows r = o * count + j in [begin, end): out[r, :] = src(o, idx[j])[:], where `source`
// returns the first element of the selected input row. E is an unsigned integer of the element
// size: copies move bits, so one instantiation serves f32 and i32.
template <typename E, typename I, typename Source>
void gatherRows(const I* idx, int64_t count, int64_t inner, bool stream, E* out, int64_t begin,
                int64_t end, const Source& source) {
  int64_t r = begin;
  while (r < end) {
    const int64_t o = r / count;
    const int64_t j0 = r - o * count;
    const int64_t j1 = std::min(count, j0 + (end - r));
    E* dst = out + r * inner;
    if (inner == 1) {
      for (int64_t j = j0; j < j1; ++j) dst[j - j0] = *source(o, idx[j]);
    } else {
      const size_t rowBytes = static_cast<size_t>(inner) * sizeof(E);
      for (int64_t j = j0; j < j1; ++j)
        copyRow(dst + (j - j0) * inner, source(o, idx[j]), rowBytes, stream);
    }
    r += j1 - j0;
  }
  if (stream) streamFence();
}

template <typename E, typename I>
void runGather(const GatherParams& p, int64_t dim, int tasks, const void* const* in, void* out) {
  const E* src = static_cast<const E*>(in[0]);
  const I* idx = static_cast<const I*>(in[1]);
  checkIndices(idx, p.count, p.dimSize, dim);
  const int64_t rowStride = p.dimSize * p.inner;
  auto source = [&](int64_t o, int64_t i) { return src + o * rowStride + i * p.inner; };
  runRanges(tasks, p.outer * p.count, 1, [&](int64_t begin, int64_t end) {
    gatherRows<E, I>(idx, p.count, p.inner, p.streamingStores, static_cast<E*>(out), begin, end,
                     source);
  });
}

// Copies one row of `bytes` >= 64 with 64-byte blocks the compiler turns into single vector
// loads and stores. A channel-shuffle row is a few hundred bytes, so a libc memcpy call per row
// costs a noticeable share of its time; the inline blocks do not. Rows of 784 bytes (14 x 14
// floats) start at every 16-byte offset, so after one unaligned head block the stores are
// aligned to the destination's cache lines (a store split across two lines costs about two),
// and the tail is one overlapping block instead of a variable-length copy.
inline void copyRowBlocks(std::byte* dst, const std::byte* src, size_t bytes) {
  std::memcpy(dst, src, 64);
  size_t i = 64 - (reinterpret_cast<uintptr_t>(dst) & 63);
  for (; i + 64 <= bytes; i += 64) std::memcpy(dst + i, src + i, 64);
  if (i < bytes) std::memcpy(dst + bytes - 64, src + bytes - 64, 64);
}

template <typename E, typename I>
void runCatGather(const CatGatherParams& p, int64_t dim, int tasks, const void* const* in,
                  void* out) {
  const size_t n = p.dimSizes.size();
  const I* idx = static_cast<const I*>(in[n]);
  int64_t total = 0;
  for (int64_t s : p.dimSizes) total += s;
  checkIndices(idx, p.count, total, dim);
  // A position along the virtual cat dim maps to (input, row) by walking the sizes; inputs are
  // few, so the walk is cheaper than a table that would have to be allocated.
  auto source = [&](int64_t o, int64_t g) {
    size_t i = 0;
    while (g >= p.dimSizes[i]) g -= p.dimSizes[i++];
    return static_cast<const E*>(in[i]) + (o * p.dimSizes[i] + g) * p.inner;
  };
  const size_t rowBytes = static_cast<size_t>(p.inner) * sizeof(E);
  // Short rows, and outputs large enough for non-temporal stores (decided per shape at
  // compile time), take the generic row gather; other rows use the inline block copy.
  if (rowBytes < 64 || p.streamingStores) {
    runRanges(tasks, p.outer * p.count, 1, [&](int64_t begin, int64_t end) {
      gatherRows<E, I>(idx, p.count, p.inner, p.streamingStores, static_cast<E*>(out), begin, end,
                       source);
    });
    return;
  }
  // Output rows r = o * count + j in order: the writes stream through the output once.
  runRanges(tasks, p.outer * p.count, 1, [&](int64_t begin, int64_t end) {
    int64_t o = begin / p.count;
    int64_t j = begin - o * p.count;
    std::byte* dst = static_cast<std::byte*>(out) + static_cast<size_t>(begin) * rowBytes;
    for (int64_t r = begin; r < end; ++r, dst += rowBytes) {
      copyRowBlocks(dst, reinterpret_cast<const std::byte*>(source(o, idx[j])), rowBytes);
      if (++j == p.count) {
        j = 0;
        ++o;
      }
    }
  });
}

// Instantiates fn<E, I> for the element size of `data` and the index dtype.
template <template <typename, typename> class Fn, typename... Args>
void dispatchGather(DType data, DType index, Args&&... args) {
  const bool wide = dtypeSize(data) == 8;
  if (index == DType::kI32) {
    wide ? Fn<uint64_t, int32_t>::run(args...) : Fn<uint32_t, int32_t>::run(args...);
  } else {
    wide ? Fn<uint64_t, int64_t>::run(args...) : Fn<uint32_t, int64_t>::run(args...);
  }
}

template <typename E, typename I>
struct GatherFn {
  [[gnu::noinline]] static void run(const GatherParams& p, int64_t dim, int tasks,
                                    const void* const* in, void* out) {
    runGather<E, I>(p, dim, tasks, in, out);
  }
};

template <typename E, typename I>
struct CatGatherFn {
  [[gnu::noinline]] static void run(const CatGatherParams& p, int64_t dim, int tasks,
                                    const void* const* in, void* out) {
    runCatGather<E, I>(p, dim, tasks, in, out);
  }
};

// ---- Cat ------------------------------------------------------------------------------------

// Copies output elements [begin, end) of a cat: each output row is the inputs' rows side by
// side, so a range is a sequence of contiguous segments, each one memcpy. Working on element
// ranges (not rows) lets a cat with a single huge row (cat along dim 0) split across tasks too.
void catRange(const CatParams& p, const void* const* in, std::byte* out, size_t esize,
              int64_t begin, int64_t end) {
  const int64_t rowElems = p.outRowElems;
  int64_t o = begin / rowElems;
  int64_t off = begin - o * rowElems;
  int64_t s = begin;
  while (s < end) {
    int64_t segStart = 0;
    for (size_t i = 0; i < p.rowElems.size() && s < end; ++i) {
      const int64_t len = p.rowElems[i];
      if (off < segStart + len) {
        const int64_t from = off - segStart;
        const int64_t n = std::min(len - from, end - s);
        copyRow(out + s * esize, static_cast<const std::byte*>(in[i]) + (o * len + from) * esize,
                static_cast<size_t>(n) * esize, p.streamingStores);
        s += n;
        off += n;
      }
      segStart += len;
    }
    ++o;
    off = 0;
  }
  if (p.streamingStores) streamFence();
}

[[gnu::noinline]] void runCat(const CatParams& p, DType dtype, int tasks, const void* const* in,
                              void* out) {
  const size_t esize = dtypeSize(dtype);
  const int64_t total = p.outer * p.outRowElems;
  if (total == 0) return;
  // 64-byte aligned slice bounds keep each task's stores on its own cache lines.
  runRanges(tasks, total, 64 / static_cast<int64_t>(esize), [&](int64_t begin, int64_t end) {
    catRange(p, in, static_cast<std::byte*>(out), esize, begin, end);
  });
}

[[noreturn, gnu::cold, gnu::noinline]] void failNotRunnable(const KernelSpec& spec) {
  if (spec.generic)
    fail(ErrorKind::kShape, "kernel {} is shape-generic: run it with concrete shapes (runViews)",
         spec.name);
  fail(ErrorKind::kShape, "kernel {} has no compiled parameters for {}", spec.name,
       opTextName(spec.key.kind));
}

void checkView(const KernelSpec& spec, const char* what, size_t i, const TensorType& expected,
               const TensorView& v) {
  if (v.dtype != expected.dtype || v.shape != expected.shape)
    fail(ErrorKind::kShape, "kernel {}: {} {} is {} but the kernel expects {}", spec.name, what, i,
         TensorType{v.dtype, v.shape}.toString(), expected.toString());
}

}  // namespace

void run(const KernelSpec& spec, const void* const* inputs, void* output) {
  const DType dt = spec.key.dtype;
  const int64_t dim = spec.key.attrs.dim.value_or(0);
  switch (spec.key.kind) {
    case OpKind::kAdd:
      if (const auto* p = std::get_if<AddParams>(&spec.params)) {
        return dispatchDType(
            dt, [&](auto tag) { runAdd<decltype(tag)>(*p, spec.tasks, inputs, output); });
      }
      break;
    case OpKind::kMatMul:
      if (const auto* p = std::get_if<MatMulParams>(&spec.params)) {
        return dispatchDType(
            dt, [&](auto tag) { runMatMul<decltype(tag)>(*p, spec.tasks, inputs, output); });
      }
      break;
    case OpKind::kIndexSelect:
      if (const auto* p = std::get_if<GatherParams>(&spec.params))
        return dispatchGather<GatherFn>(dt, p->indexType, *p, dim, spec.tasks, inputs, output);
      break;
    case OpKind::kCat:
      if (const auto* p = std::get_if<CatParams>(&spec.params))
        return runCat(*p, dt, spec.tasks, inputs, output);
      break;
    case OpKind::kCatGather:
      if (const auto* p = std::get_if<CatGatherParams>(&spec.params))
        return dispatchGather<CatGatherFn>(dt, p->indexType, *p, dim, spec.tasks, inputs, output);
      break;
    case OpKind::kConst: break;
  }
  failNotRunnable(spec);
}

void runViews(const KernelSpec& spec, std::span<const TensorView> inputs, const TensorView& out) {
  // Pointers for up to 16 inputs live on the stack; only a very wide Cat needs the heap.
  constexpr size_t kInline = 16;
  const void* inlinePtrs[kInline];
  std::vector<const void*> heapPtrs;
  const void** ptrs = inlinePtrs;
  if (inputs.size() > kInline) {
    heapPtrs.resize(inputs.size());
    ptrs = heapPtrs.data();
  }
  for (size_t i = 0; i < inputs.size(); ++i) ptrs[i] = inputs[i].data;

  if (inputs.size() != spec.key.inputs.size())
    fail(ErrorKind::kShape, "kernel {}: expects {} inputs, got {}", spec.name,
         spec.key.inputs.size(), inputs.size());
  if (!spec.generic) {
    for (size_t i = 0; i < inputs.size(); ++i)
      checkView(spec, "input", i, spec.key.inputs[i], inputs[i]);
    checkView(spec, "output", 0, spec.output, out);
    run(spec, ptrs, out.data);
    return;
  }
  // Dynamic mode: derive this call's parameters (strides, paths, split) from the runtime shapes.
  std::vector<TensorType> types;
  types.reserve(inputs.size());
  for (const TensorView& v : inputs) types.push_back(TensorType{v.dtype, v.shape});
  const KernelSpec concrete = specializeKernelSpec(spec, types);
  checkView(concrete, "output", 0, concrete.output, out);
  run(concrete, ptrs, out.data);
}

}  // namespace gearbox::kernels
