#include "executor/output_pool.h"

#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <new>
#include <unordered_map>

#include "graph/checked.h"
#include "graph/error.h"

namespace gearbox {

namespace {
constexpr size_t kPageRoundFrom = size_t{64} << 10;
// Past its rounded size every buffer has a spare cache line, as Tensor's own storage does.
constexpr size_t kSlack = 64;
}  // namespace

struct OutputPool::State {
  struct FreeBuffer {
    size_t size;  // rounded
    std::byte* data;
  };
  using List = std::list<FreeBuffer>;  // most recently freed first

  State(size_t capacity, bool poison) : capacity(capacity), poison(poison) {}
  ~State() {
    for (const FreeBuffer& b : lru) std::free(b.data);
  }

  // A buffer the last tensor over it dropped: kept, most recent first, then the least recently
  // freed evicted past the capacity. Never throws (a deleter).
  void release(std::byte* p, size_t size) noexcept {
    const std::lock_guard<std::mutex> lock(mutex);
    if (size > capacity) {
      std::free(p);
      return;
    }
    try {
      lru.push_front(FreeBuffer{size, p});
      try {
        bySize[size].push_back(lru.begin());
      } catch (...) {
        lru.pop_front();
        throw;
      }
    } catch (...) {
      std::free(p);  // no memory for the bookkeeping: not kept
      return;
    }
    stats.bytesCached += static_cast<int64_t>(size);
    stats.buffersCached++;
    while (stats.bytesCached > static_cast<int64_t>(capacity)) {
      const FreeBuffer oldest = lru.back();
      // The oldest buffer of the pool is the oldest of its size: the front of its queue.
      auto it = bySize.find(oldest.size);
      it->second.pop_front();
      if (it->second.empty()) bySize.erase(it);
      lru.pop_back();
      std::free(oldest.data);
      stats.bytesCached -= static_cast<int64_t>(oldest.size);
      stats.buffersCached--;
      stats.evictions++;
    }
    if (stats.bytesCached > stats.peakBytesCached) stats.peakBytesCached = stats.bytesCached;
  }

  std::mutex mutex;
  const size_t capacity;
  const bool poison;
  List lru;
  std::unordered_map<size_t, std::deque<List::iterator>> bySize;  // oldest first
  OutputPoolStats stats;
};

OutputPool::OutputPool(size_t capacityBytes, bool poison)
    : state_(std::make_shared<State>(capacityBytes, poison)) {
  state_->stats.capacityBytes = static_cast<int64_t>(capacityBytes);
}

OutputPool::~OutputPool() = default;

size_t OutputPool::roundedSize(size_t bytes) {
  const size_t unit = bytes >= kPageRoundFrom ? 4096 : 64;
  return (bytes + unit - 1) / unit * unit;
}

Tensor OutputPool::take(DType dtype, const Shape& shape) {
  if (!shape.isStatic())
    fail(ErrorKind::kShape, "cannot allocate a tensor of non-static shape {}", shape.toString());
  if (state_->capacity == 0) {
    // Off: a Tensor of its own, as every output was before the pool (zeroed; fresh mmap'd
    // pages from 1 MiB), so --output-pool 0 measures what the pool saves.
    {
      const std::lock_guard<std::mutex> lock(state_->mutex);
      state_->stats.requests++;
      state_->stats.misses++;
    }
    return Tensor(dtype, shape);
  }
  const auto bytes = static_cast<size_t>(checkedBytes(shape, dtype, "tensor"));
  const size_t size = roundedSize(bytes);
  std::byte* p = nullptr;
  {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stats.requests++;
    auto it = state_->bySize.find(size);
    if (it != state_->bySize.end()) {
      const State::List::iterator node = it->second.back();
      it->second.pop_back();
      if (it->second.empty()) state_->bySize.erase(it);
      p = node->data;
      state_->lru.erase(node);
      state_->stats.hits++;
      state_->stats.buffersCached--;
      state_->stats.bytesCached -= static_cast<int64_t>(size);
    } else {
      state_->stats.misses++;
    }
  }
  if (!p) {
    p = static_cast<std::byte*>(std::aligned_alloc(64, size + kSlack));
    if (!p) throw std::bad_alloc();
  }
  if (state_->poison) std::memset(p, 0xFF, size);
  // shared_ptr's constructor calls the deleter (back to the pool) when it cannot allocate.
  std::shared_ptr<std::byte> data(
      p, [state = state_, size](std::byte* q) { state->release(q, size); });
  return Tensor::wrap(dtype, shape, std::move(data));
}

OutputPoolStats OutputPool::stats() const {
  const std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

}  // namespace gearbox
