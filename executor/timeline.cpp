#include "executor/timeline.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace gearbox {

namespace {
// The host track of the calling thread; a gear compile task sets its own for its duration.
thread_local int tCurrentTid = Timeline::kMainTid;
}  // namespace

Timeline::Timeline(size_t maxEvents) : origin_(Clock::now()), maxEvents_(maxEvents) {}

int Timeline::currentTid() {
  return tCurrentTid;
}

Timeline::ScopedTid::ScopedTid(int tid) : previous_(tCurrentTid) {
  tCurrentTid = tid;
}

Timeline::ScopedTid::~ScopedTid() {
  tCurrentTid = previous_;
}

int Timeline::addSession(const std::string& label) {
  std::lock_guard lock(mu_);
  const int pid = nextPid_;
  nextPid_ += 2;
  // sort_index keeps a session's host and device processes together, in creation order.
  auto process = [&](int p, const std::string& name) {
    meta_.push_back({'M', p, 0, "process_name", "", 0, 0, {{"name", name}}});
    meta_.push_back(
        {'M', p, 0, "process_sort_index", "", 0, 0, {{"sort_index", std::to_string(p)}}});
  };
  process(pid, label + " host (measured)");
  process(pid + 1, label + " device (MODELED)");
  meta_.push_back({'M', pid, kMainTid, "thread_name", "", 0, 0, {{"name", "host"}}});
  meta_.push_back(
      {'M', pid + 1, kDeviceTid, "thread_name", "", 0, 0, {{"name", "modeled device time"}}});
  return pid;
}

void Timeline::nameThread(int pid, int tid, const std::string& name) {
  std::lock_guard lock(mu_);
  meta_.push_back({'M', pid, tid, "thread_name", "", 0, 0, {{"name", name}}});
}

namespace {

nlohmann::ordered_json eventJson(char ph, int pid, int tid, const std::string& name,
                                 const char* cat, double ts, double dur,
                                 const Timeline::Args& args) {
  nlohmann::ordered_json j;
  j["name"] = name;
  j["ph"] = std::string(1, ph);
  j["pid"] = pid;
  j["tid"] = tid;
  if (ph == 'X') {
    j["cat"] = cat;
    j["ts"] = ts;
    j["dur"] = dur;
  }
  nlohmann::ordered_json a = nlohmann::ordered_json::object();
  for (const auto& [k, v] : args) {
    // sort_index must be a number for the viewers to use it.
    if (k == "sort_index")
      a[k] = std::stoi(v);
    else
      a[k] = v;
  }
  if (!a.empty() || ph == 'M') j["args"] = std::move(a);
  return j;
}

// Replaces invalid UTF-8 from outside (model names) instead of throwing.
std::string dumpJson(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace

void Timeline::complete(int pid, int tid, std::string name, const char* cat, double tsUs,
                        double durUs, Args args) {
  // Serialised outside the lock; only the append is inside.
  const std::string text = dumpJson(
      eventJson('X', pid, tid, name, cat, std::max(0.0, tsUs), std::max(0.0, durUs), args));
  std::lock_guard lock(mu_);
  if (eventCount_ >= maxEvents_) {
    ++dropped_;
    return;
  }
  if (!events_.empty()) events_ += ",\n";
  events_ += text;
  ++eventCount_;
  auto it =
      std::find_if(perCat_.begin(), perCat_.end(), [&](const auto& c) { return c.first == cat; });
  if (it == perCat_.end())
    perCat_.emplace_back(cat, 1);
  else
    ++it->second;
}

size_t Timeline::size() const {
  std::lock_guard lock(mu_);
  return eventCount_;
}

int64_t Timeline::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

int64_t Timeline::count(const std::string& cat) const {
  std::lock_guard lock(mu_);
  for (const auto& [name, n] : perCat_)
    if (name == cat) return n;
  return 0;
}

std::string Timeline::json() const {
  std::lock_guard lock(mu_);
  nlohmann::ordered_json other = {
      {"tool", "gearbox"},
      {"host_tracks", "measured: steady_clock microseconds since the command started"},
      {"device_tracks",
       "MODELED: the device profile's per-call breakdown laid end to end, microseconds from 0 "
       "per session (docs/cost-model.md)"},
      {"dropped_events", dropped_},
      {"max_events", maxEvents_}};
  std::string out = "{\"traceEvents\": [\n";
  bool first = true;
  for (const Event& e : meta_) {
    out += first ? "" : ",\n";
    out += dumpJson(eventJson(e.ph, e.pid, e.tid, e.name, e.cat, e.ts, e.dur, e.args));
    first = false;
  }
  if (!events_.empty()) {
    out += first ? "" : ",\n";
    out += events_;
  }
  out += "\n], \"displayTimeUnit\": \"ns\", \"otherData\": " + dumpJson(other) + "}\n";
  return out;
}

void TimelineSpan::end() {
  if (!tl_) return;
  const auto stop = Timeline::Clock::now();
  tl_->complete(pid_, Timeline::currentTid(), std::move(name_), cat_, tl_->sinceUs(start_),
                std::chrono::duration<double, std::micro>(stop - start_).count(), std::move(args_));
  tl_ = nullptr;
}

}  // namespace gearbox
