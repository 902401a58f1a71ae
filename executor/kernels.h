#pragma once
// Kernels. Two families:
//  - reference (namespace ref): plain loops over any shape, obviously correct; the oracle
//    every test compares against;
//  - optimized: run a KernelSpec compiled for a static shape (Eigen GEMM, vectorised Add with
//    fast paths, row-block copies), splitting into oneTBB tasks only when spec.tasks > 1.
// Out-of-range gather indices throw Error(kIndex) naming the position and value; callers add
// the op and input.

#include <span>

#include "compiler/kernel_spec.h"
#include "graph/tensor.h"

namespace gearbox::kernels {

namespace ref {
void add(const TensorView& a, const TensorView& b, const TensorView& out);
void matmul(const TensorView& a, const TensorView& b, const TensorView& out);
void indexSelect(const TensorView& in, const TensorView& index, int64_t dim, const TensorView& out);
void cat(std::span<const TensorView> ins, int64_t dim, const TensorView& out);
void catGather(std::span<const TensorView> ins, const TensorView& index, int64_t dim,
               const TensorView& out);
// Runs one node kind on views (dim already wrapped). Const is not a kernel.
void runOp(OpKind kind, const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out);
}  // namespace ref

// Runs a static spec. `inputs` are the data pointers in key order; shapes come from the spec.
void run(const KernelSpec& spec, const void* const* inputs, void* output);
// Runs any spec (static or generic) on views with runtime shapes: a generic spec derives its
// params from the views first (dynamic mode's per-call tiling).
void runViews(const KernelSpec& spec, std::span<const TensorView> inputs, const TensorView& out);

}  // namespace gearbox::kernels
