// Kernel dispatch, generated from graph/ops.def: the optimized entry points (run, runViews)
// and the reference one (ref::runOp). Each op's kernels live in executor/kernels/<op>.cpp.
#include <vector>

#include "executor/kernels.h"
#include "executor/kernels/op_kernels.h"
#include "graph/error.h"

namespace gearbox::kernels {
namespace {

[[noreturn, gnu::cold, gnu::noinline]] void failNotRunnable(const KernelSpec& spec) {
  if (spec.generic)
    fail(ErrorKind::kShape, "kernel {} is shape-generic: run it with concrete shapes (runViews)",
         spec.name);
  fail(ErrorKind::kShape, "kernel {} has no compiled parameters for {}", spec.name,
       opTextName(spec.key.kind));
}

void checkView(const KernelSpec& spec, const char* what, size_t i, const TensorType& expected,
               const TensorView& v) {
  if (v.dtype != expected.dtype || v.shape != expected.shape)
    fail(ErrorKind::kShape, "kernel {}: {} {} is {} but the kernel expects {}", spec.name, what, i,
         TensorType{v.dtype, v.shape}.toString(), expected.toString());
}

}  // namespace

void run(const KernelSpec& spec, const void* const* inputs, void* output) {
  bool ran = false;
  switch (spec.key.kind) {
#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index) \
  case OpKind::k##e:                                               \
    ran = run##e(spec, inputs, output);                            \
    break;
#include "graph/ops.def"
#undef GEARBOX_OP
  }
  if (!ran) failNotRunnable(spec);
}

void runViews(const KernelSpec& spec, std::span<const TensorView> inputs, const TensorView& out) {
  // Pointers for up to 16 inputs live on the stack; only a very wide Cat needs the heap.
  constexpr size_t kInline = 16;
  const void* inlinePtrs[kInline];
  std::vector<const void*> heapPtrs;
  const void** ptrs = inlinePtrs;
  if (inputs.size() > kInline) {
    heapPtrs.resize(inputs.size());
    ptrs = heapPtrs.data();
  }
  for (size_t i = 0; i < inputs.size(); ++i) ptrs[i] = inputs[i].data;

  if (inputs.size() != spec.key.inputs.size())
    fail(ErrorKind::kShape, "kernel {}: expects {} inputs, got {}", spec.name,
         spec.key.inputs.size(), inputs.size());
  if (!spec.generic) {
    for (size_t i = 0; i < inputs.size(); ++i)
      checkView(spec, "input", i, spec.key.inputs[i], inputs[i]);
    checkView(spec, "output", 0, spec.output, out);
    run(spec, ptrs, out.data);
    return;
  }
  // Dynamic mode: derive this call's parameters (strides, paths, split) from the runtime shapes.
  std::vector<TensorType> types;
  types.reserve(inputs.size());
  for (const TensorView& v : inputs) types.push_back(TensorType{v.dtype, v.shape});
  const KernelSpec concrete = specializeKernelSpec(spec, types, &out.shape);
  checkView(concrete, "output", 0, concrete.output, out);
  run(concrete, ptrs, out.data);
}

namespace ref {
namespace {

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
#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index) \
  case OpKind::k##e:                                               \
    return ref##e(attrs, ins, out);
#include "graph/ops.def"
#undef GEARBOX_OP
  }
}

}  // namespace ref
}  // namespace gearbox::kernels
