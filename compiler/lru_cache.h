#pragma once
// A bounded LRU cache with stats. Every cache in gearbox (kernels, plans) is one of these, so
// each has a capacity, an eviction policy and the same counters.

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace gearbox {

struct CacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t evictions = 0;
  int64_t inserts = 0;  // = compiles for kernel and plan caches
  int64_t size = 0;
  int64_t capacity = 0;
};

template <typename Key, typename Value, typename Hash = std::hash<Key>, typename Mutex = std::mutex>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  // Returns the cached value (moving it to most-recently-used) and counts a hit or a miss.
  std::optional<Value> get(const Key& key) {
    std::lock_guard<Mutex> lock(mu_);
    auto it = map_.find(KeyRef{&key});
    if (it == map_.end()) {
      ++stats_.misses;
      return std::nullopt;
    }
    ++stats_.hits;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }

  // Looks up without touching stats or recency (for diagnostics).
  std::optional<Value> peek(const Key& key) const {
    std::lock_guard<Mutex> lock(mu_);
    auto it = map_.find(KeyRef{&key});
    if (it == map_.end()) return std::nullopt;
    return it->second->second;
  }

  // Inserts (or replaces) and evicts the least-recently-used entry past capacity.
  void put(const Key& key, Value value) {
    std::lock_guard<Mutex> lock(mu_);
    auto it = map_.find(KeyRef{&key});
    if (it != map_.end()) {
      it->second->second = std::move(value);
      order_.splice(order_.begin(), order_, it->second);
      return;
    }
    order_.emplace_front(key, std::move(value));
    map_.emplace(KeyRef{&order_.front().first}, order_.begin());
    ++stats_.inserts;
    while (map_.size() > capacity_) {
      map_.erase(KeyRef{&order_.back().first});
      order_.pop_back();
      ++stats_.evictions;
    }
  }

  // Visits entries from most to least recently used.
  template <typename Fn>
  void forEach(Fn&& fn) const {
    std::lock_guard<Mutex> lock(mu_);
    for (const auto& [k, v] : order_) fn(k, v);
  }

  CacheStats stats() const {
    std::lock_guard<Mutex> lock(mu_);
    CacheStats s = stats_;
    s.size = static_cast<int64_t>(map_.size());
    s.capacity = static_cast<int64_t>(capacity_);
    return s;
  }
  size_t size() const {
    std::lock_guard<Mutex> lock(mu_);
    return map_.size();
  }
  size_t capacity() const { return capacity_; }
  void clear() {
    std::lock_guard<Mutex> lock(mu_);
    map_.clear();
    order_.clear();
  }

 private:
  // The map's keys point at the keys stored in the list nodes (list nodes never move), so
  // an insert copies the key once, not twice; keys (kernel keys hold a vector of shapes) are
  // the bulk of an insert's allocations.
  struct KeyRef {
    const Key* key;
  };
  struct RefHash {
    Hash hash;
    size_t operator()(const KeyRef& r) const { return hash(*r.key); }
  };
  struct RefEq {
    bool operator()(const KeyRef& a, const KeyRef& b) const { return *a.key == *b.key; }
  };
  using List = std::list<std::pair<Key, Value>>;

  size_t capacity_;
  mutable Mutex mu_;
  List order_;
  std::unordered_map<KeyRef, typename List::iterator, RefHash, RefEq> map_;
  CacheStats stats_;
};

}  // namespace gearbox
