#pragma once
// The compiler hooks shared by the reductions over axes (mean, reduce_sum): one params type
// (ReduceParams), one compile step, one serialisation.

#include "compiler/ops/op_hooks.h"

namespace gearbox::ops {

// Axes that form one run of dims (global average pooling's [2, 3], a last-dim reduction) make
// the input [outer, reduce, inner], one contiguous pass per output row; other axis sets take
// the general strided path. `axesSlot` is the op's axes attribute.
void compileReduce(KernelSpec& spec, int axesSlot);
// One add per input element; the input read once, the output written once.
KernelCost reduceCost(const KernelKey& key);
void reduceParamsToJson(const KernelSpec& spec, Json& p);
void reduceParamsFromJson(const Json& p, KernelSpec& spec);

}  // namespace gearbox::ops
