#pragma once
// Modeled cost terms of one kernel, per op (compiler/ops/<op>.cpp), for the device cost model.
// These are MODELED figures derived from the static shapes, never measured: flops counts the
// arithmetic operations of the op's math (a multiply-add is 2), bytes the data the op must read
// plus write once each (an ideal cache, like a roofline model's DRAM traffic).

#include "compiler/kernel_spec.h"

namespace gearbox {

struct KernelCost {
  double flops = 0;
  double bytes = 0;  // read + written
};

// For the static shapes in key.inputs; a dynamic dim counts as 1 (the key says nothing more).
KernelCost kernelCost(const KernelKey& key);

// The modeled device compile latency of one kernel of an op (by kernel name, e.g. "Mul"), in
// microseconds, as the op's file states it with its source; 100 for a name that is no op.
double modeledCompileUsDefault(std::string_view kernelOp);

}  // namespace gearbox
