#pragma once
// The compiler hooks shared by the row gathers, index_select (1-D indices along `dim`) and
// gather (indices of any shape along `axis`): the input is viewed as [outer, dimSize, inner]
// and the output as [outer, count, inner], whole rows copied by one kernel
// (executor/kernels/gather.h), so both have one params type (GatherParams), one compile step,
// one serialisation and one check.
#include "compiler/ops/op_hooks.h"

namespace gearbox::ops {

// Fills spec.params, spec.work and spec.tasks for `count` rows gathered along dim d of input 0.
void compileRowGather(KernelSpec& spec, int d, int64_t count);
void rowGatherParamsToJson(const KernelSpec& spec, Json& p);
void rowGatherParamsFromJson(const Json& p, KernelSpec& spec);
// paramsMismatch unless the params are the ones compileRowGather derives for (d, count).
void checkRowGatherParams(const KernelSpec& s, int d, int64_t count);

}  // namespace gearbox::ops
