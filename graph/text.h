#pragma once
// The gearbox IR text format (docs/IR.md). parse(print(g)) == g and print(parse(text)) is
// stable. Parse errors are Error(kParse) "file:line:col: expected ..., got ...".

#include <string>

#include "graph/graph.h"

namespace gearbox {

// `file` names the source in messages and anchors relative .npy paths.
Graph parseGraph(const std::string& text, const std::string& file = "<string>");
Graph loadGraph(const std::string& path);
std::string printGraph(const Graph& g);

}  // namespace gearbox
