#pragma once
// How a named dim of a reshape or expand target gets its size (graph/ops/reshape.cpp,
// expand.cpp). Internal to the graph library.
#include "graph/ops/common.h"

namespace gearbox::ops {

// Returned by resolveNamedDim when the name resolves to nothing.
constexpr int64_t kNamedDimMissing = INT64_MIN;

// The value of target dim i, the expression `d`, once its symbol is `size`. A value past int64
// or below 0 (B - 5 at B = 2) is no size: an error naming the attribute and the dim, never the
// unknown dim -1 (a specialised graph holding -1 fails later, far from the cause) and never a
// negative number (which would read as a symbol).
inline int64_t evalTargetDim(const InferContext& ctx, int i, int64_t d, int64_t size) {
  const auto v = evalDimExact(d, size);
  if (v && *v >= 0) return *v;
  const std::string target = ctx.attrs.shape ? ctx.attrs.shape->toString() : "?";
  const std::string symbol = symbolName(dimExpr(d)->base);
  if (!v)
    fail(ErrorKind::kShape, "{}: attribute shape {}: dim {} ({}) overflows int64 at {} = {}",
         ctx.where(), target, i, dimToString(d), symbol, size);
  fail(ErrorKind::kShape, "{}: attribute shape {}: dim {} ({}) is {} at {} = {}, below 0",
       ctx.where(), target, i, dimToString(d), *v, symbol, size);
}

// A named dim or dim expression `d` at position i of the target of a node whose input 0 has
// the (call's) shape `in`. In order:
//   1. the input dim the graph declares with the same symbol or expression (ShuffleNet's
//      view(b, g, c / g, h, w) names h and w wherever they are); then an expression over a
//      symbol the input declares, evaluated from that dim's size;
//   2. a graph input's dim that declares the symbol (or the expression's base symbol): its size
//      in this call (ctx.inputShapes), or the symbol itself while the graph is symbolic. This is
//      how an exported model's view(seq, batch, d) after a flatten to [seq * batch, d] keeps
//      both sizes: the product of two symbols has no dim of its own, but each symbol does;
//   3. with `positional` (reshape: ONNX's 0), the input's dim at the same position.
// kNamedDimMissing when none applies.
inline int64_t resolveNamedDim(const InferContext& ctx, const Shape& in, int i, int64_t d,
                               bool positional) {
  const auto expr = dimExpr(d);
  if (ctx.graph && ctx.node && !ctx.node->inputs.empty()) {
    const Shape& decl = ctx.graph->values[ctx.node->inputs[0]].type.shape;
    if (decl.rank() == in.rank()) {
      if (i < decl.rank() && decl[i] == d) return in[i];
      for (int k = 0; k < decl.rank(); ++k)
        if (decl[k] == d) return in[k];
      if (expr) {
        for (int k = 0; k < decl.rank(); ++k) {
          if (decl[k] != expr->base) continue;
          if (in[k] >= 0) return evalTargetDim(ctx, i, d, in[k]);
          if (in[k] == decl[k]) return d;  // still symbolic: the expression itself
        }
      }
    }
  }
  if (ctx.graph && expr) {
    const Graph& g = *ctx.graph;
    for (size_t k = 0; k < g.inputs.size(); ++k) {
      const Shape& decl = g.values[g.inputs[k]].type.shape;
      for (int j = 0; j < decl.rank(); ++j) {
        if (decl[j] != d && decl[j] != expr->base) continue;
        const bool known = k < ctx.inputShapes.size() && j < ctx.inputShapes[k].rank() &&
                           ctx.inputShapes[k][j] >= 0;
        if (!known) return d;  // the graph as declared, or a still symbolic signature
        const int64_t size = ctx.inputShapes[k][j];
        return decl[j] == d ? size : evalTargetDim(ctx, i, d, size);
      }
    }
  }
  if (positional && i < in.rank()) return in[i];
  return kNamedDimMissing;
}

}  // namespace gearbox::ops
