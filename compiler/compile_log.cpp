#include "compiler/compile_log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "graph/error.h"

namespace gearbox {

namespace {
std::shared_ptr<spdlog::logger> makeDefault() {
  auto err = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  err->set_level(spdlog::level::warn);
  err->set_pattern("gearbox: %l: %v");
  auto logger = std::make_shared<spdlog::logger>("gearbox", err);
  // The logger's level is the lowest any sink wants: with only the stderr sink, info lines
  // (one per compile) are not even formatted.
  logger->set_level(spdlog::level::warn);
  return logger;
}
}  // namespace

const std::shared_ptr<spdlog::logger>& compileLogger() {
  static std::shared_ptr<spdlog::logger> logger = makeDefault();
  return logger;
}

void configureLogging(const LogOptions& options) {
  const auto& logger = compileLogger();
  std::vector<spdlog::sink_ptr> sinks;
  if (!options.quiet) {
    auto err = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    err->set_level(spdlog::level::warn);
    err->set_pattern("gearbox: %l: %v");
    sinks.push_back(err);
  }
  if (options.toStdout) {
    auto out = std::make_shared<spdlog::sinks::stdout_sink_mt>();
    out->set_level(spdlog::level::info);
    out->set_pattern("[%l] %v");
    sinks.push_back(out);
  }
  if (!options.file.empty()) {
    try {
      auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.file, true);
      file->set_level(spdlog::level::info);
      file->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
      sinks.push_back(file);
    } catch (const spdlog::spdlog_ex& e) {
      fail(ErrorKind::kIo, "cannot open log file {}: {}", options.file, e.what());
    }
  }
  const bool wantsInfo = options.toStdout || !options.file.empty();
  logger->sinks() = std::move(sinks);
  logger->set_level(wantsInfo ? spdlog::level::info : spdlog::level::warn);
  logger->flush_on(spdlog::level::info);
}

}  // namespace gearbox
