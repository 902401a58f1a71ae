// The stores behind --kernel-meta, --record-op-info and --kernel-bundle: the persistence and
// static-kernel workflows of seeds 000 and 003 (docs/kernel-meta.md), shared by every command
// that runs a session. The options themselves are rows of driver/run_options.def.
#include <memory>

#include "compiler/kernel_store.h"
#include "driver/run_options.h"
#include "graph/error.h"

namespace gearbox::cli {

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
