#pragma once
// Kernel files (kernel_meta descriptors, bundle entries) are a cache, not a source of truth.
// A file whose content hash was recomputed can carry any params, so a loaded spec is only used
// when it is exactly what this build compiles for its key: the spec is re-derived with
// compileKernelSpec(key) and every serialised field (name, output type, tasks, work, params)
// is compared. The comparison goes through the descriptor serialisation, so a params field
// added to an op later is compared without touching this file.

#include "compiler/kernel_spec.h"

namespace gearbox {

// Throws Error(kIo) "kernel '<name>' differs from the spec compiled from its key at <field>
// (file: <v>, compiled: <v>)" when `loaded` is not the spec compileKernelSpec(loaded.key)
// gives. The caller turns that into one "damaged kernel file" warning and a recompile.
void validateAgainstRecompiled(const KernelSpec& loaded);

}  // namespace gearbox
