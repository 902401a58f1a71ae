// The trace readers (driver/trace.h) against seed001's two-input graph, differentially: the
// in-memory parseTrace and the streaming TraceReader (what `gearbox run` uses, through a memfd
// so the real file path is read) must agree on every input: the same iterations and lines, or
// both an Error of the same kind. A disagreement aborts, which libFuzzer reports as a finding.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "driver/trace.h"
#include "fuzz_common.h"
#include "graph/text.h"

namespace {
const gearbox::Graph& model() {
  static const gearbox::Graph g = gearbox::parseGraph(
      "graph seed001(%x1: f32[-1, 2], %x2: f32[-1, 2]) {\n  %y = add(%x1, %x2)\n  return %y\n}\n");
  return g;
}

struct Outcome {
  std::vector<gearbox::InputSignature> sigs;
  std::vector<int> lines;
  std::optional<gearbox::ErrorKind> error;
};

Outcome inMemory(const std::string& input) {
  Outcome o;
  try {
    o.sigs = gearbox::cli::parseTrace(input, "fuzz.jsonl", model(), &o.lines);
  } catch (const gearbox::Error& e) {
    o.error = e.kind();
  }
  return o;
}

Outcome streamed(const std::string& input) {
  Outcome o;
  const int fd = ::memfd_create("trace", MFD_CLOEXEC);
  if (fd < 0) std::abort();
  size_t done = 0;
  while (done < input.size()) {
    const ssize_t n = ::write(fd, input.data() + done, input.size() - done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  try {
    gearbox::cli::TraceReader reader("/proc/self/fd/" + std::to_string(fd), model());
    gearbox::cli::TraceEntry e;
    while (reader.next(e)) {
      o.sigs.push_back(e.sig);
      o.lines.push_back(e.line);
    }
    if (o.sigs.empty()) o.error = gearbox::ErrorKind::kParse;  // as checkTrace says
  } catch (const gearbox::Error& e) {
    o.error = e.kind();
  }
  ::close(fd);
  return o;
}
}  // namespace

GEARBOX_FUZZ_TARGET({
  const Outcome a = inMemory(input), b = streamed(input);
  const bool agree = a.error.has_value() == b.error.has_value() &&
                     (a.error ? *a.error == *b.error : a.sigs == b.sigs && a.lines == b.lines);
  if (!agree) {
    std::fprintf(stderr, "parseTrace and TraceReader disagree: %s vs %s, %zu vs %zu iterations\n",
                 a.error ? "error" : "ok", b.error ? "error" : "ok", a.sigs.size(), b.sigs.size());
    std::abort();
  }
})
