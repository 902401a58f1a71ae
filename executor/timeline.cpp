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

void Timeline::complete(int pid, int tid, std::string name, const char* cat, double tsUs,
                        double durUs, Args args) {
  std::lock_guard lock(mu_);
  if (events_.size() >= maxEvents_) {
    ++dropped_;
    return;
  }
  events_.push_back({'X', pid, tid, std::move(name), cat, std::max(0.0, tsUs), std::max(0.0, durUs),
                     std::move(args)});
}

size_t Timeline::size() const {
  std::lock_guard lock(mu_);
  return events_.size();
}

int64_t Timeline::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

int64_t Timeline::count(const std::string& cat) const {
  std::lock_guard lock(mu_);
  return std::count_if(events_.begin(), events_.end(),
                       [&](const Event& e) { return cat == e.cat; });
}

std::string Timeline::json() const {
  std::lock_guard lock(mu_);
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  auto add = [&](const Event& e) {
    nlohmann::ordered_json j;
    j["name"] = e.name;
    j["ph"] = std::string(1, e.ph);
    j["pid"] = e.pid;
    j["tid"] = e.tid;
    if (e.ph == 'X') {
      j["cat"] = e.cat;
      j["ts"] = e.ts;
      j["dur"] = e.dur;
    }
    nlohmann::ordered_json args = nlohmann::ordered_json::object();
    for (const auto& [k, v] : e.args) {
      // sort_index must be a number for the viewers to use it.
      if (k == "sort_index")
        args[k] = std::stoi(v);
      else
        args[k] = v;
    }
    if (!args.empty() || e.ph == 'M') j["args"] = std::move(args);
    events.push_back(std::move(j));
  };
  for (const Event& e : meta_) add(e);
  for (const Event& e : events_) add(e);
  nlohmann::ordered_json doc;
  doc["traceEvents"] = std::move(events);
  doc["displayTimeUnit"] = "ns";
  doc["otherData"] = {
      {"tool", "gearbox"},
      {"host_tracks", "measured: steady_clock microseconds since the command started"},
      {"device_tracks",
       "MODELED: the device profile's per-call breakdown laid end to end, microseconds from 0 "
       "per session (docs/cost-model.md)"},
      {"dropped_events", dropped_},
      {"max_events", maxEvents_}};
  // Replace invalid UTF-8 from outside (model names) instead of throwing.
  return doc.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

void TimelineSpan::end() {
  if (!tl_) return;
  const auto stop = Timeline::Clock::now();
  tl_->complete(pid_, Timeline::currentTid(), std::move(name_), cat_, tl_->sinceUs(start_),
                std::chrono::duration<double, std::micro>(stop - start_).count(), std::move(args_));
  tl_ = nullptr;
}

}  // namespace gearbox
