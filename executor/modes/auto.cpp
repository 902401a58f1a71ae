// Auto mode (automatic dynamic, torch.compile's default): the first compile is static; a miss
// caused by sizes that differ from the first call recompiles with those dims dynamic, and
// later calls reuse that plan. --dynamic-dims / --static-dims are mark_dynamic / mark_static.
#include "executor/modes/compiled_mode.h"

namespace gearbox {

std::unique_ptr<ModeStrategy> makeAutoMode(ModeHost& host) {
  return std::make_unique<CompiledMode>(host, DynamicDimPolicy::Start::kAutomatic);
}

}  // namespace gearbox
