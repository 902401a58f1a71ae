// Running a trace through a session (driver/run_options.h: runTrace), for `gearbox run`,
// `gearbox compare` and the Python module alike.
#include <fmt/format.h>

#include <cstdlib>
#include <new>
#include <optional>

#include "compiler/compile_log.h"
#include "driver/run_options.h"
#include "driver/run_report.h"
#include "executor/modes/geared.h"
#include "graph/checked.h"
#include "graph/error.h"

namespace gearbox::cli {

namespace {
// Model only, kernels are not executed and the inputs' data is never read (counters and MODELED
// figures depend on shapes alone), so every call's inputs alias one zeroed buffer as large as
// the largest input so far. makeInputs specialises the graph and fills every element: most of a
// model-only call's time before (gearbox sweep's 20,000-call points, issue 25).
class ShapeOnlyInputs {
 public:
  std::vector<Tensor> make(const Graph& g, const InputSignature& sig) {
    std::vector<Tensor> inputs;
    inputs.reserve(sig.size());
    for (size_t i = 0; i < sig.size() && i < g.inputs.size(); ++i) {
      const DType dtype = g.values[g.inputs[i]].type.dtype;
      const size_t bytes = static_cast<size_t>(checkedBytes(sig[i], dtype, "a trace input"));
      if (bytes > capacity_) {
        // calloc: large blocks come zeroed from mmap, untouched pages cost nothing.
        auto* p = static_cast<std::byte*>(std::calloc(std::max<size_t>(bytes, 1), 1));
        if (!p) throw std::bad_alloc();
        buffer_ = std::shared_ptr<std::byte>(p, [](std::byte* q) { std::free(q); });
        capacity_ = bytes;
      }
      inputs.push_back(Tensor::wrap(dtype, sig[i], buffer_));
    }
    return inputs;
  }

 private:
  std::shared_ptr<std::byte> buffer_;
  size_t capacity_ = 0;
};
}  // namespace

std::vector<std::vector<Tensor>> runTrace(Session& session, const TraceNext& next,
                                          const RunOptions& o, std::ostream& os, bool keepOutputs,
                                          ReferenceCheck* check, RunTracker* tracker) {
  std::vector<std::vector<Tensor>> outputs;
  // Without a tracker of the caller's, one at the options' level (the Python bindings).
  std::optional<RunTracker> own;
  if (!tracker) {
    own.emplace(session.graph(), o.quiet ? Verbosity::kQuiet : Verbosity::kVerbose, o.explain);
    tracker = &*own;
  }
  TraceEntry entry;
  if (!next(entry)) fail(ErrorKind::kParse, "{}: the trace has no iterations", o.trace);
  // The mode's up-front work (geared: every gear compiled before the first call; non-geared
  // dynamic dims take the first iteration's sizes).
  session.prepare(entry.sig);
  if (modeInfo(session.options().mode).needsGears) {
    if (!o.quiet) {
      const int64_t gears = gearedCounters(session.stats()).gears;
      os << fmt::format("compiled {} {} up front ({} {}):\n", gears, gears == 1 ? "gear" : "gears",
                        session.stats().kernelCompiles,
                        session.stats().kernelCompiles == 1 ? "kernel" : "kernels");
      for (const std::string& line : session.modeReportLines()) os << "  " << line << "\n";
    }
  }
  ShapeOnlyInputs shapeOnly;
  // Outputs to keep or check against the reference need real data.
  const bool dataless = session.options().modelOnly && !check && !keepOutputs;
  int64_t i = 0;
  do {
    try {
      if (o.iterMarkers) compileLogger()->info("To compile op|=====iter{}", i);
      auto inputs = dataless
                        ? shapeOnly.make(session.graph(), entry.sig)
                        : makeInputs(session.graph(), entry.sig, o.seed + static_cast<uint64_t>(i));
      auto out = session.run(inputs);
      if (check) check->check(inputs, out);
      if (keepOutputs) outputs.push_back(std::move(out));
      tracker->observe(session.history().back(), os);
    } catch (const Error& e) {
      // Name where it happened: the mode, the iteration and the trace line it came from.
      const std::string where =
          entry.line > 0 && !o.trace.empty() ? fmt::format(" ({}:{})", o.trace, entry.line) : "";
      throw Error(e.kind(), fmt::format("{} mode, iteration {}{}: {}",
                                        modeName(session.options().mode), i, where, e.what()));
    }
    ++i;
  } while (next(entry));
  return outputs;
}

std::vector<std::vector<Tensor>> runTrace(Session& session,
                                          const std::vector<InputSignature>& trace,
                                          const RunOptions& o, std::ostream& os, bool keepOutputs,
                                          ReferenceCheck* check, RunTracker* tracker,
                                          const std::vector<int>* traceLines) {
  size_t i = 0;
  const TraceNext next = [&](TraceEntry& e) {
    if (i >= trace.size()) return false;
    e.sig = trace[i];
    e.line = traceLines && i < traceLines->size() ? (*traceLines)[i] : 0;
    ++i;
    return true;
  };
  return runTrace(session, next, o, os, keepOutputs, check, tracker);
}

}  // namespace gearbox::cli
