#pragma once
// `gearbox compare --html FILE`: one self-contained HTML page (inline CSS and inline SVG made
// here; no script, font or image from the network) with the side-by-side table and plots:
// cumulative graph and kernel compiles per mode over the iterations, measured per-call time
// per mode (median and min-max band over --repeat), MODELED per-call time, padding waste per
// gear (geared), and the MODELED breakdown per mode as stacked bars. With --sweep-dim, first
// the per-call time against the size, MEASURED and MODELED, with the curve's table.
//
// Every plot is an <svg class="plot" data-plot="NAME" data-expected-series="N"> holding one
// <g class="series" data-mode="MODE"> per mode, so a test can count them; a small inline
// script checks that on load and sets <body data-check="ok"> (tests/python/test_html_report.py).
// Every string from outside (model and trace paths, mode failures) is HTML-escaped.

#include <string>
#include <vector>

#include "driver/size_sweep.h"
#include "executor/session.h"

namespace gearbox::cli {

struct HtmlSpread {
  double median = 0, min = 0, max = 0;  // measured seconds over the repeats
};

struct HtmlModeData {
  std::string mode;
  std::string failure;              // empty when the mode ran the whole trace
  SessionStats stats;               // the first repeat's (counters and modeled figures are exact)
  std::vector<CallRecord> history;  // the first repeat's calls (the last ones with a limit)
  int64_t historyDropped = 0;
  // Measured seconds (compile + run) of every call, one vector per repeat.
  std::vector<std::vector<double>> callSeconds;
  HtmlSpread compile, run, total;
};

struct HtmlReport {
  std::string model, trace, device, profile;
  int repeat = 1;
  int64_t iterations = 0;
  bool modelOnly = false;
  std::vector<HtmlModeData> modes;
  std::vector<std::string> verdicts;  // compare's measured and MODELED verdict lines
  const SizeSweep* sweep = nullptr;   // --sweep-dim, with each mode's curve
  std::vector<SweepModeCurve> sweepCurves;
};

// Text with &, <, >, " and ' escaped, and control characters other than tab, newline and
// carriage return replaced by U+FFFD: the result is valid in HTML text and in XML attributes.
std::string htmlEscape(const std::string& s);
std::string renderHtmlReport(const HtmlReport& report);
// Renders and writes atomically.
void writeHtmlReport(const std::string& path, const HtmlReport& report);

}  // namespace gearbox::cli
