#pragma once
// NumPy-broadcast binary elementwise ops (add, mul) share one compile step, one params type
// (BinaryParams) and one params serialisation; each op's file only names itself.

#include "compiler/ops/op_hooks.h"

namespace gearbox::ops {

// Chooses the code path (same shape / scalar / row / general strided) for out = a (op) b.
BinaryParams compileBroadcast(const Shape& a, const Shape& b, const Shape& out);
// The whole compile hook: params, streaming-store choice, work and tasks.
void compileBinary(KernelSpec& spec);
KernelCost binaryCost(const KernelKey& key);
void binaryParamsToJson(const KernelSpec& spec, Json& p);
void binaryParamsFromJson(const Json& p, KernelSpec& spec);
void checkBinaryParams(const KernelSpec& spec);

}  // namespace gearbox::ops
