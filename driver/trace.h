#pragma once
// Traces: one JSON object per line, one iteration each, mapping input name -> shape, e.g.
//   {"x1": [2, 2], "x2": [2, 2]}
// Blank lines and lines starting with '#' are skipped. Inputs declared with a fully static
// shape (weights) may be left out. Errors name file:line and the input.

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/specialize.h"
#include "gears/gear_spec.h"

namespace gearbox::cli {

// With `lines`, the file line of every iteration (1-based) is appended to it, so a runtime
// error can name trace.jsonl:LINE.
std::vector<InputSignature> loadTrace(const std::string& path, const Graph& g,
                                      std::vector<int>* lines = nullptr);
std::vector<InputSignature> parseTrace(const std::string& text, const std::string& file,
                                       const Graph& g, std::vector<int>* lines = nullptr);
// One iteration of a trace: its input shapes and the file line it came from (1-based).
struct TraceEntry {
  InputSignature sig;
  int line = 0;
};

// The longest trace line read (1 MiB): far above any real signature, and a bound on what one
// line can make the reader hold.
constexpr size_t kMaxTraceLineBytes = size_t{1} << 20;

// Reads a trace file one iteration at a time, in constant memory: `gearbox run` over a
// 1,000,000-line trace never holds it whole. Every line is checked exactly as loadTrace checks
// it; the same limits hold (regular files only, at most kMaxInputFileBytes).
class TraceReader {
 public:
  TraceReader(const std::string& path, const Graph& g);  // Error(kIo) when it cannot be read
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;
  // The next iteration; false at the end of the file. An Error names path:line otherwise.
  bool next(TraceEntry& e);

 private:
  bool readLine(std::string& line);  // false at the end of the file
  std::string path_;
  const Graph* graph_;
  int fd_ = -1;
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
  int line_ = 0;
};

// Reads the whole trace once, checking every line, and returns its number of iterations
// (Error(kParse) when it has none): what `run` does before its first call, so a bad line
// 900,000 is reported before anything runs and nothing is written.
int64_t checkTrace(const std::string& path, const Graph& g);

// Parses '{"x": [2, 4]}' into a signature for g; inputs not named keep their declared shape.
InputSignature parseShapesJson(const std::string& json, const Graph& g, const std::string& where);

// NAME=DIMS as --shape, --seen and --pad-to take it: "x1=-1,2" -> {"x1", [-1, 2]}; "s=" is a
// scalar. A dim is a size >= 0, -1, or a symbol name. Error(kConfig) naming `option`.
InputDecl parseShapeArg(const std::string& arg, const char* option);

}  // namespace gearbox::cli
