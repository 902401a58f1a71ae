// The trace reader (tools/trace.h) against seed001's two-input graph.
#include "fuzz_common.h"
#include "graph/text.h"
#include "tools/trace.h"

namespace {
const gearbox::Graph& model() {
  static const gearbox::Graph g = gearbox::parseGraph(
      "graph seed001(%x1: f32[-1, 2], %x2: f32[-1, 2]) {\n  %y = add(%x1, %x2)\n  return %y\n}\n");
  return g;
}
}  // namespace

GEARBOX_FUZZ_TARGET({ (void)gearbox::cli::parseTrace(input, "fuzz.jsonl", model()); })
