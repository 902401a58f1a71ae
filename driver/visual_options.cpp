#include "driver/visual_options.h"

#include <fmt/format.h>

#include <filesystem>
#include <ostream>

#include "driver/run_options.h"
#include "driver/run_report.h"
#include "graph/error.h"
#include "graph/file_io.h"

namespace gearbox::cli {

void VisualOptions::prepare(const RunOptions& o) {
  timeline = o.timeline;
  timelineMaxEvents = o.timelineMaxEvents;
  html = o.html;
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
