#pragma once
// The compiler's per-op hooks. Every op in graph/ops.def defines all of these in its own
// compiler/ops/<op>.cpp; the declarations are generated from ops.def, so an op without its file
// (or with a hook missing) fails to link instead of failing at run time. Dispatch over ops is
// generated from ops.def too (compiler/ops/dispatch.cpp).
//
// Helpers the op files share are declared below; they are not part of the public API.

#include <string>

#include "compiler/json_fields.h"
#include "compiler/kernel_cost.h"
#include "compiler/kernel_spec.h"

namespace gearbox::ops {

#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index)                             \
  /* Every static-shape decision for spec.key (output already inferred, shapes static): the */ \
  /* params, spec.work and spec.tasks. */                                                      \
  void compile##e(KernelSpec& spec);                                                           \
  /* Modeled flops and bytes for the key's static shapes (compiler/kernel_cost.h). */          \
  KernelCost kernelCost##e(const KernelKey& key);                                              \
  /* Modeled compile-cost terms on the accelerator-class device, with their sources. */        \
  CompileCostTerms compileCost##e();                                                           \
  /* Params <-> the "params" object of a kernel descriptor (docs/kernel-meta.md). */           \
  void paramsToJson##e(const KernelSpec& spec, Json& p);                                       \
  void paramsFromJson##e(const Json& p, KernelSpec& spec);                                     \
  /* Re-derives what the kernel relies on for memory safety from a loaded spec's key and */    \
  /* throws Error(kIo) when the params do not fit it. */                                       \
  void checkParams##e(const KernelSpec& spec);                                                 \
  /* The name of input i of n in op-info records, as aclnn spells it. */                       \
  std::string opInfoInputName##e(size_t i, size_t n);
#include "graph/ops.def"
#undef GEARBOX_OP

// ---- helpers shared by the op files (compiler/ops/common.cpp) ------------------------------

// Product of dims [begin, end) of a static shape.
int64_t product(const Shape& s, int begin, int end);
// The thread split: one task below the threshold, then one per threshold's worth of work, never
// more than the thread cap of the key being compiled (TaskCapScope), or without a cap than the
// oneTBB arena compiling it can run at once.
int decideTasks(double work, double threshold);
// For kernels whose math is heavy per byte (softmax's exp, erf, tanh, gelu, pow): the larger of
// the byte-based split of `spec.work` and the split of `flops` (kParallelFlopThreshold), so a
// tensor small in bytes but long in exp calls still uses every core.
void raiseTasksByFlops(KernelSpec& spec, double flops);
// While one lives, decideTasks on this thread caps its split at `threads` (0: no cap, the
// arena's concurrency). compileKernelSpec holds one with the key's threads around the op's
// compile hook, so every op -- and every op added later -- splits for the key's thread cap
// without passing it through each op file.
class TaskCapScope {
 public:
  explicit TaskCapScope(int threads);
  ~TaskCapScope();
  TaskCapScope(const TaskCapScope&) = delete;
  TaskCapScope& operator=(const TaskCapScope&) = delete;

 private:
  int previous_;
};
// Non-temporal stores for outputs of at least kStreamingStoreBytes with rows of at least
// kStreamingRowBytes (compiler/kernel_spec.h).
bool useStreamingStores(double outBytes, double rowBytes);
double elementBytes(const TensorType& t);  // numel * dtype size of a static type; 0 if dynamic
// Throws Error(kIo) "<Op> params do not fit the key[: what]".
[[noreturn]] void paramsMismatch(const KernelSpec& spec, std::string_view what = {});
// The params of `spec` as type P, or Error(kIo) naming the op when they are another kind.
template <typename P>
const P& paramsAs(const KernelSpec& spec) {
  const P* p = std::get_if<P>(&spec.params);
  if (!p) paramsMismatch(spec, "params kind does not match the op");
  return *p;
}

}  // namespace gearbox::ops

namespace gearbox::ops {

// ---- dispatch over ops.def (compiler/ops/dispatch.cpp) --------------------------------------

void compileStatic(KernelSpec& spec);
// The descriptor's "params" object: {"kind": "none"} for a generic spec, else the op's kernel
// name as "kind" and its fields.
Json paramsToJson(const KernelSpec& spec);
// Reads spec.params for spec.key.kind (already parsed); Error(kIo) on a kind that is neither
// "none" nor the key's op.
void paramsFromJson(const Json& p, KernelSpec& spec);
void checkParams(const KernelSpec& spec);
std::string opInfoInputName(OpKind kind, size_t i, size_t n);

}  // namespace gearbox::ops
