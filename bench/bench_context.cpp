// Linked into every bench: adds "gearbox_native: ON|OFF", the ISA the kernels run with (chosen at
// run time from the CPU, or forced lower with GEARBOX_ISA: compiler/cpu_isa.h) and the gearbox
// version to Google Benchmark's context header, so every figure says which build and which
// kernels it came from (docs/performance.md).
#include <benchmark/benchmark.h>

#include "compiler/cpu_isa.h"
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
  // A bad GEARBOX_ISA throws here, before main: the bench stops with the message.
  benchmark::AddCustomContext("gearbox_isa", gearbox::isaDescription());
  benchmark::AddCustomContext("gearbox_version", GEARBOX_VERSION);
  return true;
}();

}  // namespace
