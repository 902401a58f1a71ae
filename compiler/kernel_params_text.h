#pragma once
// A kernel's compile-time decisions as text, for people (`gearbox print --plan`). Kept out of
// kernel_spec.h, which nearly every file includes.

#include <string>

#include "compiler/kernel_spec.h"

namespace gearbox {

// The compile step's decisions for `spec` (its params) as one line of JSON, as kernel_meta
// descriptors store them: {"kind": "none"} for a generic spec.
std::string kernelParamsJson(const KernelSpec& spec);

}  // namespace gearbox
