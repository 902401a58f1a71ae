#pragma once
// The executor's per-op kernels. Every op in graph/ops.def defines both of these in its own
// executor/kernels/<op>.cpp; the declarations are generated from ops.def, so an op without its
// kernel file fails to link. Dispatch (executor/kernels/dispatch.cpp) is generated too.

#include <span>

#include "compiler/kernel_spec.h"
#include "graph/tensor.h"

namespace gearbox::kernels {

#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index)                              \
  namespace ref {                                                                               \
  /* Reference kernel: plain loops over static views already checked against shape inference */ \
  /* (the dispatcher does it); attribute dims are not wrapped yet. */                           \
  void ref##e(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out);      \
  }                                                                                             \
  /* Optimized kernel for a static spec; false when spec.params is not this op's kind (the */   \
  /* dispatcher then reports the spec as not runnable). */                                      \
  bool run##e(const KernelSpec& spec, const void* const* in, void* out);
#include "graph/ops.def"
#undef GEARBOX_OP

}  // namespace gearbox::kernels
