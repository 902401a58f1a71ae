#pragma once
// The SVG plot parts of the self-contained HTML pages (compare --html: driver/html_report.cpp,
// sweep --html: driver/sweep.cpp): a plot frame with axes, ticks and a legend, the line and
// scatter plots over it, the Okabe-Ito
// colours, the page's style and the check script every page ends with (each plot declares its
// series, tests/python/test_html_report.py counts them). No network: inline CSS and SVG only.

#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace gearbox::cli::svgplot {

// One colour per series, the same in every plot (colour-blind-safe Okabe-Ito palette).
const char* modeColor(size_t i);
// A number for a tick or a label: 4 significant digits, "0" for zero.
std::string num(double v);
// A "nice" tick step (1, 2 or 5 times a power of ten) for about `n` ticks over `range`.
double niceStep(double range, int n);

// A plot's frame: size, margins and the data ranges mapped onto it.
struct PlotFrame {
  static constexpr double W = 600, H = 320, L = 72, R = 16, T = 44, B = 48;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool logY = false;
  double px(double x) const { return L + (x - x0) / (x1 - x0 == 0 ? 1 : x1 - x0) * (W - L - R); }
  double py(double y) const {
    double v = y, a = y0, b = y1;
    if (logY) {
      v = std::log10(std::max(y, y0));
      a = std::log10(y0);
      b = std::log10(y1);
    }
    return H - B - (v - a) / (b - a == 0 ? 1 : b - a) * (H - T - B);
  }
};

// <svg class="plot" data-plot=NAME data-expected-series=N ...> and its title.
std::string svgOpen(const std::string& name, const std::string& title, size_t series);
// Axes with ticks and labels.
std::string axes(const PlotFrame& f, const std::string& xLabel, const std::string& yLabel,
                 bool integerX);
std::string legend(const std::vector<std::pair<std::string, const char*>>& entries);

// The start every plot shares: the <svg> with its title, the legend and the axes over `f`.
std::string plotPrelude(const std::string& name, const std::string& title, const PlotFrame& f,
                        const std::vector<std::pair<std::string, const char*>>& legendEntries,
                        size_t series, const std::string& xLabel, const std::string& yLabel,
                        bool integerX);

// A line plot: each series' points joined in order (a step line for a counter), with an
// optional band (lo..hi: the measured min-max over repeats) and a dot on each marked point
// (compare --sweep-dim: the calls that compiled), its tooltip in a <title>.
struct LinePoint {
  LinePoint() = default;
  LinePoint(double px, double py, double plo, double phi) : x(px), y(py), lo(plo), hi(phi) {}
  double x = 0, y = 0, lo = 0, hi = 0;  // lo, hi: the band; equal to y without one
  bool marked = false;
  std::string tooltip;  // of a marked point
};
struct LineSeries {
  std::string name;
  const char* color = "#000";
  std::vector<LinePoint> points;
  bool band = false;
  bool step = false;  // a counter: drawn as a step line
};
struct LinePlotOptions {
  bool logY = false;
  bool integerX = true;   // ticks on whole numbers (iterations, sizes)
  bool xFromZero = true;  // the x axis starts at 0, else at the smallest x
};
std::string linePlot(const std::string& name, const std::string& title, const std::string& xLabel,
                     const std::string& yLabel, const std::vector<LineSeries>& series,
                     const LinePlotOptions& options);

// A scatter plot: each series' points as dots joined in order, each with a short label and a
// tooltip.
struct ScatterPoint {
  double x = 0, y = 0;
  std::string label;    // drawn beside the dot
  std::string tooltip;  // <title>
};
struct ScatterSeries {
  std::string name;
  const char* color = "#000";
  std::vector<ScatterPoint> points;
};
std::string scatterPlot(const std::string& name, const std::string& title,
                        const std::string& xLabel, const std::string& yLabel,
                        const std::vector<ScatterSeries>& series);

// The machine measured figures come from (CPU model, hardware threads).
std::string machine();
// The page's inline style and its closing check script.
extern const char* const kStyle;
extern const char* const kCheckScript;
// <!DOCTYPE html> ... <body><h1>TITLE</h1>, with the no-network content security policy.
std::string pageStart(const std::string& title);
// "Written by WHO; self-contained (no network).", the check script, </body></html>.
std::string pageEnd(const std::string& who);

}  // namespace gearbox::cli::svgplot
