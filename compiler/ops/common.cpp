// Helpers shared by the per-op compiler files (compiler/ops/op_hooks.h).
#include <fmt/format.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>

#include "compiler/ops/op_hooks.h"

namespace gearbox::ops {

int64_t product(const Shape& s, int begin, int end) {
  int64_t p = 1;
  for (int i = begin; i < end; ++i) p *= s[i];
  return p;
}

namespace {
// The cap of the key being compiled on this thread (TaskCapScope); 0 = none.
thread_local int taskCap = 0;
}  // namespace

TaskCapScope::TaskCapScope(int threads) : previous_(taskCap) {
  taskCap = threads;
}
TaskCapScope::~TaskCapScope() {
  taskCap = previous_;
}

int decideTasks(double work, double threshold) {
  // Thread start-up would cost more than it saves below the threshold.
  if (!(work >= 2 * threshold)) return 1;
  const int maxTasks = taskCap > 0 ? taskCap : std::max(1, tbb::this_task_arena::max_concurrency());
  return static_cast<int>(std::min<double>(maxTasks, std::floor(work / threshold)));
}

void raiseTasksByFlops(KernelSpec& spec, double flops) {
  spec.tasks = std::max(spec.tasks, decideTasks(flops, kParallelFlopThreshold));
}

bool useStreamingStores(double outBytes, double rowBytes) {
  return outBytes >= kStreamingStoreBytes && rowBytes >= kStreamingRowBytes;
}

double elementBytes(const TensorType& t) {
  double n = 1;
  for (int64_t d : t.shape) n *= d >= 0 ? static_cast<double>(d) : 1.0;
  return n * static_cast<double>(dtypeSize(t.dtype));
}

void paramsMismatch(const KernelSpec& spec, std::string_view what) {
  if (what.empty())
    fail(ErrorKind::kIo, "{} params do not fit the key", opKernelName(spec.key.kind));
  fail(ErrorKind::kIo, "{} params do not fit the key: {}", opKernelName(spec.key.kind), what);
}

}  // namespace gearbox::ops
