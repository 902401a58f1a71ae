// Kernel descriptors (compiler/kernel_store.h): whatever parses must be exactly what this build
// compiles for its key (compiler/kernel_validate.h), so it is safe to run.
#include "compiler/kernel_store.h"
#include "fuzz_common.h"

GEARBOX_FUZZ_TARGET({ (void)gearbox::parseKernelDescriptor(input); })
