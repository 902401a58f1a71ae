#pragma once
// The compile log: one spdlog logger ("gearbox") that every component writes to.
//
// Lines the seed 000 workflow depends on are written verbatim at info level:
//   To compile op: <kernel name>            (one per kernel compile)
//   To compile op|=====iter<N>              (--iter-markers, before iteration N)
// Plan compiles log one line with their reason. By default the logger only prints warnings to
// stderr; `--log FILE` and `--log-stdout` add info-level sinks.

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace gearbox {

// Returned by reference: compiles on several threads read it, and copying the shared_ptr would
// make every compile write its reference count.
const std::shared_ptr<spdlog::logger>& compileLogger();

struct LogOptions {
  std::string file;       // "" = no file sink
  bool toStdout = false;  // info-level lines on stdout as well
  bool quiet = false;     // suppress warnings on stderr
};
// Replaces the logger's sinks. A file that cannot be opened is an Error(kIo).
void configureLogging(const LogOptions& options);

}  // namespace gearbox
