// The cost-model JSON (executor/cost_model.h).
#include "executor/cost_model.h"
#include "fuzz_common.h"

GEARBOX_FUZZ_TARGET({
  gearbox::CostModel m;
  gearbox::applyCostJson(m, input, "fuzz.json");
  (void)gearbox::costModelToJson(m);
})
