// Transpose: reference and optimized kernels. The optimized kernel walks the output in order,
// one row of its innermost (merged) dim at a time, reading the input at the strides the compile
// step derived (compiler/ops/transpose.cpp): a row whose input stride is 1 is one block copy,
// others are a strided gather. A swap of the two innermost dims of 4-byte elements runs, on
// AVX2 and AVX-512 CPUs, as 8 x 8 blocks transposed in registers (isa_avx2 below).
#include <atomic>
#include <cstdio>

#include "compiler/cpu_isa.h"
#include "executor/kernels/common.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"
#include "executor/simd/isa_target.h"
#include "executor/simd/simd.h"
#include "executor/transpose_stream.h"

namespace gearbox::kernels {

#if GEARBOX_HAVE_ISA_REGIONS
GEARBOX_ISA_BEGIN_AVX2
namespace isa_avx2 {
namespace {

// dst[c * ds + r] = src[r * ss + c] for an 8 x 8 block of 32-bit elements: eight row loads,
// F32x8::transpose8's three shuffle stages in registers, eight row stores.
[[gnu::always_inline]] inline void transpose8x8(const uint32_t* src, int64_t ss, uint32_t* dst,
                                                int64_t ds) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(src + i * ss));
  F32x8::transpose8(r);
  for (int i = 0; i < 8; ++i) _mm256_storeu_ps(reinterpret_cast<float*>(dst + i * ds), r[i]);
}

}  // namespace

// out[a, b] = in[b * sb + a] for a in [a0, a1), b in [0, cols): whole 8 x 8 blocks in
// registers, the ragged right and bottom edges element by element. The caller's block of rows
// (kTile of them, 64 x cols x 4 bytes) stays in L1 or L2 while its columns are written.
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

// Copies n 4-byte elements from the L1/L2-resident staging buffer `buf` to `dst` with
// non-temporal stores from dst's first 32-byte boundary on (ordinary stores for the unaligned
// head and the tail). The caller fences once its unit is done.
void streamOut(const uint32_t* buf, uint32_t* dst, int64_t n) {
  const auto addr = reinterpret_cast<uintptr_t>(dst);
  int64_t head = static_cast<int64_t>(((32 - addr % 32) % 32) / 4);
  if (addr % 4 != 0 || head > n) head = n;  // misaligned elements: no streaming
  std::memcpy(dst, buf, static_cast<size_t>(head) * 4);
  int64_t i = head;
  for (; i + 8 <= n; i += 8)
    _mm256_stream_ps(reinterpret_cast<float*>(dst + i),
                     _mm256_loadu_ps(reinterpret_cast<const float*>(buf + i)));
  std::memcpy(dst + i, buf + i, static_cast<size_t>(n - i) * 4);
}

void streamFence() {
  _mm_sfence();
}

}  // namespace isa_avx2
GEARBOX_ISA_END
#endif  // GEARBOX_HAVE_ISA_REGIONS

namespace {

// The last two output dims [A, B] read the input at strides [1, sb] (a swap of the two innermost
// dims, NCHW -> NHWC and the like): a row-by-row walk would read one element per cache line.
// A work unit is kTile output rows of one outer index, walked eight columns (eight input rows)
// at a time, so each input line is fetched once and used whole.
//
// kTile = 64, measured on Zen 3 with a standalone copy of these loops (2-vCPU EPYC VM,
// [B, 64, 1024] -> [B, 1024, 64], ratio to memcpy of the same bytes, four runs): 16 rows 0.41-0.50
// at 1 MiB and 0.28-0.36 at 16 MiB; 64 rows 0.62-0.78 and 0.58-0.79; 128 rows 0.62-0.69 and
// 0.63-0.90; 512 rows 0.45-0.58 and 0.71-0.81. A unit then reads 256 contiguous bytes per input
// row, which the hardware prefetchers follow, where 16 rows gave them one 64-byte line per 4 KiB
// page. Sixteen columns at a time were slower (0.36-0.39 at 1 MiB): input rows 4 KiB apart share
// one L1 set, whose 8 ways hold only eight of them. Non-temporal stores straight from the 8 x 8
// blocks (half lines) lost 8x at 1 MiB and were erratic at 16 MiB; staged, see below.
//
// An output too big to stay in the last-level cache (transposeStreamThresholdBytes) is written
// around it: a unit of up to kStageBytes is transposed into a buffer in L1/L2, then copied out with
// non-temporal stores, so the output lines are not first read from memory (the read for
// ownership a plain store pays; memcpy avoids it the same way at these sizes). Measured as
// above: 16 MiB 0.76-0.95 of memcpy streamed (256-row units) against 0.56-0.69 stored plainly;
// 8 MiB 0.86-1.13 against 0.38-0.49; but 4 MiB 0.27-0.42 against 0.51-0.68 and 1 MiB 0.30-0.53
// against 0.58-0.74, where memcpy's copy stays in the cache.
constexpr int64_t kStageBytes = 64 * 1024;

// The L3 this CPU shares, from sysfs ("32768K"); 0 when unknown. Not sysconf: glibc's
// _SC_LEVEL3_CACHE_SIZE reports the whole package's L3 on AMD (256 MiB on this VM's EPYC,
// whose cores share a 32 MiB slice).
int64_t sharedL3Bytes() {
  std::FILE* f = std::fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
  if (!f) return 0;
  char text[32] = {};
  const size_t n = std::fread(text, 1, sizeof text - 1, f);
  std::fclose(f);
  int64_t value = 0;
  size_t i = 0;
  for (; i < n && text[i] >= '0' && text[i] <= '9' && value < (int64_t{1} << 40); ++i)
    value = value * 10 + (text[i] - '0');
  if (i == 0 || value >= (int64_t{1} << 40)) return 0;
  if (i < n && text[i] == 'K') return value << 10;
  if (i < n && text[i] == 'M') return value << 20;
  return value;
}

// Outputs of at least a quarter of the shared L3 stream: on the 32 MiB L3 above the crossover
// lay between 4 MiB (plain stores win) and 8 MiB (streaming wins), where input plus output
// outgrow half of it. 8 MiB when the size is unknown.
int64_t defaultStreamThresholdBytes() {
  static const int64_t bytes = [] {
    const int64_t l3 = sharedL3Bytes();
    return l3 > 0 ? l3 / 4 : int64_t{8} << 20;
  }();
  return bytes;
}

// -1: the default. Set only by ScopedTransposeStreamThreshold (tests, benchmarks).
std::atomic<int64_t> streamThresholdOverride{-1};

template <typename E>
void runTiled(const TransposeParams& p, int tasks, const E* src, E* dst) {
  constexpr int64_t kScalarCols = 8;
  const int last = p.rank - 1;
  const int64_t rows = p.outDims[last - 1], cols = p.outDims[last], sb = p.inStrides[last];
  const int64_t outer = p.numel / (rows * cols);
  // AVX-512 CPUs run the AVX2 blocks too: the transpose is bound by memory, not by shuffles.
  [[maybe_unused]] const bool avx2 = activeIsa() >= Isa::kAvx2;
  // Streamed units hold up to 256 rows (fewer when the columns are many) in the stage buffer.
  const int64_t unitBytes = cols * static_cast<int64_t>(sizeof(E));
  const bool stream = sizeof(E) == 4 && avx2 && unitBytes * 64 <= kStageBytes &&
                      p.numel * static_cast<int64_t>(sizeof(E)) >= transposeStreamThresholdBytes();
  const int64_t kTile = stream ? std::min<int64_t>(256, kStageBytes / unitBytes / 8 * 8) : 64;
  const int64_t tileRows = (rows + kTile - 1) / kTile;
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
        if (stream) {
          alignas(64) thread_local uint32_t stage[kStageBytes / 4];
          // The stage holds rows a0..a1 of this outer index as if they started at row 0.
          isa_avx2::transposeRows(src + off + a0, sb, stage, cols, 0, a1 - a0);
          isa_avx2::streamOut(stage, out + a0 * cols, (a1 - a0) * cols);
          continue;
        }
        if (avx2) {
          isa_avx2::transposeRows(src + off, sb, out, cols, a0, a1);
          continue;
        }
      }
#endif
      for (int64_t b0 = 0; b0 < cols; b0 += kScalarCols) {
        const int64_t b1 = std::min(cols, b0 + kScalarCols);
        for (int64_t a = a0; a < a1; ++a)
          for (int64_t b = b0; b < b1; ++b) out[a * cols + b] = src[off + a + b * sb];
      }
    }
#if GEARBOX_HAVE_ISA_REGIONS
    // Non-temporal stores are weakly ordered: fenced before the range counts as done.
    if (stream) isa_avx2::streamFence();
#endif
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

int64_t transposeStreamThresholdBytes() {
  const int64_t forced = streamThresholdOverride.load(std::memory_order_relaxed);
  return forced >= 0 ? forced : defaultStreamThresholdBytes();
}

ScopedTransposeStreamThreshold::ScopedTransposeStreamThreshold(int64_t bytes)
    : previous_(streamThresholdOverride.exchange(bytes)) {}

ScopedTransposeStreamThreshold::~ScopedTransposeStreamThreshold() {
  streamThresholdOverride.store(previous_);
}

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
