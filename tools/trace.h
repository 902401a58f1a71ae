#pragma once
// Traces: one JSON object per line, one iteration each, mapping input name -> shape, e.g.
//   {"x1": [2, 2], "x2": [2, 2]}
// Blank lines and lines starting with '#' are skipped. Inputs declared with a fully static
// shape (weights) may be left out. Errors name file:line and the input.

#include <string>
#include <vector>

#include "compiler/specialize.h"

namespace gearbox::cli {

// With `lines`, the file line of every iteration (1-based) is appended to it, so a runtime
// error can name trace.jsonl:LINE.
std::vector<InputSignature> loadTrace(const std::string& path, const Graph& g,
                                      std::vector<int>* lines = nullptr);
std::vector<InputSignature> parseTrace(const std::string& text, const std::string& file,
                                       const Graph& g, std::vector<int>* lines = nullptr);
// Parses '{"x": [2, 4]}' into a signature for g; inputs not named keep their declared shape.
InputSignature parseShapesJson(const std::string& json, const Graph& g, const std::string& where);

}  // namespace gearbox::cli
