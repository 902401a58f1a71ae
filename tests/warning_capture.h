#pragma once
// Collects the warnings of compileLogger() while alive, for tests that assert what was warned.
// Tests run on one thread, so editing the logger's sink list here cannot race with a log call.

#include <spdlog/sinks/base_sink.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compiler/compile_log.h"

namespace gearbox::testing_util {

class WarningCapture {
 public:
  WarningCapture() : sink_(std::make_shared<Sink>()) {
    sink_->set_level(spdlog::level::warn);
    compileLogger()->sinks().push_back(sink_);
  }
  ~WarningCapture() {
    auto& sinks = compileLogger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  std::vector<std::string> messages() const {
    std::lock_guard lock(sink_->mu);
    return sink_->lines;
  }

 private:
  struct Sink : spdlog::sinks::base_sink<std::mutex> {
    std::mutex mu;
    std::vector<std::string> lines;
    void sink_it_(const spdlog::details::log_msg& msg) override {
      std::lock_guard lock(mu);
      lines.emplace_back(msg.payload.data(), msg.payload.size());
    }
    void flush_() override {}
  };
  std::shared_ptr<Sink> sink_;
};

}  // namespace gearbox::testing_util
