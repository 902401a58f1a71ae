// The device model's prediction error on this CPU (issue 10): with the calibrated `cpu-host`
// profile on the inline device, the MODELED per-call time of the static plan of every bundled
// model, at a size where kernels dominate, against the per-call time measured here.
//
// Counters per model: modeled_us (the profile's prediction for one steady-state call),
// measured_us (mean wall time of one call in this run) and error_pct = 100 * (modeled -
// measured) / measured. Target: within +-30%. The bench's own time per iteration is the
// measured call; modeled figures never feed it.
#include <benchmark/benchmark.h>

#include <chrono>

#include "driver/trace.h"
#include "executor/session.h"
#include "graph/text.h"

namespace gearbox {
namespace {

struct Case {
  const char* model;
  const char* shapes;  // kernel-dominated: the dynamic dims made large
};

const Case kCases[] = {
    {"seed001_add.gbx", R"({"x1": [2097152, 2], "x2": [2097152, 2]})"},
    {"four_ops.gbx", R"({"x": [131072, 4], "y": [131072, 4]})"},
    {"shufflenet_unit.gbx", R"({"x": [512, 16, 49]})"},
    {"shufflenet_stage.gbx", R"({"x": [512, 16, 49]})"},
    {"shufflenet_body.gbx", R"({"x": [128, 16, 49]})"},
    {"mlp.gbx", R"({"x": [64, 1024]})"},
};

void BM_ModelError(benchmark::State& state) {
  const Case& c = kCases[state.range(0)];
  const std::string path = std::string(GEARBOX_SOURCE_DIR) + "/examples/" + c.model;
  const Graph g = loadGraph(path);
  const InputSignature sig = cli::parseShapesJson(c.shapes, g, c.model);
  SessionOptions o;
  o.mode = Mode::kStatic;
  o.cost = loadDeviceProfile("cpu-host");
  Session s(g, o);
  const auto inputs = makeInputs(s.graph(), sig, 0);
  s.run(inputs);  // compile
  s.run(inputs);  // warm
  const double modeled = s.history().back().modeledDeviceUs;
  int64_t calls = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    auto out = s.run(inputs);
    benchmark::DoNotOptimize(out);
    ++calls;
  }
  const double measured =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      static_cast<double>(std::max<int64_t>(calls, 1));
  state.SetLabel(c.model);
  state.counters["modeled_us"] = modeled;
  state.counters["measured_us"] = measured;
  state.counters["error_pct"] = 100.0 * (modeled - measured) / measured;
}
BENCHMARK(BM_ModelError)->DenseRange(0, std::size(kCases) - 1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gearbox

BENCHMARK_MAIN();
