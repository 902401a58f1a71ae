// Where: reference and optimized kernels. out = cond != 0 ? x : y with broadcasting of all
// three. x and y are moved as bits (one instantiation per element size), so the kernel is exact
// for every dtype; the condition is read in its own dtype (an f32 NaN is non-zero: true).
#include "executor/kernels/common.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

template <typename C, typename E>
void whereRange(const WhereParams& p, const C* c, const E* x, const E* y, E* o, int64_t begin,
                int64_t end) {
  if (p.rank == 0) {
    for (int64_t i = begin; i < end; ++i) o[i] = c[i] != C(0) ? x[i] : y[i];
    return;
  }
  // Rows of the innermost dim; the outer dims advance like an odometer (binary.h's walk).
  const int last = p.rank - 1;
  const int64_t len = p.outDims[last];
  const int64_t sc = p.condStrides[last], sx = p.xStrides[last], sy = p.yStrides[last];
  int64_t idx[kMaxRank] = {};
  int64_t oc = 0, ox = 0, oy = 0, rem = begin;
  for (int d = last - 1; d >= 0; --d) {
    idx[d] = rem % p.outDims[d];
    rem /= p.outDims[d];
    oc += idx[d] * p.condStrides[d];
    ox += idx[d] * p.xStrides[d];
    oy += idx[d] * p.yStrides[d];
  }
  for (int64_t r = begin; r < end; ++r) {
    E* orow = o + r * len;
    for (int64_t k = 0; k < len; ++k)
      orow[k] = c[oc + k * sc] != C(0) ? x[ox + k * sx] : y[oy + k * sy];
    for (int d = last - 1; d >= 0; --d) {
      oc += p.condStrides[d];
      ox += p.xStrides[d];
      oy += p.yStrides[d];
      if (++idx[d] < p.outDims[d]) break;
      oc -= p.condStrides[d] * p.outDims[d];
      ox -= p.xStrides[d] * p.outDims[d];
      oy -= p.yStrides[d] * p.outDims[d];
      idx[d] = 0;
    }
  }
}

template <typename C, typename E>
[[gnu::noinline]] void runWhereT(const WhereParams& p, int tasks, const void* const* in,
                                 void* out) {
  const C* c = static_cast<const C*>(in[0]);
  const E* x = static_cast<const E*>(in[1]);
  const E* y = static_cast<const E*>(in[2]);
  E* o = static_cast<E*>(out);
  const int64_t units = p.rank == 0 ? p.numel : p.numel / p.outDims[p.rank - 1];
  detail::runRanges(tasks, units, 1, [&](int64_t begin, int64_t end) {
    whereRange<C, E>(p, c, x, y, o, begin, end);
  });
}

template <typename C>
void dispatchValue(const WhereParams& p, DType value, int tasks, const void* const* in, void* out) {
  if (dtypeSize(value) == 8) {
    runWhereT<C, uint64_t>(p, tasks, in, out);
  } else {
    runWhereT<C, uint32_t>(p, tasks, in, out);
  }
}

}  // namespace

void ref::refWhere(const Attrs&, std::span<const TensorView> ins, const TensorView& out) {
  const int r = out.shape.rank();
  dispatchDType(ins[0].dtype, [&](auto ctag) {
    using C = decltype(ctag);
    const C* c = ins[0].as<const C>();
    dispatchDType(out.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* x = ins[1].as<const T>();
      const T* y = ins[2].as<const T>();
      T* o = out.as<T>();
      detail::forEachIndex(out.shape, [&](const int64_t* idx) {
        const bool pick =
            c[detail::broadcastOffset(ins[0].shape, ins[0].shape.rank(), r, idx)] != C(0);
        o[detail::offsetOf(out.shape, idx)] =
            pick ? x[detail::broadcastOffset(ins[1].shape, ins[1].shape.rank(), r, idx)]
                 : y[detail::broadcastOffset(ins[2].shape, ins[2].shape.rank(), r, idx)];
      });
    });
  });
}

bool runWhere(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<WhereParams>(&spec.params);
  if (!p) return false;
  const DType value = spec.output.dtype;
  dispatchDType(spec.key.inputs[0].dtype,
                [&](auto tag) { dispatchValue<decltype(tag)>(*p, value, spec.tasks, in, out); });
  return true;
}

}  // namespace gearbox::kernels
