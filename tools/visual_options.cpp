#include "tools/visual_options.h"

#include <fmt/format.h>

#include <filesystem>
#include <ostream>

#include "graph/error.h"
#include "graph/file_io.h"
#include "driver/run_report.h"

namespace gearbox::cli {

void addTimelineOptions(CLI::App* cmd, VisualOptions& v) {
  cmd->add_option("--timeline", v.timeline,
                  "Write a timeline of the run as Chrome trace event JSON (open it in "
                  "https://ui.perfetto.dev or chrome://tracing; docs/timeline.md)");
  cmd->add_option("--timeline-max-events", v.timelineMaxEvents,
                  "Events the timeline keeps at most; later ones are counted as dropped")
      ->check(CLI::Range(1.0, 1e8));
}

void addHtmlOption(CLI::App* cmd, VisualOptions& v) {
  cmd->add_option("--html", v.html,
                  "Write a self-contained HTML report with SVG plots (no network needed)");
}

void VisualOptions::prepare() {
  if (!timeline.empty()) {
    checkOutputPath("--timeline", timeline);
    sink = std::make_unique<Timeline>(timelineMaxEvents);
  }
  if (!html.empty()) checkOutputPath("--html", html);
}

void VisualOptions::attach(SessionOptions& s, const std::string& label) const {
  if (!sink) return;
  s.timeline = sink.get();
  s.timelineLabel = label;
}

void VisualOptions::writeTimeline(std::ostream& os) const {
  if (!sink) return;
  writeFileAtomic(timeline, sink->json());
  os << fmt::format(
      "timeline: {} ({} events{}; open in https://ui.perfetto.dev)\n", timeline, sink->size(),
      sink->dropped() ? fmt::format(", {} dropped past --timeline-max-events", sink->dropped())
                      : "");
}

}  // namespace gearbox::cli
