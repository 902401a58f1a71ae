// Op-info records (compiler/kernel_store.h opInfoToKey), parsed as precompile parses them.
#include <nlohmann/json.hpp>

#include "compiler/kernel_spec.h"
#include "compiler/kernel_store.h"
#include "fuzz_common.h"
#include "graph/json_limits.h"

GEARBOX_FUZZ_TARGET({
  gearbox::checkJsonDepth(input, "fuzz.json");
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(input);
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  const gearbox::KernelKey key = gearbox::opInfoToKey(j, "fuzz.json");
  if (key.isStatic()) (void)gearbox::compileKernelSpec(key);
})
