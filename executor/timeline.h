#pragma once
// Timeline: an event sink for what a Session did, written as Chrome trace event JSON
// ({"traceEvents": [...]}) that https://ui.perfetto.dev and chrome://tracing open
// (docs/timeline.md).
//
//   Timeline tl;                               // one per command; sessions share it
//   SessionOptions o; o.timeline = &tl;        // null (the default): nothing is recorded
//   ... run sessions ...
//   writeFileAtomic(path, tl.json());
//
// Two kinds of track, never mixed:
//  - host tracks (MEASURED): steady_clock times relative to the Timeline's creation: every
//    call, its plan lookup, graph compiles with their kernel compiles nested, the run with its
//    per-op launches (eager, dynamic, fallback), and in geared mode each gear's up-front
//    compile on a track of its own;
//  - a device track (MODELED): the cost model's per-call breakdown laid end to end on a clock
//    of its own that starts at 0 for each session, so the modes' modeled tracks line up.
//
// Every event is a complete ("X") event with ts and dur in microseconds, plus "M" metadata
// events naming processes and threads, so begin/end pairing can never go wrong. Thread-safe:
// geared mode compiles gears on oneTBB workers. Bounded: past `maxEvents` further events are
// counted in dropped() and left out (metadata is always kept).

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gearbox {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;
  using Args = std::vector<std::pair<std::string, std::string>>;  // shown as strings

  // Thread ids within a session's host process.
  static constexpr int kMainTid = 1;
  static constexpr int kGearTidBase = 100;  // gear g compiles on tid kGearTidBase + g
  static constexpr int kDeviceTid = 1;      // the modeled track in the device process

  static constexpr size_t kDefaultMaxEvents = 200000;
  explicit Timeline(size_t maxEvents = kDefaultMaxEvents);

  // A session's pair of processes: "<label> host (measured)" and "<label> device (MODELED)".
  // Returns the host pid; the device pid is host pid + 1.
  int addSession(const std::string& label);
  void nameThread(int pid, int tid, const std::string& name);

  // Measured microseconds since the Timeline was made.
  double nowUs() const { return sinceUs(Clock::now()); }
  double sinceUs(Clock::time_point t) const {
    return std::chrono::duration<double, std::micro>(t - origin_).count();
  }

  // One complete event. `cat` says its kind ("call", "lookup", "graph_compile",
  // "kernel_compile", "run", "launch", "gear_compile", "modeled"); tests count them.
  void complete(int pid, int tid, std::string name, const char* cat, double tsUs, double durUs,
                Args args = {});

  size_t size() const;
  int64_t dropped() const;
  // Count of events of one category (tests; the CLI's one-line summary).
  int64_t count(const std::string& cat) const;
  // The whole trace as JSON text.
  std::string json() const;

  // The host track the calling thread records on (kMainTid unless a gear compile set it).
  static int currentTid();
  // Sets the calling thread's track for its lifetime (a gear's compile task).
  class ScopedTid {
   public:
    explicit ScopedTid(int tid);
    ~ScopedTid();
    ScopedTid(const ScopedTid&) = delete;
    ScopedTid& operator=(const ScopedTid&) = delete;

   private:
    int previous_;
  };

 private:
  struct Event {
    char ph;  // 'X' or 'M'
    int pid, tid;
    std::string name;
    const char* cat;
    double ts, dur;
    Args args;
  };
  Clock::time_point origin_;
  size_t maxEvents_;
  mutable std::mutex mu_;
  // X events, bounded, kept as their JSON text in one growing buffer: one large allocation
  // instead of a few small long-lived ones per event, which interleaved with a run's big
  // tensors kept glibc's heap from ever shrinking (22 GB for 20000 mlp calls).
  std::string events_;
  size_t eventCount_ = 0;
  std::vector<std::pair<std::string, int64_t>> perCat_;  // events per category
  std::vector<Event> meta_;                              // M events, always kept
  int64_t dropped_ = 0;
  int nextPid_ = 1;
};

// A measured span on the calling thread's host track, recorded when it ends. Does nothing
// when `tl` is null, so an untraced session pays one pointer check.
class TimelineSpan {
 public:
  // `name` is copied only when recording, so an untraced span never allocates.
  TimelineSpan(Timeline* tl, int pid, const char* name, const char* cat)
      : tl_(tl), pid_(pid), cat_(cat) {
    if (tl_) {
      name_ = name;
      start_ = Timeline::Clock::now();
    }
  }
  ~TimelineSpan() { end(); }
  TimelineSpan(const TimelineSpan&) = delete;
  TimelineSpan& operator=(const TimelineSpan&) = delete;
  bool on() const { return tl_ != nullptr; }
  void setCat(const char* cat) { cat_ = cat; }
  void setName(std::string name) {
    if (tl_) name_ = std::move(name);
  }
  void arg(std::string_view key, std::string_view value) {
    if (tl_) args_.emplace_back(std::string(key), std::string(value));
  }
  // Records the span now (once); later calls and the destructor do nothing.
  void end();

 private:
  Timeline* tl_;
  int pid_;
  const char* cat_;
  std::string name_;
  Timeline::Clock::time_point start_;
  Timeline::Args args_;
};

}  // namespace gearbox
