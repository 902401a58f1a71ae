#pragma once
// The one parallel loop of gearbox's own task parallelism: the up-front compile of every gear
// (executor/modes/geared.cpp) and the bundle precompile (compiler/kernel_bundle.cpp).
//
// Normally oneTBB's parallel_for: its work stealing balances tasks of uneven cost. A
// ThreadSanitizer build (GEARBOX_STD_THREADS, set by `scripts/build.sh tsan`) runs the same
// tasks on std::threads instead. Debian's libtbb is not built with TSan, so the happens-before
// edges of its scheduler are invisible and every task would be reported as racing with the
// thread that waits for it; std::thread and std::atomic are instrumented, so what TSan reports
// there is gearbox's own.
#include <cstddef>

#ifdef GEARBOX_STD_THREADS
#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>
#else
#include <tbb/parallel_for.h>
#endif

namespace gearbox {

// Calls body(i) for every i in [0, n), in parallel, and returns when all calls have returned.
// An exception from a call is rethrown here (the first one, as oneTBB does).
template <class Body>
void parallelFor(size_t n, const Body& body) {
#ifdef GEARBOX_STD_THREADS
  if (n == 0) return;
  // At least two threads even on one core: the point of this build is to interleave tasks.
  const size_t workers = std::min(n, std::max<size_t>(2, std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0};
  std::mutex errorMu;
  std::exception_ptr error;
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard lock(errorMu);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(workers - 1);
  for (size_t t = 1; t < workers; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
#else
  tbb::parallel_for(size_t{0}, n, [&](size_t i) { body(i); });
#endif
}

}  // namespace gearbox
