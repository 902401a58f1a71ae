#include "driver/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "driver/html_report.h"

namespace gearbox::cli::svgplot {

const char* modeColor(size_t i) {
  static const char* kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                  "#E69F00", "#56B4E9", "#000000", "#F0E442"};
  return kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
}

std::string num(double v) {
  if (v == 0) return "0";
  return fmt::format("{:.4g}", v);
}

double niceStep(double range, int n) {
  if (range <= 0) return 1;
  const double raw = range / n;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

std::string svgOpen(const std::string& name, const std::string& title, size_t series) {
  return fmt::format(
      "<svg class=\"plot\" data-plot=\"{}\" data-expected-series=\"{}\" width=\"{}\" "
      "height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">\n"
      "<text class=\"title\" x=\"{}\" y=\"16\">{}</text>\n",
      name, series, PlotFrame::W, PlotFrame::H, PlotFrame::W, PlotFrame::H, htmlEscape(title),
      PlotFrame::L, htmlEscape(title));
}

std::string axes(const PlotFrame& f, const std::string& xLabel, const std::string& yLabel,
                 bool integerX) {
  std::string s = "<g class=\"axes\">\n";
  const double bottom = PlotFrame::H - PlotFrame::B, right = PlotFrame::W - PlotFrame::R;
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", PlotFrame::L, bottom, right,
                   bottom);
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", PlotFrame::L, PlotFrame::T,
                   PlotFrame::L, bottom);
  double xs = niceStep(f.x1 - f.x0, 6);
  if (integerX) xs = std::max(1.0, std::round(xs));
  for (double x = std::ceil(f.x0 / xs) * xs; x <= f.x1 + 1e-9; x += xs) {
    const double X = f.px(x);
    s += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\"/><text class=\"tick\" x=\"{:.1f}\" "
        "y=\"{}\" text-anchor=\"middle\">{}</text>\n",
        X, bottom, X, bottom + 4, X, bottom + 16, num(x));
  }
  std::vector<double> yt;
  if (f.logY) {
    for (double y = std::pow(10.0, std::floor(std::log10(f.y0))); y <= f.y1 * 1.0001; y *= 10)
      if (y >= f.y0 * 0.9999) yt.push_back(y);
  } else {
    const double ys = niceStep(f.y1 - f.y0, 5);
    for (double y = std::ceil(f.y0 / ys) * ys; y <= f.y1 + 1e-9; y += ys) yt.push_back(y);
  }
  for (double y : yt) {
    const double Y = f.py(y);
    s += fmt::format(
        "<line class=\"grid\" x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\"/><text "
        "class=\"tick\" x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
        PlotFrame::L, Y, right, Y, PlotFrame::L - 4, Y + 4, num(y));
  }
  s += fmt::format("<text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                   (PlotFrame::L + right) / 2, PlotFrame::H - 10, htmlEscape(xLabel));
  s += fmt::format(
      "<text class=\"label\" transform=\"translate(14 {}) rotate(-90)\" "
      "text-anchor=\"middle\">{}</text>\n",
      (PlotFrame::T + bottom) / 2, htmlEscape(yLabel));
  return s + "</g>\n";
}

std::string legend(const std::vector<std::pair<std::string, const char*>>& entries) {
  std::string s = "<g class=\"legend\">\n";
  double x = PlotFrame::L;
  for (const auto& [label, color] : entries) {
    s += fmt::format(
        "<rect x=\"{:.0f}\" y=\"24\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{:.0f}\" "
        "y=\"34\">{}</text>\n",
        x, color, x + 16, htmlEscape(label));
    x += 28 + 7.0 * static_cast<double>(label.size());
  }
  return s + "</g>\n";
}

std::string plotPrelude(const std::string& name, const std::string& title, const PlotFrame& f,
                        const std::vector<std::pair<std::string, const char*>>& legendEntries,
                        size_t series, const std::string& xLabel, const std::string& yLabel,
                        bool integerX) {
  return svgOpen(name, title, series) + legend(legendEntries) + axes(f, xLabel, yLabel, integerX);
}

std::string linePlot(const std::string& name, const std::string& title, const std::string& xLabel,
                     const std::string& yLabel, const std::vector<LineSeries>& series,
                     const LinePlotOptions& options) {
  PlotFrame f;
  f.logY = options.logY;
  bool any = false, anyX = false;
  double ymin = 0, ymax = 0, xmin = 0, xmax = 0;
  for (const LineSeries& s : series)
    for (const LinePoint& p : s.points) {
      xmin = anyX ? std::min(xmin, p.x) : p.x;
      xmax = anyX ? std::max(xmax, p.x) : p.x;
      anyX = true;
      const double lo = std::min(p.y, p.lo), hi = std::max(p.y, p.hi);
      if (f.logY && lo <= 0) continue;
      ymin = any ? std::min(ymin, lo) : lo;
      ymax = any ? std::max(ymax, hi) : hi;
      any = true;
    }
  f.x0 = options.xFromZero || !anyX ? 0 : xmin;
  f.x1 = std::max(f.x0 + 1, xmax);
  if (f.logY) {
    f.y0 = any ? std::pow(10.0, std::floor(std::log10(ymin))) : 1;
    f.y1 = any ? std::pow(10.0, std::ceil(std::log10(ymax))) : 10;
    if (f.y1 <= f.y0) f.y1 = f.y0 * 10;
  } else {
    f.y0 = 0;
    f.y1 = any && ymax > 0 ? ymax * 1.05 : 1;
    const double step = niceStep(f.y1, 5);
    f.y1 = std::ceil(f.y1 / step) * step;
  }
  std::vector<std::pair<std::string, const char*>> entries;
  for (const LineSeries& se : series) entries.emplace_back(se.name, se.color);
  std::string s =
      plotPrelude(name, title, f, entries, series.size(), xLabel, yLabel, options.integerX);
  const double floorY = f.logY ? f.y0 : 0;
  for (const LineSeries& se : series) {
    s += fmt::format("<g class=\"series\" data-mode=\"{}\" data-points=\"{}\">\n",
                     htmlEscape(se.name), se.points.size());
    if (se.band && !se.points.empty()) {
      std::string poly;
      for (const LinePoint& p : se.points)
        poly += fmt::format("{:.1f},{:.1f} ", f.px(p.x), f.py(std::max(p.hi, floorY)));
      for (auto it = se.points.rbegin(); it != se.points.rend(); ++it)
        poly += fmt::format("{:.1f},{:.1f} ", f.px(it->x), f.py(std::max(it->lo, floorY)));
      s += fmt::format("<polygon class=\"band\" fill=\"{}\" points=\"{}\"/>\n", se.color, poly);
    }
    std::string path;
    for (size_t i = 0; i < se.points.size(); ++i) {
      const LinePoint& p = se.points[i];
      const double X = f.px(p.x), Y = f.py(f.logY ? std::max(p.y, f.y0) : p.y);
      if (i == 0)
        path += fmt::format("M{:.1f},{:.1f}", X, Y);
      else if (se.step)
        path += fmt::format(" H{:.1f} V{:.1f}", X, Y);
      else
        path += fmt::format(" L{:.1f},{:.1f}", X, Y);
    }
    s += fmt::format("<path fill=\"none\" stroke=\"{}\" stroke-width=\"2\" d=\"{}\"/>\n", se.color,
                     path);
    for (const LinePoint& p : se.points)
      if (p.marked)
        s += fmt::format(
            "<circle class=\"mark\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"#fff\" "
            "stroke=\"{}\" stroke-width=\"1.5\"><title>{}</title></circle>\n",
            f.px(p.x), f.py(f.logY ? std::max(p.y, f.y0) : p.y), se.color, htmlEscape(p.tooltip));
    s += "</g>\n";
  }
  return s + "</svg>\n";
}

std::string scatterPlot(const std::string& name, const std::string& title,
                        const std::string& xLabel, const std::string& yLabel,
                        const std::vector<ScatterSeries>& series) {
  PlotFrame f;
  bool any = false;
  double xmax = 0, ymax = 0;
  for (const ScatterSeries& s : series)
    for (const ScatterPoint& p : s.points) {
      xmax = any ? std::max(xmax, p.x) : p.x;
      ymax = any ? std::max(ymax, p.y) : p.y;
      any = true;
    }
  auto upper = [](double v) {
    if (v <= 0) return 1.0;
    const double step = niceStep(v * 1.05, 5);
    return std::ceil(v * 1.05 / step) * step;
  };
  f.x1 = upper(xmax);
  f.y1 = upper(ymax);
  std::vector<std::pair<std::string, const char*>> entries;
  for (const ScatterSeries& se : series) entries.emplace_back(se.name, se.color);
  std::string s = plotPrelude(name, title, f, entries, series.size(), xLabel, yLabel, false);
  for (const ScatterSeries& se : series) {
    s += fmt::format("<g class=\"series\" data-mode=\"{}\" data-points=\"{}\">\n",
                     htmlEscape(se.name), se.points.size());
    std::string path;
    for (const ScatterPoint& p : se.points)
      path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", f.px(p.x), f.py(p.y));
    if (se.points.size() > 1)
      s += fmt::format("<path fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" d=\"{}\"/>\n",
                       se.color, path);
    for (const ScatterPoint& p : se.points)
      s += fmt::format(
          "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"><title>{}</title></circle>"
          "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
          f.px(p.x), f.py(p.y), se.color, htmlEscape(p.tooltip), f.px(p.x) + 6, f.py(p.y) - 6,
          htmlEscape(p.label));
    s += "</g>\n";
  }
  return s + "</svg>\n";
}

std::string machine() {
  // The machine the measured figures come from, as the team's standard asks.
  std::string cpu = "unknown CPU";
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  for (int i = 0; i < 64 && std::getline(in, line); ++i) {
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      if (c != std::string::npos) cpu = line.substr(c + 2, 120);
      break;
    }
  }
  return fmt::format("{}, {} hardware threads", cpu, std::thread::hardware_concurrency());
}

const char* const kStyle =
    R"(body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#222;max-width:1280px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f0f0f0}tr.modeled td{background:#fbf7ee}
.note{color:#555;font-size:13px}.plots{display:flex;flex-wrap:wrap;gap:16px}
svg.plot{border:1px solid #ddd;background:#fff}svg .title{font-size:14px;font-weight:600}
svg .axes line{stroke:#444;stroke-width:1}svg .axes line.grid{stroke:#e4e4e4}
svg text{font-size:11px;fill:#222}svg .label{font-size:12px}svg .band{opacity:.18}
.failed{color:#b00}pre{background:#f6f6f6;padding:8px;font-size:12px;white-space:pre-wrap})";

// Checks the page on load: every plot has the number of series it declares. Sets
// <body data-check="ok"> or "fail: ..." for the browser test; no network, no other effect.
const char* const kCheckScript = R"(<script>
window.addEventListener('error', function (e) {
  document.body.setAttribute('data-script-error', String(e.message));
});
(function () {
  var errs = [];
  var plots = document.querySelectorAll('svg.plot');
  if (plots.length === 0) errs.push('no plots');
  for (var i = 0; i < plots.length; ++i) {
    var p = plots[i];
    var n = p.querySelectorAll('g.series').length;
    var want = Number(p.getAttribute('data-expected-series'));
    if (n !== want) errs.push(p.getAttribute('data-plot') + ': ' + n + ' series, expected ' + want);
  }
  document.body.setAttribute('data-plots', String(plots.length));
  document.body.setAttribute('data-check', errs.length ? 'fail: ' + errs.join('; ') : 'ok');
})();
</script>
)";

std::string pageStart(const std::string& title) {
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
       "'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n";
  h += fmt::format("<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n", htmlEscape(title),
                   kStyle);
  h += fmt::format("<h1>{}</h1>\n", htmlEscape(title));
  return h;
}

std::string pageEnd(const std::string& who) {
  return fmt::format("<p class=\"note\">Written by {}; self-contained (no network).</p>\n",
                     htmlEscape(who)) +
         kCheckScript + "</body>\n</html>\n";
}

}  // namespace gearbox::cli::svgplot
