#pragma once
// The work one kernel does at the static shapes of its key: floating-point operations and
// bytes moved (read + written), the two axes of a roofline. The device model
// (executor/cost_model.h) turns them into a MODELED execution time; nothing here is timed.
// Each op states its own terms in compiler/ops/<op>.cpp (dispatch generated from ops.def).
//
// Counting rules (docs/cost-model.md): an add or mul is 1 flop per output element, relu 1 per
// element; a matmul is 2 flops per multiply-accumulate (2*M*N*K per batch, 1-D operands
// promoted as torch.matmul does); data-movement ops (IndexSelect, Cat, CatGather, Reshape,
// Transpose) do no flops. Bytes are every input element read once plus every output element
// written once, as STREAM counts them; a gather reads only the selected rows, plus its index.
// A dynamic dim (< 0) in the key counts as 1, so a shape-generic key gives the work of its
// smallest instance.

#include <string_view>

#include "compiler/kernel_spec.h"

namespace gearbox {

struct KernelCost {
  double flops = 0;
  double bytes = 0;  // read + written
};

KernelCost kernelCost(const KernelKey& key);  // for the static shapes in key.inputs

// The MODELED compile cost of one kernel of an op on the built-in accelerator-class device: a
// base plus, where real compilers search tilings, a term per log2 of the kernel's FLOPs. Each op
// states its terms and where each figure comes from in compiler/ops/<op>.cpp, so an op without
// them does not link; a device profile may replace the whole table (executor/cost_model.h).
struct CompileCostTerms {
  double baseUs = 0;
  std::string_view baseSource;
  double perLog2FlopsUs = 0;  // 0: no size term
  std::string_view perLog2FlopsSource;
};

CompileCostTerms compileCostTerms(OpKind kind);

}  // namespace gearbox
