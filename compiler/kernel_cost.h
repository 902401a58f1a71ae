#pragma once
<<<<<<< HEAD
// Modeled cost terms of one kernel, per op (compiler/ops/<op>.cpp), for the device cost model.
// These are MODELED figures derived from the static shapes, never measured: flops counts the
// arithmetic operations of the op's math (a multiply-add is 2), bytes the data the op must read
// plus write once each (an ideal cache, like a roofline model's DRAM traffic).
=======
// The work one kernel does at the static shapes of its key: floating-point operations and
// bytes moved (read + written), the two axes of a roofline. The device model
// (executor/cost_model.h) turns them into a MODELED execution time; nothing here is timed.
//
// Counting rules (docs/cost-model.md): an add is 1 flop per output element; a matmul is 2
// flops per multiply-accumulate (2*M*N*K per batch); data-movement ops (IndexSelect, Cat,
// CatGather) do no flops. Bytes are every input element read once plus every output element
// written once, as STREAM counts them; a gathered index is read once. A dynamic dim (< 0) in
// the key counts as 1, so a shape-generic key gives the work of its smallest instance.
>>>>>>> main

#include "compiler/kernel_spec.h"

namespace gearbox {

struct KernelCost {
  double flops = 0;
  double bytes = 0;  // read + written
};

<<<<<<< HEAD
// For the static shapes in key.inputs; a dynamic dim counts as 1 (the key says nothing more).
KernelCost kernelCost(const KernelKey& key);

// The modeled device compile latency of one kernel of an op (by kernel name, e.g. "Mul"), in
// microseconds, as the op's file states it with its source; 100 for a name that is no op.
double modeledCompileUsDefault(std::string_view kernelOp);
=======
KernelCost kernelCost(const KernelKey& key);  // for the static shapes in key.inputs
>>>>>>> main

}  // namespace gearbox
