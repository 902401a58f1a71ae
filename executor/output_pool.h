#pragma once
// The host memory of the tensors a static plan returns (static, auto and geared calls), kept
// between calls. A plan writes every element of its outputs, so an output needs memory, not
// zeros: a fresh Tensor per call paid for a memset below 1 MiB and fresh mmap'd pages from
// 1 MiB, faulted in again on every call (a one-op relu plan on [1, 3, 224, 224], 600 KB out,
// took 214-300 us a call, most of it the output's page faults; docs/performance.md). The pool
// hands out buffers whose pages are already resident, so a trace of repeated shapes stops
// faulting after its first call.
//
// Policy. A buffer returns to the pool when the last Tensor over it is dropped (its deleter);
// free buffers are kept by their rounded size and served exactly (a request takes the most
// recently freed buffer of its size: its pages are the likeliest still in cache). Sizes are
// rounded up to 64 bytes below 64 KiB and to 4 KiB above, so shapes a few elements apart share
// buffers. The free buffers' bytes are bounded by the capacity: a buffer returned past it evicts
// the least recently freed buffers first (freed to the C heap; the one just returned counts as
// the most recent, and a buffer larger than the whole capacity is never kept). Capacity 0 turns
// the pool off: every request is a fresh zeroed Tensor, as every output was before the pool.
//
// Lifetime. Tensors may outlive the Session (Python keeps results): the pool's state is shared
// with every buffer it handed out and freed with the last of them. Thread-safe: a tensor may be
// dropped on any thread.
//
// Contents. A served buffer holds whatever its last user wrote. A poisoning pool fills every
// buffer it serves, fresh or reused, with 0xFF bytes (NaN for floats, -1 for integers) first, so
// a kernel that reads its output before writing it, or leaves part of it unwritten, fails the
// differential tests instead of passing on the previous call's values. Sessions' pools poison in
// builds with assertions (the sanitized CI flavours: kPoisonByDefault).

#include <cstddef>
#include <cstdint>
#include <memory>

#include "graph/tensor.h"

namespace gearbox {

struct OutputPoolStats {
  int64_t requests = 0;   // buffers asked for
  int64_t hits = 0;       // served from a free buffer of the same rounded size
  int64_t misses = 0;     // fresh allocations (a miss with capacity 0 too)
  int64_t evictions = 0;  // free buffers released to stay within the capacity
  int64_t buffersCached = 0;
  int64_t bytesCached = 0;  // free buffers' bytes held now (<= capacity)
  int64_t peakBytesCached = 0;
  int64_t capacityBytes = 0;
};

class OutputPool {
 public:
  static constexpr size_t kDefaultCapacity = size_t{256} << 20;
#ifdef NDEBUG
  static constexpr bool kPoisonByDefault = false;
#else
  static constexpr bool kPoisonByDefault = true;  // builds with assertions (above)
#endif

  // poison: fill every buffer served with 0xFF bytes (above).
  explicit OutputPool(size_t capacityBytes = kDefaultCapacity, bool poison = kPoisonByDefault);
  ~OutputPool();
  OutputPool(const OutputPool&) = delete;
  OutputPool& operator=(const OutputPool&) = delete;

  // A tensor of `dtype` and `shape` (static) whose contents are unspecified: the caller writes
  // every element. Its memory returns to the pool when the last copy of it is dropped.
  Tensor take(DType dtype, const Shape& shape);

  OutputPoolStats stats() const;

  // The size a request of `bytes` is served at (the rounding above).
  static size_t roundedSize(size_t bytes);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace gearbox
