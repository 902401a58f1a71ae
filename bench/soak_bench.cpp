// Flat memory over long runs (issue 15): resident set size after 10,000 and after N calls of a
// mixed trace (four_ops over batches 1, 2, 3, 4, 8), in every mode, with the session's history
// bounded (SessionOptions::historyLimit = 1000) and, as the peer in the same run, unbounded.
// Measured RSS from /proc/self/status; each case runs once (Iterations(1)) in a fresh session.
// The default N is 200,000 to keep a run near a minute on 2 cores; set GEARBOX_SOAK_CALLS for
// the 1,000,000-call figure.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "executor/modes/geared.h"
#include "executor/session.h"
#include "graph/text.h"

namespace gearbox {
namespace {

double rssMb() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      double kb = 0;
      status >> kb;
      return kb / 1024.0;
    }
    std::getline(status, key);
  }
  return 0;
}

int64_t soakCalls() {
  const char* v = std::getenv("GEARBOX_SOAK_CALLS");
  return v ? std::max<int64_t>(10000, std::atoll(v)) : 200000;
}

void BM_Soak(benchmark::State& state) {
  const Mode mode = static_cast<Mode>(state.range(0));
  const size_t limit = static_cast<size_t>(state.range(1));
  const int64_t calls = soakCalls();
  const int64_t batches[] = {1, 2, 3, 4, 8};
  for (auto _ : state) {
    SessionOptions o;
    o.mode = mode;
    o.historyLimit = limit;
    if (modeInfo(mode).needsGears)
      gearOptions(o).json = R"({"x": {"0": [1, 2, 3, 4, 8]}, "y": {"0": [1, 2, 3, 4, 8]}})";
    Session s(loadGraph(std::string(GEARBOX_SOURCE_DIR) + "/examples/four_ops.gbx"), o);
    std::vector<std::vector<Tensor>> inputs;
    for (int64_t b : batches)
      inputs.push_back(makeInputs(s.graph(), {Shape{b, 4}, Shape{b, 4}}, b));
    double at10k = 0;
    for (int64_t i = 0; i < calls; ++i) {
      benchmark::DoNotOptimize(s.run(inputs[i % 5]));
      if (i + 1 == 10000) at10k = rssMb();
    }
    state.counters["rss_mb_10k"] = at10k;
    state.counters["rss_mb_end"] = rssMb();
    state.counters["growth_mb"] = rssMb() - at10k;
    state.counters["calls"] = static_cast<double>(calls);
  }
  state.SetLabel(std::string(modeName(mode)) + (limit ? " history<=1000" : " history unbounded"));
}
// Every mode of the mode table.
std::vector<int64_t> modeArgs() {
  std::vector<int64_t> out;
  for (Mode m : modes()) out.push_back(static_cast<int64_t>(m));
  return out;
}

BENCHMARK(BM_Soak)->ArgsProduct({modeArgs(), {1000, 0}})->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
}  // namespace gearbox

BENCHMARK_MAIN();
