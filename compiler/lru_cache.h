#pragma once
// Bounded LRU caches with stats. Every cache in gearbox (kernels, plans) is built on one shard
// type, LruShard, so each has a capacity, an eviction policy and the same counters. As in
// RocksDB (cache/sharded_cache.h), the shard is separate from the sharding: LruCache is one
// shard behind one lock (the plan cache); KernelCache (compiler/kernel_cache.h) spreads keys
// over several shards, each behind its own lock.

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

// One LRU list with its map and counters; not synchronised (the owner holds the lock). Keys are
// looked up with a hash the caller computed once (outside any lock). An entry may be *pinned*:
// present but not finished (a kernel being compiled) -- never evicted, not counted in size() or
// as an insert until unpinned.
template <typename Key, typename Value>
class LruShard {
 public:
  struct Entry;
  using List = std::list<Entry>;  // most recently used first; nodes never move in memory
  struct Entry {
    Key key;
    size_t hash;
    Value value;
    bool pinned;
    typename List::iterator self;  // this entry's node: O(1) touch and erase
  };

  explicit LruShard(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  // The entry for `key`, or nullptr; changes neither recency nor counters.
  Entry* find(const Key& key, size_t hash) {
    auto it = map_.find(Ref{&key, hash});
    return it == map_.end() ? nullptr : &*it->second;
  }
  const Entry* find(const Key& key, size_t hash) const {
    auto it = map_.find(Ref{&key, hash});
    return it == map_.end() ? nullptr : &*it->second;
  }
  // Makes `e` the most recently used.
  void touch(Entry* e) { order_.splice(order_.begin(), order_, iter(e)); }
  void countHit() { ++stats_.hits; }
  void countMiss() { ++stats_.misses; }

  // Inserts a new key (absent: the caller found nothing) as most recently used. Unpinned: counts
  // an insert and evicts past capacity. Returns the entry (stable until erased or evicted).
  Entry* insert(const Key& key, size_t hash, Value value, bool pinned = false) {
    order_.push_front(Entry{key, hash, std::move(value), pinned, {}});
    Entry* e = &order_.front();
    e->self = order_.begin();
    map_.emplace(Ref{&e->key, hash}, order_.begin());
    if (!pinned) finish();
    return e;
  }
  // Finishes a pinned entry: sets its value, makes it most recently used, counts the insert and
  // evicts past capacity (as if the finished value had been inserted now).
  void unpin(Entry* e, Value value) {
    e->value = std::move(value);
    e->pinned = false;
    touch(e);
    finish();
  }
  void erase(Entry* e) {
    if (!e->pinned) --ready_;
    map_.erase(Ref{&e->key, e->hash});
    order_.erase(iter(e));
  }
  void clear() {
    map_.clear();
    order_.clear();
    ready_ = 0;
  }
  // Evicts the least recently used finished entry, counted as an eviction; its value, or
  // nothing when every entry is pinned or the shard is empty.
  std::optional<Value> evictLeastRecent() {
    for (auto victim = order_.end(); victim != order_.begin();) {
      --victim;
      if (victim->pinned) continue;
      Value v = std::move(victim->value);
      map_.erase(Ref{&victim->key, victim->hash});
      order_.erase(victim);
      --ready_;
      ++stats_.evictions;
      return v;
    }
    return std::nullopt;
  }

  // Visits unpinned entries from most to least recently used.
  template <typename Fn>
  void forEach(Fn&& fn) const {
    for (const Entry& e : order_)
      if (!e.pinned) fn(e.key, e.value);
  }
  size_t size() const { return ready_; }
  size_t capacity() const { return capacity_; }
  CacheStats stats() const {
    CacheStats s = stats_;
    s.size = static_cast<int64_t>(ready_);
    s.capacity = static_cast<int64_t>(capacity_);
    return s;
  }

 private:
  // The map's keys point at the keys in the list nodes, so an insert copies a key once (kernel
  // keys hold a vector of shapes: they are the bulk of an insert's allocations).
  struct Ref {
    const Key* key;
    size_t hash;
  };
  struct RefHash {
    size_t operator()(const Ref& r) const { return r.hash; }
  };
  struct RefEq {
    bool operator()(const Ref& a, const Ref& b) const {
      return a.hash == b.hash && *a.key == *b.key;
    }
  };

  static typename List::iterator iter(Entry* e) { return e->self; }

  // One more finished entry; evict least recently used finished ones past capacity.
  void finish() {
    ++stats_.inserts;
    ++ready_;
    for (auto victim = order_.end(); ready_ > capacity_ && victim != order_.begin();) {
      --victim;
      if (victim->pinned) continue;
      map_.erase(Ref{&victim->key, victim->hash});
      victim = order_.erase(victim);
      --ready_;
      ++stats_.evictions;
    }
  }

  size_t capacity_;
  size_t ready_ = 0;  // unpinned entries
  List order_;
  std::unordered_map<Ref, typename List::iterator, RefHash, RefEq> map_;
  CacheStats stats_;
};

// A thread-safe LRU cache: one LruShard behind one lock.
template <typename Key, typename Value, typename Hash = std::hash<Key>, typename Mutex = std::mutex>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : shard_(capacity) {}

  // Returns the cached value (moving it to most-recently-used) and counts a hit or a miss.
  std::optional<Value> get(const Key& key) {
    const size_t h = Hash{}(key);
    std::lock_guard<Mutex> lock(mu_);
    auto* e = shard_.find(key, h);
    if (!e) {
      shard_.countMiss();
      return std::nullopt;
    }
    shard_.countHit();
    shard_.touch(e);
    return e->value;
  }

  // Looks up without touching stats or recency (for diagnostics).
  std::optional<Value> peek(const Key& key) const {
    const size_t h = Hash{}(key);
    std::lock_guard<Mutex> lock(mu_);
    const auto* e = shard_.find(key, h);
    if (!e) return std::nullopt;
    return e->value;
  }

  // Inserts (or replaces) and evicts the least-recently-used entry past capacity.
  void put(const Key& key, Value value) {
    const size_t h = Hash{}(key);
    std::lock_guard<Mutex> lock(mu_);
    if (auto* e = shard_.find(key, h)) {
      e->value = std::move(value);
      shard_.touch(e);
      return;
    }
    shard_.insert(key, h, std::move(value));
  }

  // Evicts the least-recently-used entry (to make room for something other than an entry:
  // device memory, --on-oom evict); its value, or nothing when the cache is empty.
  std::optional<Value> evictLeastRecent() {
    std::lock_guard<Mutex> lock(mu_);
    return shard_.evictLeastRecent();
  }

  // Visits entries from most to least recently used.
  template <typename Fn>
  void forEach(Fn&& fn) const {
    std::lock_guard<Mutex> lock(mu_);
    shard_.forEach(fn);
  }

  CacheStats stats() const {
    std::lock_guard<Mutex> lock(mu_);
    return shard_.stats();
  }
  size_t size() const {
    std::lock_guard<Mutex> lock(mu_);
    return shard_.size();
  }
  size_t capacity() const { return shard_.capacity(); }
  void clear() {
    std::lock_guard<Mutex> lock(mu_);
    shard_.clear();
  }

 private:
  mutable Mutex mu_;
  LruShard<Key, Value> shard_;
};

}  // namespace gearbox
