#pragma once
// Helpers shared by the optimized kernels (executor/kernels/<op>.cpp): the thread split over
// ranges, streaming (non-temporal) stores, blocked elementwise output and index checks. Internal
// to the executor library.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "compiler/parallel_for.h"
#include "executor/fork_join.h"
#include "graph/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define GEARBOX_STREAMING_STORES 1
#else
#define GEARBOX_STREAMING_STORES 0
#endif

namespace gearbox::kernels::detail {

// ---- threading --------------------------------------------------------------------------------

// Runs fn(begin, end) over `tasks` contiguous slices of [0, n). Slice bounds (except the last)
// are rounded down to multiples of `align` so vector loops start on whole vectors. Each task runs
// exactly one slice, on a thread of its own: the split was decided at compile time. The slices go
// to the spinning fork-join pool (executor/fork_join.h), or to oneTBB with its static partitioner
// when the pool cannot take them (another thread's split holds it, more tasks than cores).
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
  auto slice = [&](int t) {
    const int64_t b = bound(t), e = bound(t + 1);
    if (b < e) fn(b, e);
  };
  using Slice = decltype(slice);
  if (gearbox::detail::forkJoin(
          tasks, [](void* ctx, int t) { (*static_cast<const Slice*>(ctx))(t); },
          const_cast<void*>(static_cast<const void*>(&slice))))
    return;
#ifdef GEARBOX_STD_THREADS
  // The ThreadSanitizer build: std::threads, whose hand-offs TSan sees (compiler/parallel_for.h).
  gearbox::parallelFor(static_cast<size_t>(tasks), [&](size_t t) { slice(static_cast<int>(t)); });
#else
  tbb::parallel_for(
      tbb::blocked_range<int>(0, tasks, 1),
      [&](const tbb::blocked_range<int>& r) {
        for (int t = r.begin(); t < r.end(); ++t) slice(t);
      },
      tbb::static_partitioner());
#endif
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

// Runs fn(i) for every i in [0, n) on up to `tasks` threads. Task t owns the t-th contiguous
// range of the items, as parallelRanges splits them, and runs it in order; a task that finishes
// its own takes the next unclaimed items of the others' ranges, one at a time. Items of uneven
// cost (a convolution's last position block), or a worker that starts late, so leave no thread
// idle while items remain. For independent items whose result does not depend on which thread
// runs them.
//
// Why owned ranges, not one shared counter: a thread that runs the same items on every call
// finds their weights in its own caches. With a shared counter (guided, as OpenMP's
// schedule(guided)), which thread took which of ResNet-18's last-stage channel tiles changed
// from call to call. In one process on this project's 2-vCPU Zen 5 VM that 512 x 512 x 3 x 3
// conv on 7 x 7 planes (a 1.18 MB weight per tile) ran 913 us on two threads against 1,065 on
// one, and 623 with each thread given a fixed range (kernels_bench, the next process); in
// processes where the host placed the vCPUs better both ran 540-660 us, within the noise of
// each other. A shared counter's cache line also moved between the cores at every claim
// (MobileNetV2's 7 x 7 depthwise layer of 60 items: 18 us on two threads against 11 on one); a
// range's cursor stays on its owner's core until a thief takes from it.
template <typename Fn>
void runItems(int tasks, int64_t n, const Fn& fn) {
  if (tasks <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  const int used = static_cast<int>(std::min<int64_t>(tasks, n));
  struct alignas(64) Cursor {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  constexpr int kInline = 8;
  Cursor inlineCursors[kInline];
  std::vector<Cursor> heap(used > kInline ? static_cast<size_t>(used) : 0);
  Cursor* cursors = used > kInline ? heap.data() : inlineCursors;
  for (int t = 0; t < used; ++t) {
    // The bounds parallelRanges gives task t.
    cursors[t].next.store(n / used * t + n % used * t / used, std::memory_order_relaxed);
    cursors[t].end = n / used * (t + 1) + n % used * (t + 1) / used;
  }
  // A cursor only grows: fetch_add hands out each index once, and the ones past `end` (a thief
  // and the owner racing for the last item) are dropped.
  auto drain = [&](Cursor& c) {
    for (int64_t i = c.next.fetch_add(1, std::memory_order_relaxed); i < c.end;
         i = c.next.fetch_add(1, std::memory_order_relaxed))
      fn(i);
  };
  parallelRanges(used, used, 1, [&](int64_t t0, int64_t) {
    const int t = static_cast<int>(t0);
    for (int k = 0; k < used; ++k) drain(cursors[(t + k) % used]);
  });
}

// ---- streaming stores --------------------------------------------------------------------------

// Copies `bytes` writing the 64-byte-aligned body of the destination with non-temporal stores,
// which skip the read-for-ownership of each destination line (the compile step chooses this for
// large outputs only: see kStreamingStoreBytes). The unaligned head and tail use memcpy.
inline void streamCopy(void* dst, const void* src, size_t bytes) {
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
inline void streamFence() {
#if GEARBOX_STREAMING_STORES
  _mm_sfence();
#endif
}

inline void copyRow(void* dst, const void* src, size_t bytes, bool stream) {
  if (stream) {
    streamCopy(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

// ---- elementwise output blocks -----------------------------------------------------------------

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

// ---- index checks ---------------------------------------------------------------------------

[[noreturn, gnu::cold, gnu::noinline]] inline void failIndex(int64_t value, int64_t pos,
                                                             int64_t dim, int64_t size) {
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

// checkIndices for indices in [-size, size) (index_select with wrap=1, ONNX's Gather), then
// the indices with size added to the negative ones: `idx` itself when none is negative (no
// copy), else `scratch` filled.
template <typename I>
const I* wrapIndices(const I* idx, int64_t count, int64_t size, int64_t dim,
                     std::vector<I>& scratch) {
  bool bad = false, negative = false;
  for (int64_t j = 0; j < count; ++j) {
    bad |= static_cast<uint64_t>(static_cast<int64_t>(idx[j]) + size) >=
           static_cast<uint64_t>(2 * size);
    negative |= idx[j] < 0;
  }
  if (bad)
    for (int64_t j = 0; j < count; ++j)
      if (idx[j] < -size || idx[j] >= size) failIndex(idx[j], j, dim, size);
  if (!negative) return idx;
  scratch.assign(idx, idx + count);
  for (I& v : scratch)
    if (v < 0) v = static_cast<I>(v + size);
  return scratch.data();
}

}  // namespace gearbox::kernels::detail
