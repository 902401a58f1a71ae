#pragma once
// Ops whose kernel is one flat pass over contiguous elements (Relu, and Reshape's copy) share
// ElementwiseParams and their serialisation.

#include "compiler/ops/op_hooks.h"

namespace gearbox::ops {

// numel of the output, the streaming-store choice, work (bytes read + written) and tasks.
void compileElementwise(KernelSpec& spec);
void elementwiseParamsToJson(const KernelSpec& spec, Json& p);
void elementwiseParamsFromJson(const Json& p, KernelSpec& spec);
// numel must equal both the input's and the output's element count.
void checkElementwiseParams(const KernelSpec& spec);

}  // namespace gearbox::ops
