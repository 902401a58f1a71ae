#pragma once
// Graphs built in C++ for tests (the same models ship as text under examples/).

#include "compiler/specialize.h"
#include "graph/graph.h"

namespace gearbox::testing_models {

// Seed 001: y = x1 + x2 with x1, x2: f32[-1, 2].
inline Graph seed001() {
  GraphBuilder b("seed001");
  auto x1 = b.input("x1", DType::kF32, {kAnyDim, 2});
  auto x2 = b.input("x2", DType::kF32, {kAnyDim, 2});
  b.output(b.add(x1, x2, "y"));
  return b.build();
}

// Every op once: s = x + x; m = s @ w; c = cat(m, s, 1); o = index_select(c, perm, 1).
inline Graph fourOps() {
  GraphBuilder b("four_ops");
  const int64_t B = symbolDim("B");
  auto x = b.input("x", DType::kF32, {B, 4});
  auto w = b.input("w", DType::kF32, {4, 3});
  auto s = b.add(x, x, "s");
  auto m = b.matmul(s, w, "m");
  auto c = b.cat({m, s}, 1, "c");
  Tensor perm(DType::kI64, {7});
  for (int i = 0; i < 7; ++i) perm.as<int64_t>()[i] = 6 - i;
  auto p = b.constant(perm, "p");
  b.output(b.indexSelect(c, p, 1, "o"));
  return b.build();
}

inline InputSignature seed001Sig(int64_t n) {
  return {Shape{n, 2}, Shape{n, 2}};
}

}  // namespace gearbox::testing_models
