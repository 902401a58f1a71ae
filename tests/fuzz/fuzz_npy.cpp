// The .npy reader (graph/npy.h); what parses must serialise back to the same bytes' tensor.
#include <cstdlib>

#include "fuzz_common.h"
#include "graph/npy.h"

GEARBOX_FUZZ_TARGET({
  const gearbox::Tensor t = gearbox::parseNpy(input, "fuzz.npy");
  if (!gearbox::parseNpy(gearbox::serializeNpy(t), "again.npy").equals(t)) std::abort();
})
