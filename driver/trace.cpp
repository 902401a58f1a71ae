#include "driver/trace.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "graph/checked.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "graph/json_limits.h"

namespace gearbox::cli {

namespace {

Shape shapeFromJson(const nlohmann::json& v, const std::string& where, const std::string& input) {
  if (!v.is_array())
    fail(ErrorKind::kParse, "{}: input '{}': expected a shape array like [2, 4], got {}", where,
         input, v.dump());
  if (v.size() > static_cast<size_t>(kMaxRank))
    fail(ErrorKind::kParse, "{}: input '{}': rank {} exceeds {}", where, input, v.size(), kMaxRank);
  Shape s;
  for (size_t d = 0; d < v.size(); ++d) {
    if (!v[d].is_number_integer() || v[d].get<int64_t>() < 0)
      fail(ErrorKind::kParse, "{}: input '{}' dim {}: expected a size >= 0, got {}", where, input,
           d, v[d].dump());
    s.push(v[d].get<int64_t>());
  }
  return s;
}

InputSignature signatureFromJson(const nlohmann::json& obj, const Graph& g,
                                 const std::string& where, bool requireAll) {
  if (!obj.is_object())
    fail(ErrorKind::kParse, "{}: expected a JSON object mapping input name -> shape", where);
  InputSignature sig;
  for (ValueId v : g.inputs) sig.push_back(g.values[v].type.shape);
  std::vector<bool> given(g.inputs.size(), false);
  for (auto& [name, value] : obj.items()) {
    const int i = g.findInput(name);
    if (i < 0) fail(ErrorKind::kParse, "{}: graph {} has no input '{}'", where, g.name, name);
    sig[i] = shapeFromJson(value, where, name);
    // The size limit is checked as soon as a shape is known, before anything is sized by it.
    checkTensorSize(sig[i], g.values[g.inputs[i]].type.dtype, where,
                    fmt::format("input '{}'", name));
    given[i] = true;
  }
  if (requireAll)
    for (size_t i = 0; i < given.size(); ++i)
      // An input declared with a fully static shape (a weight) has only one possible shape.
      if (!given[i] && !sig[i].isStatic())
        fail(ErrorKind::kParse, "{}: input '{}' is missing", where, g.values[g.inputs[i]].name);
  return sig;
}

// Depth-checked first (graph/json_limits.h), then parsed; Error(kParse) naming `where`.
nlohmann::json parseJson(std::string_view text, const std::string& where) {
  checkJsonDepth(text, where);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kParse, "{}: invalid JSON: {}", where, e.what());
  }
}

// One trace line: nullopt for a blank or '#' line, the checked signature otherwise.
std::optional<InputSignature> parseTraceLine(std::string_view l, const std::string& file, int line,
                                             const Graph& g) {
  while (!l.empty() && (l.back() == '\r' || l.back() == ' ' || l.back() == '\t'))
    l.remove_suffix(1);
  const size_t first = l.find_first_not_of(" \t");
  if (first == std::string_view::npos || l[first] == '#') return std::nullopt;
  const std::string where = file + ":" + std::to_string(line);
  InputSignature sig = signatureFromJson(parseJson(l, where), g, where, true);
  try {
    checkSignature(g, sig);
  } catch (const Error& e) {
    fail(ErrorKind::kShape, "{}: {}", where, e.what());
  }
  return sig;
}

}  // namespace

std::vector<InputSignature> parseTrace(const std::string& text, const std::string& file,
                                       const Graph& g, std::vector<int>* lines) {
  std::vector<InputSignature> out;
  size_t pos = 0;
  int line = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string_view l(text.data() + pos, nl - pos);
    pos = nl + 1;
    ++line;
    if (auto sig = parseTraceLine(l, file, line, g)) {
      out.push_back(std::move(*sig));
      if (lines) lines->push_back(line);
    }
    if (nl == text.size()) break;
  }
  if (out.empty()) fail(ErrorKind::kParse, "{}: the trace has no iterations", file);
  return out;
}

std::vector<InputSignature> loadTrace(const std::string& path, const Graph& g,
                                      std::vector<int>* lines) {
  return parseTrace(readFile(path), path, g, lines);
}

TraceReader::TraceReader(const std::string& path, const Graph& g) : path_(path), graph_(&g) {
  fd_ = openRegularFile(path, "trace");
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && static_cast<uint64_t>(st.st_size) > kMaxInputFileBytes) {
    ::close(fd_);
    fd_ = -1;
    fail(ErrorKind::kIo, "cannot read trace '{}': it is {} bytes, above the limit of {} bytes",
         path, static_cast<uint64_t>(st.st_size), kMaxInputFileBytes);
  }
}

TraceReader::~TraceReader() {
  if (fd_ >= 0) ::close(fd_);
}

bool TraceReader::readLine(std::string& line) {
  line.clear();
  for (;;) {
    const size_t nl = buf_.find('\n', pos_);
    if (nl != std::string::npos) {
      line.append(buf_, pos_, nl - pos_);
      pos_ = nl + 1;
      break;
    }
    line.append(buf_, pos_, std::string::npos);
    buf_.clear();
    pos_ = 0;
    if (line.size() > kMaxTraceLineBytes)
      fail(ErrorKind::kParse, "{}:{}: line longer than {} bytes", path_, line_ + 1,
           kMaxTraceLineBytes);
    if (eof_) {
      if (line.empty()) return false;
      break;  // a last line without '\n'
    }
    char chunk[1 << 16];
    const ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(ErrorKind::kIo, "cannot read trace '{}': {}", path_, std::strerror(errno));
    }
    if (n == 0) eof_ = true;
    buf_.assign(chunk, static_cast<size_t>(n));
  }
  if (line.size() > kMaxTraceLineBytes)
    fail(ErrorKind::kParse, "{}:{}: line longer than {} bytes", path_, line_ + 1,
         kMaxTraceLineBytes);
  ++line_;
  return true;
}

bool TraceReader::next(TraceEntry& e) {
  std::string l;
  while (readLine(l)) {
    if (auto sig = parseTraceLine(l, path_, line_, *graph_)) {
      e.sig = std::move(*sig);
      e.line = line_;
      return true;
    }
  }
  return false;
}

int64_t checkTrace(const std::string& path, const Graph& g) {
  TraceReader reader(path, g);
  TraceEntry e;
  int64_t n = 0;
  while (reader.next(e)) ++n;
  if (n == 0) fail(ErrorKind::kParse, "{}: the trace has no iterations", path);
  return n;
}

InputSignature parseShapesJson(const std::string& json, const Graph& g, const std::string& where) {
  return signatureFromJson(parseJson(json, where), g, where, false);
}

InputDecl parseShapeArg(const std::string& arg, const char* option) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0)
    fail(ErrorKind::kConfig, "{} '{}': expected NAME=DIMS, e.g. x1=-1,2 (a scalar is s=)", option,
         arg);
  InputDecl decl{arg.substr(0, eq), Shape()};
  const std::string dims = arg.substr(eq + 1);
  if (dims.empty()) return decl;
  size_t start = 0;
  while (true) {
    const size_t comma = dims.find(',', start);
    const std::string tok = dims.substr(start, comma == std::string::npos ? comma : comma - start);
    if (tok.empty()) fail(ErrorKind::kConfig, "{} '{}': empty dim", option, arg);
    int64_t d = 0;
    auto [ptr, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), d);
    if (ec == std::errc() && ptr == tok.data() + tok.size()) {
      if (d < kAnyDim)
        fail(ErrorKind::kConfig, "{} '{}': dim {} must be >= 0 or -1", option, arg, d);
    } else {
      const bool identifier = (std::isalpha(static_cast<unsigned char>(tok[0])) || tok[0] == '_') &&
                              std::all_of(tok.begin(), tok.end(), [](char c) {
                                return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                              });
      if (!identifier)
        fail(ErrorKind::kConfig, "{} '{}': dim '{}' is neither a size nor a symbol name", option,
             arg, tok);
      d = symbolDim(tok);
    }
    decl.shape.push(d);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return decl;
}

}  // namespace gearbox::cli
