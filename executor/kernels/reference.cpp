// Reference kernels: the oracle every optimized kernel and every execution mode is checked
// against. They favour being obviously correct over being fast: one odometer walk over the
// output's multi-index, and every element's source offset computed from first principles
// (NumPy broadcasting, right-aligned dims). They work on any rank up to kMaxRank and every dtype.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "executor/kernels.h"
#include "graph/error.h"

namespace gearbox::kernels::ref {
namespace {

// Calls fn(idx) for every multi-index of a static shape in row-major order.
template <typename Fn>
void forEachIndex(const Shape& s, Fn&& fn) {
  if (s.numel() == 0) return;
  int64_t idx[kMaxRank] = {};
  const int r = s.rank();
  for (;;) {
    fn(static_cast<const int64_t*>(idx));
    int d = r - 1;
    while (d >= 0 && ++idx[d] == s[d]) {
      idx[d] = 0;
      --d;
    }
    if (d < 0) return;
  }
}

// Row-major offset of the first `rank` components of idx in shape s.
int64_t offsetOf(const Shape& s, const int64_t* idx) {
  int64_t off = 0;
  for (int i = 0; i < s.rank(); ++i) off = off * s[i] + idx[i];
  return off;
}

// Offset in an operand of the element broadcast to output index outIdx: the operand's dims
// are right-aligned with the first `outRank` output dims, and a size-1 dim always reads 0.
int64_t broadcastOffset(const Shape& operand, int operandRank, int outRank, const int64_t* outIdx) {
  int64_t off = 0;
  for (int k = 0; k < operandRank; ++k) {
    const int64_t i = outIdx[k + (outRank - operandRank)];
    off = off * operand[k] + (operand[k] == 1 ? 0 : i);
  }
  return off;
}

int64_t readIndex(const TensorView& index, int64_t pos) {
  return index.dtype == DType::kI32 ? index.as<const int32_t>()[pos]
                                    : index.as<const int64_t>()[pos];
}

// Every index value must lie in [0, size); negative values are out of range, as in PyTorch's
// index_select. All values are checked, even when the output is empty.
void checkIndex(const TensorView& index, int64_t dim, int64_t size) {
  for (int64_t pos = 0; pos < index.numel(); ++pos) {
    const int64_t v = readIndex(index, pos);
    if (v < 0 || v >= size)
      fail(ErrorKind::kIndex, "index value {} at position {} is out of range for dim {} of size {}",
           v, pos, dim, size);
  }
}

// Verifies the views against the op's shape inference, so a reference kernel never reads or
// writes outside the views it was given.
void checkTypes(OpKind kind, const Attrs& attrs, std::span<const TensorView> ins,
                const TensorView& out) {
  std::vector<TensorType> types;
  for (const TensorView& v : ins) {
    if (!v.shape.isStatic())
      fail(ErrorKind::kShape, "reference {}: input shape {} is not static", opTextName(kind),
           v.shape.toString());
    types.push_back(TensorType{v.dtype, v.shape});
  }
  InferContext ctx{kind, types, attrs, nullptr, -1, opTextName(kind)};
  const TensorType expected = inferNode(ctx);
  if (expected.dtype != out.dtype || expected.shape != out.shape)
    fail(ErrorKind::kShape, "reference {}: output is {} but the inputs give {}", opTextName(kind),
         TensorType{out.dtype, out.shape}.toString(), expected.toString());
}

void addImpl(const TensorView& a, const TensorView& b, const TensorView& out) {
  dispatchDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.as<const T>();
    const T* pb = b.as<const T>();
    T* po = out.as<T>();
    const int r = out.shape.rank();
    forEachIndex(out.shape, [&](const int64_t* idx) {
      po[offsetOf(out.shape, idx)] = pa[broadcastOffset(a.shape, a.shape.rank(), r, idx)] +
                                     pb[broadcastOffset(b.shape, b.shape.rank(), r, idx)];
    });
  });
}

void matmulImpl(const TensorView& a, const TensorView& b, const TensorView& out) {
  dispatchDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.as<const T>();
    const T* pb = b.as<const T>();
    T* po = out.as<T>();
    const int ra = a.shape.rank(), rb = b.shape.rank(), ro = out.shape.rank();
    const int64_t m = a.shape[ra - 2], k = a.shape[ra - 1], n = b.shape[rb - 1];
    forEachIndex(out.shape, [&](const int64_t* idx) {
      // Batch dims broadcast like Add's dims; the last two index the matrices.
      const int64_t aBase = broadcastOffset(a.shape, ra - 2, ro - 2, idx) * m * k;
      const int64_t bBase = broadcastOffset(b.shape, rb - 2, ro - 2, idx) * k * n;
      const int64_t row = idx[ro - 2], col = idx[ro - 1];
      T acc{0};
      for (int64_t kk = 0; kk < k; ++kk) acc += pa[aBase + row * k + kk] * pb[bBase + kk * n + col];
      po[offsetOf(out.shape, idx)] = acc;
    });
  });
}

// Copies out[idx] = source(idx) element by element; `locate` maps an output index to (input
// number, offset in that input).
template <typename Locate>
void copyElements(std::span<const TensorView> ins, const TensorView& out, Locate&& locate) {
  dispatchDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* po = out.as<T>();
    forEachIndex(out.shape, [&](const int64_t* idx) {
      const auto [input, offset] = locate(idx);
      po[offsetOf(out.shape, idx)] = ins[input].template as<const T>()[offset];
    });
  });
}

void indexSelectImpl(const TensorView& in, const TensorView& index, int d, const TensorView& out) {
  checkIndex(index, d, in.shape[d]);
  const TensorView ins[] = {in};
  copyElements(ins, out, [&](const int64_t* idx) {
    int64_t src[kMaxRank];
    for (int i = 0; i < out.shape.rank(); ++i) src[i] = idx[i];
    src[d] = readIndex(index, idx[d]);
    return std::pair<size_t, int64_t>{0, offsetOf(in.shape, src)};
  });
}

// Which input of a cat holds position `pos` along the cat dim, and the position inside it.
std::pair<size_t, int64_t> catSource(std::span<const TensorView> ins, int d, int64_t pos) {
  size_t i = 0;
  while (pos >= ins[i].shape[d]) pos -= ins[i++].shape[d];
  return {i, pos};
}

void catImpl(std::span<const TensorView> ins, int d, const TensorView& out) {
  copyElements(ins, out, [&](const int64_t* idx) {
    int64_t src[kMaxRank];
    for (int i = 0; i < out.shape.rank(); ++i) src[i] = idx[i];
    const auto [input, pos] = catSource(ins, d, idx[d]);
    src[d] = pos;
    return std::pair<size_t, int64_t>{input, offsetOf(ins[input].shape, src)};
  });
}

void catGatherImpl(std::span<const TensorView> ins, const TensorView& index, int d,
                   const TensorView& out) {
  int64_t total = 0;
  for (const TensorView& v : ins) total += v.shape[d];
  checkIndex(index, d, total);
  copyElements(ins, out, [&](const int64_t* idx) {
    int64_t src[kMaxRank];
    for (int i = 0; i < out.shape.rank(); ++i) src[i] = idx[i];
    const auto [input, pos] = catSource(ins, d, readIndex(index, idx[d]));
    src[d] = pos;
    return std::pair<size_t, int64_t>{input, offsetOf(ins[input].shape, src)};
  });
}

int wrappedDim(const Attrs& attrs, const TensorView& in) {
  return in.shape.wrapDim(attrs.dim.value_or(0), "reference kernel: attribute dim");
}

}  // namespace

void add(const TensorView& a, const TensorView& b, const TensorView& out) {
  const TensorView ins[] = {a, b};
  runOp(OpKind::kAdd, Attrs{}, ins, out);
}

void matmul(const TensorView& a, const TensorView& b, const TensorView& out) {
  const TensorView ins[] = {a, b};
  runOp(OpKind::kMatMul, Attrs{}, ins, out);
}

void indexSelect(const TensorView& in, const TensorView& index, int64_t dim,
                 const TensorView& out) {
  const TensorView ins[] = {in, index};
  runOp(OpKind::kIndexSelect, Attrs{dim}, ins, out);
}

void cat(std::span<const TensorView> ins, int64_t dim, const TensorView& out) {
  runOp(OpKind::kCat, Attrs{dim}, ins, out);
}

void catGather(std::span<const TensorView> ins, const TensorView& index, int64_t dim,
               const TensorView& out) {
  std::vector<TensorView> all(ins.begin(), ins.end());
  all.push_back(index);
  runOp(OpKind::kCatGather, Attrs{dim}, all, out);
}

void runOp(OpKind kind, const Attrs& attrs, std::span<const TensorView> ins,
           const TensorView& out) {
  if (kind == OpKind::kConst) fail(ErrorKind::kShape, "reference: const is data, not a kernel");
  checkTypes(kind, attrs, ins, out);
  switch (kind) {
    case OpKind::kConst: break;
    case OpKind::kAdd: return addImpl(ins[0], ins[1], out);
    case OpKind::kMatMul: return matmulImpl(ins[0], ins[1], out);
    case OpKind::kIndexSelect:
      return indexSelectImpl(ins[0], ins[1], wrappedDim(attrs, ins[0]), out);
    case OpKind::kCat: return catImpl(ins, wrappedDim(attrs, ins[0]), out);
    case OpKind::kCatGather:
      return catGatherImpl(ins.first(ins.size() - 1), ins.back(), wrappedDim(attrs, ins[0]), out);
  }
}

}  // namespace gearbox::kernels::ref
