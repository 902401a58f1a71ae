// --kernel-meta, --record-op-info and --kernel-bundle: the persistence and static-kernel
// workflows of seeds 000 and 003 (docs/kernel-meta.md), shared by every command that runs a
// session.
#include <memory>

#include "compiler/kernel_store.h"
#include "graph/error.h"
#include "tools/run_options.h"

namespace gearbox::cli {

void addKernelStoreOptions(CLI::App* cmd, RunOptions& o) {
  cmd->add_option("--kernel-meta", o.kernelMeta,
                  "Persist compiled kernels in DIR, one file per kernel, and load them from there "
                  "in later runs (count with: ls DIR | wc -l)");
  cmd->add_option("--record-op-info", o.recordOpInfo,
                  "Write one op-info JSON per distinct op into "
                  "DIR/aclnn_static_shape_kernel_outputs/ (input for `gearbox precompile`)");
  cmd->add_option("--kernel-bundle", o.kernelBundles,
                  "Load precompiled kernels from a `gearbox precompile` bundle (repeatable)");
}

void attachKernelStores(const RunOptions& o, SessionOptions& s) {
  // The recorder goes first: as a store that never serves, it sees every kernel the run looks
  // up, including those the bundles and kernel_meta serve, so a run that compiles nothing
  // still records its ops. Its files are written as ops are seen, so they are complete
  // whenever the command returns.
  if (!o.recordOpInfo.empty()) {
    auto recorder = std::make_shared<OpInfoRecorder>(o.recordOpInfo);
    s.kernelStores.push_back(recorder->observer());
  }
  // Bundles before kernel_meta: they are already in memory, so a hit there costs no file read.
  if (!o.kernelBundles.empty()) {
    auto bundles = std::make_shared<BundleStore>();
    for (const std::string& path : o.kernelBundles) bundles->addBundle(path);
    s.kernelStores.push_back(std::move(bundles));
  }
  if (!o.kernelMeta.empty())
    s.kernelStores.push_back(std::make_shared<KernelMetaStore>(o.kernelMeta));
}

}  // namespace gearbox::cli
