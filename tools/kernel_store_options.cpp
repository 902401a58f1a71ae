// Temporary until the kernel_meta / op-info / bundle work lands: the options are accepted by
// no command yet.
#include "graph/error.h"
#include "tools/run_options.h"

namespace gearbox::cli {
void addKernelStoreOptions(CLI::App*, RunOptions&) {}
void attachKernelStores(const RunOptions&, SessionOptions&) {}
}  // namespace gearbox::cli
