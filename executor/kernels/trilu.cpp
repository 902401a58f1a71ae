// Trilu: reference and optimized kernels, every dtype. Row i of each [rows, cols] matrix keeps
// columns j with j - i >= k (upper) or j - i <= k (lower): one contiguous run, so the optimized
// kernel copies it and zero-fills the rest of the row (moving bits: exact).
#include <algorithm>

#include "executor/kernels/common.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

// The kept columns [lo, hi) of row i, clamped to [0, cols].
std::pair<int64_t, int64_t> keptColumns(const TriluParams& p, int64_t i) {
  auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v, 0, p.cols); };
  // upper: j >= i + k; lower: j <= i + k. The sums cannot overflow: |k| is any int64, so
  // saturate it first to the matrix's extent.
  const int64_t k = std::clamp<int64_t>(p.k, -p.rows - 1, p.cols + 1);
  return p.upper ? std::pair{clamp(i + k), p.cols} : std::pair{int64_t{0}, clamp(i + k + 1)};
}

template <typename E>
[[gnu::noinline]] void runTriluT(const TriluParams& p, int tasks, const E* x, E* o) {
  detail::runRanges(tasks, p.batch * p.rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const auto [lo, hi] = keptColumns(p, r % p.rows);
      const E* xi = x + r * p.cols;
      E* oi = o + r * p.cols;
      std::fill(oi, oi + lo, E(0));
      if (hi > lo) std::memcpy(oi + lo, xi + lo, static_cast<size_t>(hi - lo) * sizeof(E));
      std::fill(oi + std::max(lo, hi), oi + p.cols, E(0));
    }
  });
}

}  // namespace

void ref::refTrilu(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  const int r = out.shape.rank();
  const int64_t k = attrs.i(attr::Trilu::k);
  const bool upper = attrs.i(attr::Trilu::upper) == 1;
  dispatchDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = ins[0].as<const T>();
    T* o = out.as<T>();
    detail::forEachIndex(out.shape, [&](const int64_t* idx) {
      // j - i compared with k in 128-bit arithmetic: k may be any int64.
      const __int128 diff = static_cast<__int128>(idx[r - 1]) - idx[r - 2];
      const bool keep = upper ? diff >= k : diff <= k;
      const int64_t off = detail::offsetOf(out.shape, idx);
      o[off] = keep ? x[off] : T(0);
    });
  });
}

bool runTrilu(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<TriluParams>(&spec.params);
  if (!p) return false;
  if (dtypeSize(spec.key.dtype) == 8) {
    runTriluT(*p, spec.tasks, static_cast<const uint64_t*>(in[0]), static_cast<uint64_t*>(out));
  } else {
    runTriluT(*p, spec.tasks, static_cast<const uint32_t*>(in[0]), static_cast<uint32_t*>(out));
  }
  return true;
}

}  // namespace gearbox::kernels
