#pragma once
// NumPy-broadcast binary elementwise kernels (Add, Mul): one implementation of every path of
// BinaryParams, instantiated per operator (executor/kernels/add.cpp, mul.cpp). Internal to the
// executor library.
#include "compiler/kernel_spec.h"
#include "executor/kernels/common.h"

namespace gearbox::kernels::detail {

// The loops below are kept in the simplest form GCC auto-vectorises at -O3. The pointers are
// deliberately not __restrict: an executor may run an op in place (out == a), which restrict
// would make undefined; GCC versions the loop with a cheap overlap check instead.
template <typename T, typename Op>
void binaryRange(const BinaryParams& p, const T* a, const T* b, T* o, int64_t begin, int64_t end) {
  const Op op{};
  using Path = AddParams::Path;
  const bool stream = p.streamingStores;
  switch (p.path) {
    case Path::kSameShape:
      emitBlocks(o + begin, end - begin, stream, [&](T* d, int64_t off, int64_t len) {
        const T* ai = a + begin + off;
        const T* bi = b + begin + off;
        for (int64_t i = 0; i < len; ++i) d[i] = op(ai[i], bi[i]);
      });
      break;
    case Path::kScalarB: {
      const T s = b[0];
      emitBlocks(o + begin, end - begin, stream, [&](T* d, int64_t off, int64_t len) {
        const T* ai = a + begin + off;
        for (int64_t i = 0; i < len; ++i) d[i] = op(ai[i], s);
      });
      break;
    }
    case Path::kScalarA: {
      const T s = a[0];
      emitBlocks(o + begin, end - begin, stream, [&](T* d, int64_t off, int64_t len) {
        const T* bi = b + begin + off;
        for (int64_t i = 0; i < len; ++i) d[i] = op(s, bi[i]);
      });
      break;
    }
    case Path::kRowB: {
      const int64_t cols = p.cols;
      for (int64_t r = begin; r < end; ++r) {
        const T* ar = a + r * cols;
        emitBlocks(o + r * cols, cols, stream, [&](T* d, int64_t off, int64_t len) {
          for (int64_t c = 0; c < len; ++c) d[c] = op(ar[off + c], b[off + c]);
        });
      }
      break;
    }
    case Path::kRowA: {
      const int64_t cols = p.cols;
      for (int64_t r = begin; r < end; ++r) {
        const T* br = b + r * cols;
        emitBlocks(o + r * cols, cols, stream, [&](T* d, int64_t off, int64_t len) {
          for (int64_t c = 0; c < len; ++c) d[c] = op(a[off + c], br[off + c]);
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
          for (int64_t c = 0; c < len; ++c) orow[c] = op(ar[c], br[c]);
        } else if (sa == 1 && sb == 0) {
          const T s = br[0];
          for (int64_t c = 0; c < len; ++c) orow[c] = op(ar[c], s);
        } else if (sa == 0 && sb == 1) {
          const T s = ar[0];
          for (int64_t c = 0; c < len; ++c) orow[c] = op(s, br[c]);
        } else {
          for (int64_t c = 0; c < len; ++c) orow[c] = op(ar[c * sa], br[c * sb]);
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

// Not inlined into the dispatch, so run() stays a small switch whose frame costs nothing; each
// op pays only for its own frame.
template <typename T, typename Op>
[[gnu::noinline]] void runBinary(const BinaryParams& p, int tasks, const void* const* in,
                                 void* out) {
  const T* a = static_cast<const T*>(in[0]);
  const T* b = static_cast<const T*>(in[1]);
  T* o = static_cast<T*>(out);
  using Path = AddParams::Path;
  int64_t units = p.numel;  // elements for the flat paths
  if (p.path == Path::kRowA || p.path == Path::kRowB) units = p.rows;
  if (p.path == Path::kGeneral) units = p.numel / p.outDims[p.rank - 1];
  const int64_t align = units == p.numel ? 64 / static_cast<int64_t>(sizeof(T)) : 1;
  runRanges(tasks, units, align,
            [&](int64_t begin, int64_t end) { binaryRange<T, Op>(p, a, b, o, begin, end); });
}

}  // namespace gearbox::kernels::detail
