#pragma once
// The compile step shared by max_pool2d and avg_pool2d (compiler/ops/pool2d.cpp).

#include "compiler/ops/window_params.h"

namespace gearbox::ops {

void compilePool2d(KernelSpec& spec, int kernelSlot, int stridesSlot, int padsSlot,
                   int dilationsSlot, int countIncludePadSlot);
void pool2dParamsToJson(const KernelSpec& spec, Json& j);
void pool2dParamsFromJson(const Json& j, KernelSpec& spec);
KernelCost pool2dCost(const KernelKey& key, double flopsPerTap);

}  // namespace gearbox::ops
