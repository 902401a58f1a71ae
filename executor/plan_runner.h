#pragma once
// Running compiled plans.
//
// runStaticPlan: binds the caller's input and output buffers into the plan's pointer table and
// runs every step's precompiled kernel, a batch tile's run (Plan::batchTiles) tile by tile. No
// allocation, no shape inference, no hashing.
//
// Errors raised by a kernel (an out-of-range index) are rethrown with the op and input named.

#include <span>

#include "compiler/compiler.h"
#include "executor/output_pool.h"
#include "graph/tensor.h"

namespace gearbox {

void runStaticPlan(const Plan& plan, std::span<const TensorView> inputs,
                   std::span<const TensorView> outputs);

// Allocates output tensors of a static plan (the caller-visible results).
std::vector<Tensor> allocateOutputs(const Plan& plan);
// The same from `pool`, contents unspecified (the plan writes every element).
std::vector<Tensor> allocateOutputs(const Plan& plan, OutputPool& pool);

// Re-raises a kernel error with the node's description: "<file:line>: op %o = index_select:
// input 1 (%p): index value 9 ...".
[[noreturn]] void rethrowForNode(const Graph& g, NodeId node, const std::exception& e);

}  // namespace gearbox
