#pragma once
// The fork-join behind the kernels' static splits (executor/kernels/common.h: a kernel compiled
// for N tasks runs them on N threads). oneTBB's workers go to sleep a few microseconds after
// their last task, so at batch 1, where a network is a chain of ~100 kernels of 10-500 us each,
// nearly every split paid a futex wake-up (on this project's 2-vCPU VM, MobileNetV2 switched
// context ~45 times a call and ran no faster on 2 threads than on 1). This pool's workers spin
// for a while after each split, as ONNX Runtime's intra-op pool and OpenMP runtimes do by
// default, so the next kernel's split finds them awake; past the spin they sleep on a futex and
// cost nothing. Internal to the executor library.
#include <chrono>

namespace gearbox::detail {

// Runs body(ctx, t) for t in [0, tasks): the calling thread runs task 0, pool workers the others
// (the caller also runs any a worker has not started when task 0 is done: a worker preempted on
// a busy machine costs no more than oneTBB's caller running it), and it returns when all have (an
// exception from any task is rethrown here, after all have finished). False, with nothing run, when
// the pool cannot take the split now: tasks < 2 or more than the process has CPUs (usableCpus),
// another thread's split holds the pool, the caller is a pool worker itself, or the process forked
// since the pool started. The caller then splits with oneTBB, as before the pool.
bool forkJoin(int tasks, void (*body)(void* ctx, int task), void* ctx);

// How long an idle worker spins before it sleeps: 2 ms, or the environment's GEARBOX_SPIN_US
// (0 to 1,000,000; 0: sleep at once, roughly oneTBB's behaviour, to compare the two), as
// OMP_WAIT_POLICY and ONNX Runtime's allow_spinning do. Process-wide; returns the previous.
std::chrono::microseconds setForkJoinSpin(std::chrono::microseconds spin);

// The CPUs the calling thread may run on: its affinity mask (taskset, cgroup cpusets, a
// container's --cpuset-cpus), or hardware_concurrency() where the mask cannot be read. The pool
// takes at most this many tasks, counted when its first split starts: a worker spinning on a
// CPU the process may not use would take that time from the caller (`taskset -c 0` on a 2-CPU
// machine ran every 2-task split with the worker spinning on the caller's one CPU).
int usableCpus();

// For tests: the splits the pool ran and the workers it started, since the process started.
struct ForkJoinStats {
  long long runs = 0;
  int workers = 0;
  // Times a worker found itself on the CPU of the split's caller and moved off it.
  long long moves = 0;
};
ForkJoinStats forkJoinStats();

}  // namespace gearbox::detail
