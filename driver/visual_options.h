#pragma once
// The options that make something to look at: --timeline FILE (run, compare) writes Chrome
// trace event JSON (executor/timeline.h, docs/timeline.md) and --html FILE (compare) a
// self-contained report page (driver/html_report.h). In the driver, not tools/: gearbox.run and
// gearbox.compare_report write them as the CLI does.

#include <memory>
#include <ostream>
#include <string>

#include "executor/session.h"

namespace gearbox::cli {

struct RunOptions;

// The options are rows of driver/run_options.def; prepare() copies them from RunOptions.
struct VisualOptions {
  std::string timeline;  // --timeline FILE
  size_t timelineMaxEvents = Timeline::kDefaultMaxEvents;
  std::string html;  // --html FILE (compare)
  // The timeline the sessions record into; made by prepare() when --timeline is given.
  std::unique_ptr<Timeline> sink;

  // Checks the output paths before anything runs (a directory that does not exist is found
  // in milliseconds, not after the trace) and makes the timeline. Error(kConfig).
  void prepare(const RunOptions& o);
  // Points `s` at the timeline (when --timeline is given), naming the session's processes.
  void attach(SessionOptions& s, const std::string& label) const;
  // Writes the timeline atomically and says so on `os` (with any dropped events).
  void writeTimeline(std::ostream& os) const;
};

}  // namespace gearbox::cli
