// Linked into every bench: adds "gearbox_native: ON|OFF" and the gearbox version to Google
// Benchmark's context header, so every figure says whether it came from a -march=native build
// (docs/performance.md: native figures are opt-in with -DGEARBOX_NATIVE=ON).
#include <benchmark/benchmark.h>

#include "gearbox/version.h"

namespace {

#ifdef GEARBOX_NATIVE_BUILD
constexpr const char* kNative = "ON (-march=native)";
#else
constexpr const char* kNative = "OFF (portable; -DGEARBOX_NATIVE=ON for native figures)";
#endif

// Runs before main (BENCHMARK_MAIN), which prints the context after parsing its flags.
[[maybe_unused]] const bool kRegistered = [] {
  benchmark::AddCustomContext("gearbox_native", kNative);
  benchmark::AddCustomContext("gearbox_version", GEARBOX_VERSION);
  return true;
}();

}  // namespace
