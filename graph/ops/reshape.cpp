// Reshape(x, shape): the same elements in row-major order with a new shape (torch.reshape on a
// contiguous tensor). The target's dims are
//   >= 0   a size;
//   -1     at most one: inferred so the element counts match;
//   named  (e.g. B) the input's dim declared B, else a graph input's dim declared B (its size in
//          this call), else the input's dim at the same position, whatever its size (ONNX
//          Reshape's 0): `reshape(%x, shape=[B, 8, -1])` keeps x's leading dim
//          (graph/ops/reshape.h has the rule).
// Element counts are checked as soon as the sizes are static (at definition for static inputs,
// else when the graph is specialised to concrete shapes).
#include "graph/ops/reshape.h"

namespace gearbox {
namespace {

// The -1 of a target when sizes are symbolic: named symbols of the target cancel the same
// symbols of the input; if what is left is a static quotient, or exactly one symbol over equal
// static products, that is the dim ([N, 8, 2, 49] -> [N, -1, 49] gives 16). Else unknown (-1),
// resolved when the graph is specialised.
int64_t symbolicQuotient(const Shape& in, const Shape& out, int inferred) {
  int64_t symbols[kMaxRank];
  int left = 0;
  int64_t inStatic = 1, outStatic = 1;
  for (int64_t d : in) {
    if (d == kAnyDim) return kAnyDim;  // every -1 is its own unknown: nothing cancels it
    if (isSymbolDim(d)) {
      symbols[left++] = d;
    } else {
      inStatic *= d;
    }
  }
  for (int i = 0; i < out.rank(); ++i) {
    if (i == inferred) continue;
    const int64_t d = out[i];
    if (d == kAnyDim) return kAnyDim;
    if (!isSymbolDim(d)) {
      outStatic *= d;
      continue;
    }
    int k = 0;
    while (k < left && symbols[k] != d) ++k;
    if (k == left) return kAnyDim;  // a symbol the input does not have
    symbols[k] = symbols[--left];
  }
  if (left == 0 && outStatic > 0 && inStatic % outStatic == 0) return inStatic / outStatic;
  if (left == 1 && inStatic == outStatic) return symbols[0];
  return kAnyDim;
}

}  // namespace

TensorType inferReshape(const InferContext& ctx) {
  ops::expectArity(ctx, 1);
  const TensorType& in = ctx.inputs[0];
  if (!ctx.attrs.shape) fail(ErrorKind::kShape, "{}: missing attribute shape", ctx.where());
  const Shape& target = *ctx.attrs.shape;
  Shape out;
  int inferred = -1;
  bool known = true;  // every output dim other than the -1 is static
  int64_t product = 1;
  for (int i = 0; i < target.rank(); ++i) {
    int64_t d = target[i];
    if (d == kAnyDim) {
      // A shape-generic kernel key (no graph, input sizes unknown) may hold several unknown
      // entries: its output is only known at run time, from the graph.
      if (inferred >= 0 && !ctx.graph && !in.shape.isStatic()) {
        out.push(kAnyDim);
        known = false;
        continue;
      }
      if (inferred >= 0)
        fail(ErrorKind::kShape, "{}: attribute shape {} has more than one -1 (dims {} and {})",
             ctx.where(), target.toString(), inferred, i);
      inferred = i;
      out.push(kAnyDim);
      continue;
    }
    if (isSymbolDim(d)) {
      d = ops::resolveNamedDim(ctx, in.shape, i, d, /*positional=*/true);
      if (d == ops::kNamedDimMissing)
        fail(ErrorKind::kShape,
             "{}: attribute shape {}: dim {} is named ({}), which takes {} dim {}, but it has rank "
             "{} and does not declare that name",
             ctx.where(), target.toString(), i, dimToString(target[i]), ops::inputLabel(ctx, 0), i,
             in.shape.rank());
    }
    if (d >= 0) {
      if (__builtin_mul_overflow(product, d, &product))
        fail(ErrorKind::kShape, "{}: attribute shape {} overflows int64 elements", ctx.where(),
             target.toString());
    } else {
      known = false;
    }
    out.push(d);
  }
  if (!in.shape.isStatic() || !known) {
    if (inferred >= 0) out[inferred] = symbolicQuotient(in.shape, out, inferred);
    return TensorType{in.dtype, out};
  }
  const int64_t total = in.shape.numel();
  if (inferred >= 0) {
    if (product == 0 || total % product != 0)
      fail(ErrorKind::kShape,
           "{}: {} has {} elements, which shape {} cannot hold: the dims other than -1 hold {} "
           "elements{}",
           ctx.where(), ops::inputLabel(ctx, 0), total, target.toString(), product,
           product == 0 ? " (the -1 is ambiguous)"
                        : fmt::format(" and {} is not a multiple", total));
    out[inferred] = total / product;
  } else if (product != total) {
    fail(ErrorKind::kShape, "{}: {} has {} elements but shape {} holds {}", ctx.where(),
         ops::inputLabel(ctx, 0), total, target.toString(), product);
  }
  return TensorType{in.dtype, out};
}

}  // namespace gearbox
