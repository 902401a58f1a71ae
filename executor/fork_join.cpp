#include "executor/fork_join.h"

#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace gearbox::detail {
namespace {

inline void cpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

using Clock = std::chrono::steady_clock;

// One worker's mailbox, alone on its cache lines. A split of generation g posts g to the
// mailboxes of the tasks it has (task t: mailbox t - 1); whoever first moves `taken` to g runs
// that task: the worker when it wakes, or the caller when it has finished its own task and the
// worker has not started (a preempted or sleeping worker on a busy machine), as oneTBB's caller
// runs the tasks no worker stole. So a split is never slower than the caller running every task.
struct alignas(64) Mailbox {
  std::atomic<uint64_t> posted{0};
  std::atomic<uint64_t> taken{0};
  std::atomic<bool> sleeping{false};
  std::mutex mutex;  // with `wake`: where a worker past its spin sleeps
  std::condition_variable wake;

  // True for the one caller that claims generation g of this task.
  bool claim(uint64_t g) {
    uint64_t cur = taken.load(std::memory_order_acquire);
    while (cur < g)
      if (taken.compare_exchange_weak(cur, g, std::memory_order_acq_rel)) return true;
    return false;
  }
};

thread_local bool tIsWorker = false;

constexpr const char* kSpinEnvVar = "GEARBOX_SPIN_US";
constexpr long long kMaxSpinUs = 1000000;

class Pool {
 public:
  Pool() : pid_(::getpid()) {
    const int cpus = usableCpus();
    maxWorkers_ = cpus > 1 ? cpus - 1 : 0;
    if (const char* v = std::getenv(kSpinEnvVar); v && *v) {
      char* end = nullptr;
      errno = 0;
      const long long us = std::strtoll(v, &end, 10);
      if (errno == 0 && end && *end == '\0' && us >= 0 && us <= kMaxSpinUs) {
        spinUs_.store(us, std::memory_order_relaxed);
      } else {
        std::fprintf(stderr,
                     "gearbox: %s='%.40s' is not a whole number of microseconds from 0 to %lld; "
                     "idle threads spin %lld us\n",
                     kSpinEnvVar, v, kMaxSpinUs, spinUs_.load(std::memory_order_relaxed));
      }
    }
  }

  bool run(int tasks, void (*body)(void*, int), void* ctx) {
    if (tasks < 2 || tasks - 1 > maxWorkers_ || tIsWorker || ::getpid() != pid_) return false;
    if (busy_.exchange(true, std::memory_order_acquire)) return false;
    struct Release {
      std::atomic<bool>& busy;
      ~Release() { busy.store(false, std::memory_order_release); }
    } release{busy_};
    try {
      grow(tasks - 1);
    } catch (...) {
      return false;  // could not start a thread: oneTBB splits instead
    }
    error_ = nullptr;
    failed_.store(false, std::memory_order_relaxed);
#if defined(__linux__)
    callerCpu_.store(::sched_getcpu(), std::memory_order_relaxed);  // for leaveCallersCpu
#endif
    pending_.store(tasks - 1, std::memory_order_relaxed);
    // Read by a worker only once it has claimed its task of this generation, and rewritten only
    // when every task of it has finished (pending_).
    body_ = body;
    ctx_ = ctx;
    const uint64_t g = ++generation_;
    for (int t = 1; t < tasks; ++t) {
      Mailbox& box = *boxes_[static_cast<size_t>(t - 1)];
      box.posted.store(g, std::memory_order_seq_cst);
      // Dekker with the worker's sleeping flag: one of the two sees the other's store. Under the
      // mutex, so the notify cannot fall between the worker's check and its wait.
      if (box.sleeping.load(std::memory_order_seq_cst)) {
        std::lock_guard<std::mutex> lock(box.mutex);
        box.wake.notify_one();
      }
    }
    runTask(body, ctx, 0);
    // Then every task no worker has started.
    for (int t = 1; t < tasks; ++t)
      if (boxes_[static_cast<size_t>(t - 1)]->claim(g)) {
        runTask(body, ctx, t);
        pending_.fetch_sub(1, std::memory_order_acq_rel);
      }
    // The workers' tasks started before this one finished: spin a little (1,024 pauses, ~10-40
    // us), then yield, which lets a preempted worker have this core.
    for (int i = 0; pending_.load(std::memory_order_acquire) > 0; ++i) {
      if (i < 1 << 10) {
        cpuRelax();
      } else {
        std::this_thread::yield();
      }
    }
    runs_.fetch_add(1, std::memory_order_relaxed);
    if (failed_.load(std::memory_order_acquire)) std::rethrow_exception(error_);
    return true;
  }

  std::chrono::microseconds setSpin(std::chrono::microseconds spin) {
    return std::chrono::microseconds(spinUs_.exchange(spin.count(), std::memory_order_relaxed));
  }

  ForkJoinStats stats() const {
    return {runs_.load(std::memory_order_relaxed), started_.load(std::memory_order_relaxed),
            moves_.load(std::memory_order_relaxed)};
  }

 private:
  // Called with the pool held (busy_), so threads_ and boxes_ have one writer; workers only read
  // their own mailbox, created before their thread.
  void grow(int workers) {
    // Reserved first, so that once a thread runs, adding its mailbox cannot throw.
    threads_.reserve(static_cast<size_t>(workers));
    boxes_.reserve(static_cast<size_t>(workers));
    while (static_cast<int>(threads_.size()) < workers) {
      auto box = std::make_unique<Mailbox>();
      Mailbox* mine = box.get();
      const int task = static_cast<int>(threads_.size()) + 1;
      threads_.emplace_back([this, mine, task] { work(*mine, task); });  // may throw: nothing added
      boxes_.push_back(std::move(box));
      started_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (!failed_.load(std::memory_order_relaxed)) {
      error_ = std::move(e);
      failed_.store(true, std::memory_order_release);
    }
  }

  void runTask(void (*body)(void*, int), void* ctx, int task) {
    try {
      body(ctx, task);
    } catch (...) {
      fail(std::current_exception());
    }
  }

  // The scheduler places a woken thread near its waker: after an idle gap (0.1 s), the worker a
  // split wakes often lands on the caller's CPU while the other CPU idles, and stays there for
  // tens of milliseconds, until the load balancer moves one of them. The split then runs at one
  // thread's speed: the caller runs both tasks while the worker waits for the CPU (the MLP at
  // batch 32 on two threads, called in visits of 20 calls 0.1 s apart: 2 visits in 3 at 0.80 ms
  // a call instead of 0.41). A worker that finds itself on the caller's CPU leaves it: it bars
  // that CPU from its affinity mask, which moves it at once, then restores the mask, so it stays
  // free to run anywhere, as the process's affinity allows, later.
  void leaveCallersCpu() {
#if defined(__linux__)
    const int cpu = ::sched_getcpu();
    if (cpu < 0 || cpu >= CPU_SETSIZE || cpu != callerCpu_.load(std::memory_order_relaxed)) return;
    // The mask as it is now (taskset may have changed it since the worker started).
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0 || !CPU_ISSET(cpu, &allowed)) return;
    cpu_set_t others = allowed;
    CPU_CLR(cpu, &others);
    if (CPU_COUNT(&others) == 0) return;
    if (::sched_setaffinity(0, sizeof others, &others) != 0) return;  // e.g. a seccomp filter
    moves_.fetch_add(1, std::memory_order_relaxed);
    // Should this fail, the worker keeps the narrower mask: it runs, only not on that CPU.
    ::sched_setaffinity(0, sizeof allowed, &allowed);
#endif
  }

  void work(Mailbox& box, int task) {
    tIsWorker = true;
    uint64_t seen = 0;
    for (;;) {
      uint64_t now = box.posted.load(std::memory_order_acquire);
      if (now == seen) {
        // Spin for the configured time (the clock read every 256 pauses), then sleep. Every 256
        // pauses the spin also leaves the caller's CPU if it is on it (leaveCallersCpu) and
        // yields: a spin that never yields on the caller's CPU took half of the caller's time
        // until the load balancer moved one of them (ResNet-18 at 2 threads, called every 0.1 s:
        // 31 ms a call for a second or more, then 22.5); alone on its CPU, a yield returns at
        // once.
        const auto limit =
            Clock::now() + std::chrono::microseconds(spinUs_.load(std::memory_order_relaxed));
        for (int i = 0; (now = box.posted.load(std::memory_order_acquire)) == seen; ++i) {
          if ((i & 255) == 0) {
            if (Clock::now() >= limit) break;
            if (i > 0) {
              leaveCallersCpu();
              std::this_thread::yield();
            }
          }
          cpuRelax();
        }
        if (now == seen) {
          std::unique_lock<std::mutex> lock(box.mutex);
          box.sleeping.store(true, std::memory_order_seq_cst);
          box.wake.wait(lock, [&] {
            now = box.posted.load(std::memory_order_seq_cst);
            return now != seen;
          });
          box.sleeping.store(false, std::memory_order_relaxed);
          leaveCallersCpu();
        }
      }
      seen = now;
      // The caller may have run this task already (then body_ may belong to a later split).
      if (!box.claim(now)) continue;
      runTask(body_, ctx_, task);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  const pid_t pid_;
  int maxWorkers_ = 0;
  std::atomic<bool> busy_{false};
  std::atomic<int> pending_{0};
  // 2 ms: the BERT-style encoder at batch 1 has single-task stretches of 0.5-1 ms between two
  // splits; a worker asleep by then is woken through the hypervisor, and after an idle gap of
  // 0.1 s (KVM's adaptive halt polling then shrunk) each such wake-up made the call 6.5 ms
  // instead of 3.3 (spins of 0.2 / 0.5 / 1 / 2 ms: 6.5 / 6.5 / 3.7 / 3.5 ms, 2 threads).
  std::atomic<long long> spinUs_{2000};
  std::atomic<long long> runs_{0};
  std::atomic<long long> moves_{0};
  std::atomic<int> callerCpu_{-1};
  std::atomic<int> started_{0};
  std::atomic<bool> failed_{false};
  std::mutex errorMutex_;
  std::exception_ptr error_;
  uint64_t generation_ = 0;
  void (*body_)(void*, int) = nullptr;
  void* ctx_ = nullptr;
  std::vector<std::unique_ptr<Mailbox>> boxes_;
  std::vector<std::thread> threads_;
};

// Never destroyed: its workers may still be spinning while the process exits, and a child
// forked from this process has the Pool but not its threads (run() refuses there), so there is
// nothing a destructor could safely join.
Pool& pool() {
  static Pool* p = new Pool;
  return *p;
}

}  // namespace

int usableCpus() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
#endif
  return static_cast<int>(std::thread::hardware_concurrency());
}

bool forkJoin(int tasks, void (*body)(void* ctx, int task), void* ctx) {
  return pool().run(tasks, body, ctx);
}

std::chrono::microseconds setForkJoinSpin(std::chrono::microseconds spin) {
  return pool().setSpin(spin < std::chrono::microseconds(0) ? std::chrono::microseconds(0) : spin);
}

ForkJoinStats forkJoinStats() {
  return pool().stats();
}

}  // namespace gearbox::detail
