// Replaced by the kernel and dispatch benchmarks.
#include <benchmark/benchmark.h>
BENCHMARK_MAIN();
