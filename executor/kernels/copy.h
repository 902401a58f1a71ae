#pragma once
// The kernels of ops that move no element (reshape, flatten, squeeze, unsqueeze): tensors are
// contiguous and row-major, so the output holds the input's bytes in the same order. Internal to
// the executor library.
#include "compiler/kernel_spec.h"
#include "executor/kernels/common.h"
#include "graph/tensor.h"

namespace gearbox::kernels::detail {

// Optimized: nothing to do when the static plan made the output a view of the input (same
// buffer, compiler/compiler.cpp), else a flat copy split into the compiled tasks.
inline bool runViewCopy(const KernelSpec& spec, const void* in, void* out) {
  const auto* p = std::get_if<ElementwiseParams>(&spec.params);
  if (!p) return false;
  if (out == in) return true;
  const int64_t esize = static_cast<int64_t>(dtypeSize(spec.key.dtype));
  const auto* src = static_cast<const std::byte*>(in);
  auto* dst = static_cast<std::byte*>(out);
  runRanges(spec.tasks, p->numel, 64 / esize, [&](int64_t begin, int64_t end) {
    copyRow(dst + begin * esize, src + begin * esize, static_cast<size_t>((end - begin) * esize),
            p->streamingStores);
    if (p->streamingStores) streamFence();
  });
  return true;
}

// Reference: the bytes, unless the output already is the input.
inline void refViewCopy(const TensorView& in, const TensorView& out) {
  if (out.data != in.data) std::memcpy(out.data, in.data, out.bytes());
}

}  // namespace gearbox::kernels::detail
