#pragma once
// The simulated device. Two implementations behind one interface:
//  - InlineDevice runs each launched task in the calling thread (deterministic; tests);
//  - StreamDevice owns a real worker thread with an in-order launch queue: the host enqueues,
//    sync() waits for the queue to drain. Handoff costs are real and measured.
// Both count launches, syncs and device allocations identically; a task that throws has its
// exception delivered at the next sync(), as a device error surfaces at synchronisation.

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "executor/caching_allocator.h"

namespace gearbox {

struct DeviceCounters {
  int64_t launches = 0;       // kernel or whole-graph launches
  int64_t graphLaunches = 0;  // launches that carried a whole static graph
  int64_t syncs = 0;
  int64_t allocations = 0;  // allocation requests (every intermediate a call allocates)
  // Requests that needed a new segment (a device malloc, charged alloc_us); the rest were
  // served from cached blocks (executor/caching_allocator.h).
  int64_t poolMisses = 0;
  int64_t bytesAllocated = 0;     // bytes of every new segment
  int64_t peakBytesReserved = 0;  // most segment bytes held at once
  int64_t segmentReleases = 0;    // cached segments released to stay under the capacity
};

enum class DeviceKind { kInline, kStream };
const char* deviceKindName(DeviceKind k);

class Device {
 public:
  virtual ~Device() = default;
  // Enqueues one task. `graph` marks a whole-graph launch (static plans).
  void launch(std::function<void()> task, bool graph = false);
  // Waits until every launched task ran; rethrows the first task error.
  void sync();
  // Device memory from a caching allocator (executor/caching_allocator.h): requests are rounded
  // to 512 B blocks carved from 2 MiB / 20 MiB segments, released blocks are cached, split and
  // merged, and the segments held are bounded by `memoryCapacity`. Every request counts as an
  // allocation; a new segment is a pool miss. A zero-byte request gets a valid pointer to no
  // memory. When execution is off the addresses are not backed by host memory at all.
  void* allocate(size_t bytes);
  void release(void* p, size_t bytes);
  // Releases every wholly free cached segment (PyTorch's empty_cache).
  void releaseCachedMemory();
  const CachingAllocatorStats& memoryStats() const { return memory_.stats(); }
  const DeviceCounters& counters() const { return counters_; }
  virtual DeviceKind kind() const = 0;
  // false: launch() counts the task but does not run it (SessionOptions::modelOnly).
  void setExecute(bool execute) { execute_ = execute; }

 protected:
  virtual void enqueue(std::function<void()> task) = 0;
  virtual void drain() = 0;
  void recordError(std::exception_ptr e);
  std::mutex errMu_;
  std::exception_ptr error_;

 private:
  DeviceCounters counters_;
  bool execute_ = true;
  void applySegmentEvents();
  CachingAllocatorModel memory_;
  std::vector<CachingAllocatorModel::SegmentEvent> events_;
  // Host memory behind each segment (execution on), by segment base address.
  std::unordered_map<uint64_t, std::byte*> backing_;
  // Live blocks: the pointer handed out -> (device address, segment base).
  std::unordered_map<void*, std::pair<uint64_t, uint64_t>> live_;

 public:
  Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  void freePool();
};

class InlineDevice final : public Device {
 public:
  ~InlineDevice() override { freePool(); }
  DeviceKind kind() const override { return DeviceKind::kInline; }

 protected:
  void enqueue(std::function<void()> task) override;
  void drain() override {}
};

class StreamDevice final : public Device {
 public:
  StreamDevice();
  ~StreamDevice() override;
  DeviceKind kind() const override { return DeviceKind::kStream; }

 protected:
  void enqueue(std::function<void()> task) override;
  void drain() override;

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false, stop_ = false;
  std::thread worker_;
};

std::unique_ptr<Device> makeDevice(DeviceKind kind);

}  // namespace gearbox
