// The IR text parser (graph/text.h): parse, then print and re-parse what parsed.
#include "fuzz_common.h"
#include "graph/text.h"

GEARBOX_FUZZ_TARGET({
  const gearbox::Graph g = gearbox::parseGraph(input, "fuzz.gbx");
  (void)gearbox::parseGraph(gearbox::printGraph(g), "printed.gbx");
})
