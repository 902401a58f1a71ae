#include "executor/device.h"

#include <cstdint>
#include <cstdlib>
#include <new>

namespace gearbox {

const char* deviceKindName(DeviceKind k) {
  return k == DeviceKind::kInline ? "inline" : "stream";
}

void Device::launch(std::function<void()> task, bool graph) {
  ++counters_.launches;
  if (graph) ++counters_.graphLaunches;
  if (execute_) enqueue(std::move(task));
}

void Device::sync() {
  ++counters_.syncs;
  drain();
  std::exception_ptr e;
  {
    std::lock_guard lock(errMu_);
    std::swap(e, error_);
  }
  if (e) std::rethrow_exception(e);
}

void Device::recordError(std::exception_ptr e) {
  std::lock_guard lock(errMu_);
  if (!error_) error_ = e;  // the first error wins, as a stream reports its first fault
}

namespace {
// What a zero-byte request points at: valid, aligned, never read or written.
alignas(64) std::byte zeroBytes[64];
}  // namespace

void* Device::allocate(size_t bytes) {
  ++counters_.allocations;
  if (bytes == 0) return zeroBytes;
  const CachingAllocatorModel::Allocation a = memory_.allocate(bytes, &events_);
  applySegmentEvents();
  const CachingAllocatorStats& st = memory_.stats();
  counters_.poolMisses = st.segmentAllocs;
  counters_.bytesAllocated = st.bytesReservedTotal;
  counters_.peakBytesReserved = st.peakBytesReserved;
  counters_.segmentReleases = st.segmentReleases;
  void* p = nullptr;
  if (execute_) {
    p = backing_.at(a.segment) + (a.address - a.segment);
  } else {
    // Unbacked: the device address itself, unique and never dereferenced (no kernel runs).
    p = reinterpret_cast<void*>(static_cast<uintptr_t>(a.address));
  }
  live_.emplace(p, std::make_pair(a.address, a.segment));
  return p;
}

void Device::release(void* p, size_t bytes) {
  if (!p || bytes == 0) return;
  auto it = live_.find(p);
  if (it == live_.end()) return;
  memory_.free(it->second.first);
  live_.erase(it);
}

void Device::releaseCachedMemory() {
  memory_.releaseCached(&events_);
  applySegmentEvents();
  counters_.segmentReleases = memory_.stats().segmentReleases;
}

void Device::applySegmentEvents() {
  if (events_.empty()) return;
  if (execute_) {
    // Freeing a segment's memory waits for the launches queued on it, as cudaFree does.
    bool drained = false;
    for (const auto& e : events_) {
      if (e.allocated) {
        // 64 bytes past the end, as host tensors have, for kernels' vector tails.
        auto* m = static_cast<std::byte*>(std::aligned_alloc(64, e.bytes + 64));
        if (!m) throw std::bad_alloc();
        backing_.emplace(e.base, m);
      } else {
        if (!drained) drain();
        drained = true;
        auto it = backing_.find(e.base);
        if (it != backing_.end()) {
          std::free(it->second);
          backing_.erase(it);
        }
      }
    }
  }
  events_.clear();
}

void Device::freePool() {
  for (auto& [base, m] : backing_) std::free(m);
  backing_.clear();
  live_.clear();
}

void InlineDevice::enqueue(std::function<void()> task) {
  try {
    task();
  } catch (...) {
    recordError(std::current_exception());
  }
}

StreamDevice::StreamDevice() : worker_([this] { loop(); }) {}

StreamDevice::~StreamDevice() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  worker_.join();
  freePool();
}

void StreamDevice::enqueue(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void StreamDevice::drain() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void StreamDevice::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty() && stop_) return;
    auto task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    try {
      task();
    } catch (...) {
      recordError(std::current_exception());
    }
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

std::unique_ptr<Device> makeDevice(DeviceKind kind) {
  if (kind == DeviceKind::kStream) return std::make_unique<StreamDevice>();
  return std::make_unique<InlineDevice>();
}

}  // namespace gearbox
