#pragma once
// Specialisation: graph + concrete input shapes -> a graph whose every dim is concrete.
//
// Binding checks the actual shapes against the declared ones the way a compiled graph's
// guards would: static dims must match, every dim named by the same symbol must take one
// value, ranks and dtypes must match. Errors name the input and the dim.

#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace gearbox {

// The shapes of one call, in graph input order.
using InputSignature = std::vector<Shape>;

struct SignatureHash {
  size_t operator()(const InputSignature& s) const;
};

std::string signatureToString(const Graph& g, const InputSignature& sig);

// Checks `sig` against the declared input types of `g` (rank, static dims, symbol
// consistency). Throws Error(kShape) naming the input and the dim.
void checkSignature(const Graph& g, const InputSignature& sig);

// Returns a copy of `g` with input types set to `sig` (dims may still be dynamic where the
// signature has -1/symbols, as dynamic mode does) and every node re-inferred and verified.
Graph specializeGraph(const Graph& g, const InputSignature& sig);
// The same specialisation without copying the graph: the type of every value of `g` (indexed
// by ValueId) for `sig`. Plans keep only this next to the shared graph.
std::vector<TensorType> specializeTypes(const Graph& g, const InputSignature& sig);

// Guards (which cached plan accepts which shapes) live in compiler/recompile_policy.h.

}  // namespace gearbox
