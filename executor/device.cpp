#include "executor/device.h"

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

void* Device::allocate(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64 + 64;
  ++counters_.allocations;
  auto& free = pool_[rounded];
  if (!free.empty()) {
    void* p = free.back();
    free.pop_back();
    return p;
  }
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  owned_.emplace_back(p, rounded);
  ++counters_.poolMisses;
  counters_.bytesAllocated += static_cast<int64_t>(rounded);
  return p;
}

void Device::release(void* p, size_t bytes) {
  if (!p) return;
  pool_[(bytes + 63) / 64 * 64 + 64].push_back(p);
}

void Device::freePool() {
  for (auto& [p, n] : owned_) std::free(p);
  owned_.clear();
  pool_.clear();
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
