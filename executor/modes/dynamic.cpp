// Dynamic mode (torch.compile dynamic=True, a GE dynamic graph; seed 001): one compile with
// every dim the model declares dynamic left symbolic (sizes 0 and 1 specialised), shape-generic
// kernels, and per call: shape inference, kernel parameters, pooled intermediates, one launch
// per op and a sync per op under sync_policy = per_op.
#include "executor/modes/compiled_mode.h"

namespace gearbox {

std::unique_ptr<ModeStrategy> makeDynamicMode(ModeHost& host) {
  return std::make_unique<CompiledMode>(host, DynamicDimPolicy::Start::kDeclared);
}

}  // namespace gearbox
