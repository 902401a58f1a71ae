#pragma once
// Helpers shared by the per-op shape inference files.

#include "graph/error.h"
#include "graph/graph.h"

namespace gearbox::ops {

// "input 1 (%w)"
inline std::string inputLabel(const InferContext& ctx, size_t i) {
  return fmt::format("input {} ({})", i, ctx.inputName(i));
}

inline void expectArity(const InferContext& ctx, size_t n) {
  if (ctx.inputs.size() != n)
    fail(ErrorKind::kShape, "{}: expects {} inputs, got {}", ctx.where(), n, ctx.inputs.size());
}

inline void expectF32(const InferContext& ctx, size_t i) {
  if (ctx.inputs[i].dtype != DType::kF32)
    fail(ErrorKind::kShape, "{}: {} must be f32, got {}", ctx.where(), inputLabel(ctx, i),
         dtypeName(ctx.inputs[i].dtype));
}

// Wraps the `dim` attribute against `shape` (negative dims count from the end); the message is
// only formatted when the dim is out of range.
inline int wrapAttrDim(const InferContext& ctx, const Shape& shape, bool ofInput0) {
  const int64_t r = shape.rank();
  const int64_t dim = *ctx.attrs.dim;
  if (r == 0 || dim < -r || dim >= r)
    fail(ErrorKind::kShape,
         "{}: attribute dim{}: dim {} is out of range for rank {} (expected [{}, {}])", ctx.where(),
         ofInput0 ? " of " + inputLabel(ctx, 0) : std::string(), dim, r, -r, r - 1);
  return static_cast<int>(dim < 0 ? dim + r : dim);
}

// Two dims that must be equal (Cat's non-concat dims, MatMul's K). A static dim wins over a
// symbolic one; two different static sizes are an error naming both inputs and dims.
inline int64_t unifyEqual(const InferContext& ctx, size_t ia, int da, int64_t a, size_t ib, int db,
                          int64_t b, std::string_view why) {
  if (a == b) return a;
  if (a >= 0 && b >= 0)
    fail(ErrorKind::kShape, "{}: {} dim {} is {} but {} dim {} is {} ({})", ctx.where(),
         inputLabel(ctx, ia), da, a, inputLabel(ctx, ib), db, b, why);
  if (a >= 0) return a;
  if (b >= 0) return b;
  return a;  // two different unknowns: keep the first; checked again once concrete
}

// NumPy broadcasting of two shapes, right-aligned.
inline Shape broadcastShapes(const InferContext& ctx, size_t ia, const Shape& a, size_t ib,
                             const Shape& b) {
  const int r = std::max(a.rank(), b.rank());
  Shape out;
  for (int i = 0; i < r; ++i) {
    const int ka = i - (r - a.rank());
    const int kb = i - (r - b.rank());
    const int64_t da = ka >= 0 ? a[ka] : 1;
    const int64_t db = kb >= 0 ? b[kb] : 1;
    int64_t d;
    if (da == db || db == 1) {
      d = da;
    } else if (da == 1) {
      d = db;
    } else if (da >= 0 && db >= 0) {
      fail(ErrorKind::kShape, "{}: {} dim {} (size {}) and {} dim {} (size {}) cannot be broadcast",
           ctx.where(), inputLabel(ctx, ia), ka, da, inputLabel(ctx, ib), kb, db);
    } else if (da >= 0) {
      d = da;  // the unknown must be 1 or equal; checked again once concrete
    } else if (db >= 0) {
      d = db;
    } else {
      d = kAnyDim;
    }
    out.push(d);
  }
  return out;
}

// The result of a NumPy-broadcast binary op (add, sub, mul, div, pow): both inputs share one
// dtype, which `floatOnly` ops require to be f32.
inline TensorType binaryType(const InferContext& ctx, std::string_view op, bool floatOnly) {
  expectArity(ctx, 2);
  const TensorType& a = ctx.inputs[0];
  const TensorType& b = ctx.inputs[1];
  if (a.dtype != b.dtype)
    fail(ErrorKind::kShape, "{}: {} is {} but {} is {}; {} needs one dtype", ctx.where(),
         inputLabel(ctx, 0), dtypeName(a.dtype), inputLabel(ctx, 1), dtypeName(b.dtype), op);
  if (floatOnly && a.dtype != DType::kF32)
    fail(ErrorKind::kShape, "{}: {} is {}; {} takes f32", ctx.where(), inputLabel(ctx, 0),
         dtypeName(a.dtype), op);
  return TensorType{a.dtype, broadcastShapes(ctx, 0, a.shape, 1, b.shape)};
}

// The result of a one-input f32 elementwise op (sigmoid, sqrt, erf, tanh, gelu): x's type.
inline TensorType floatUnaryType(const InferContext& ctx, std::string_view op) {
  expectArity(ctx, 1);
  if (ctx.inputs[0].dtype != DType::kF32)
    fail(ErrorKind::kShape, "{}: {} is {}; {} takes f32", ctx.where(), inputLabel(ctx, 0),
         dtypeName(ctx.inputs[0].dtype), op);
  return ctx.inputs[0];
}

// NumPy broadcasting of every input's shape (where: condition, x, y). A conflict names the two
// inputs and their dims.
inline Shape broadcastAll(const InferContext& ctx) {
  int r = 0;
  for (const TensorType& t : ctx.inputs) r = std::max(r, t.shape.rank());
  Shape out;
  for (int i = 0; i < r; ++i) {
    int64_t d = 1;
    size_t from = 0;  // the input d came from (a size other than 1)
    int fromDim = 0;
    for (size_t k = 0; k < ctx.inputs.size(); ++k) {
      const Shape& s = ctx.inputs[k].shape;
      const int j = i - (r - s.rank());
      if (j < 0) continue;
      const int64_t e = s[j];
      if (e == 1 || e == d) continue;
      if (d == 1) {
        d = e;
        from = k;
        fromDim = j;
      } else if (d >= 0 && e >= 0) {
        fail(ErrorKind::kShape,
             "{}: {} dim {} (size {}) and {} dim {} (size {}) cannot be broadcast", ctx.where(),
             inputLabel(ctx, from), fromDim, d, inputLabel(ctx, k), j, e);
      } else if (d < 0 && e >= 0) {
        d = e;  // the unknown must be 1 or equal; checked again once concrete
        from = k;
        fromDim = j;
      } else if (d < 0 && e < 0) {
        d = kAnyDim;  // two different unknowns
      }
    }
    out.push(d);
  }
  return out;
}

}  // namespace gearbox::ops
