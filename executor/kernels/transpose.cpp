// Transpose: reference and optimized kernels. The optimized kernel walks the output in order,
// one row of its innermost (merged) dim at a time, reading the input at the strides the compile
// step derived (compiler/ops/transpose.cpp): a row whose input stride is 1 is one block copy,
// others are a strided gather.
#include "executor/kernels/common.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

// The last two output dims [A, B] read the input at strides [1, sb] (a swap of the two innermost
// dims, NCHW -> NHWC and the like): a row-by-row walk would read one element per cache line.
// Square tiles keep the kTile input lines of a tile in L1 while their elements are written out,
// so each input line is fetched once. Work units are (outer index, tile row) pairs.
template <typename E>
void runTiled(const TransposeParams& p, int tasks, const E* src, E* dst) {
  constexpr int64_t kTile = 16;
  const int last = p.rank - 1;
  const int64_t rows = p.outDims[last - 1], cols = p.outDims[last], sb = p.inStrides[last];
  const int64_t outer = p.numel / (rows * cols);
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
      for (int64_t b0 = 0; b0 < cols; b0 += kTile) {
        const int64_t b1 = std::min(cols, b0 + kTile);
        for (int64_t a = a0; a < a1; ++a)
          for (int64_t b = b0; b < b1; ++b) out[a * cols + b] = src[off + a + b * sb];
      }
    }
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
