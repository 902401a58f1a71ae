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
//
// One difference is not damage: a spec whose params record the ISA it was compiled for
// ("isa", MatMul's GEMM blocking) and name another ISA than this process runs (a file written on
// an AVX-512 machine, read on an AVX2 one, or under GEARBOX_ISA). Then the spec compiled here is
// returned instead, so the file's spec is never run; otherwise `loaded` itself is returned.
std::shared_ptr<const KernelSpec> validateAgainstRecompiled(
    std::shared_ptr<const KernelSpec> loaded);

}  // namespace gearbox
