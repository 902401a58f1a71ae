#include "driver/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "driver/svg_plot.h"
#include "executor/modes/geared.h"
#include "graph/file_io.h"

namespace gearbox::cli {

std::string htmlEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      case '\t':
      case '\n':
      case '\r': out += c; break;
      default:
        // Other control characters (from a file name, an option) are not allowed in XML 1.0
        // even as character references, and HTML treats them as parse errors: each becomes
        // U+FFFD, visibly replaced.
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          out += "\xef\xbf\xbd";
        } else {
          out += c;
        }
    }
  }
  return out;
}

namespace {

using svgplot::axes;
using svgplot::legend;
using svgplot::linePlot;
using svgplot::LinePlotOptions;
using svgplot::LineSeries;
using svgplot::machine;
using svgplot::modeColor;
using svgplot::PlotFrame;
using svgplot::svgOpen;

// Plots show at most this many points per series: longer traces are bucketed (the caption
// says so), keeping the page small and quick to draw.
constexpr size_t kMaxPoints = 800;

// Buckets of consecutive calls so a series has at most kMaxPoints points. Returns the bucket
// size (1: every call is a point).
size_t bucketSize(size_t calls) {
  return calls <= kMaxPoints ? 1 : (calls + kMaxPoints - 1) / kMaxPoints;
}

double quantile(std::vector<double> v, bool median, bool max) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  if (median) {
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  }
  return max ? v.back() : v.front();
}

std::string cell(const std::string& s) {
  return "<td>" + s + "</td>";
}

std::string secs(double s) {
  if (s < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.2f} s", s);
}

// The page head, title and the notes on what is MEASURED and what is MODELED.
std::string pageHead(const HtmlReport& r) {
  std::string h = svgplot::pageStart("gearbox compare: " + r.model);
  h += fmt::format(
      "<p class=\"note\">trace {} ({} iterations), device {}, device profile {} for the "
      "MODELED figures, measured figures over {} fresh session(s) per mode on {}.{}</p>\n",
      htmlEscape(r.trace), r.iterations, htmlEscape(r.device), htmlEscape(r.profile), r.repeat,
      htmlEscape(machine()),
      r.modelOnly ? " Model only: kernels were NOT executed, measured times are not kernel times."
                  : "");
  h += "<p class=\"note\">MEASURED: host times from a steady clock on this machine. MODELED: "
       "device times computed by the cost model from the device profile (docs/cost-model.md); "
       "there is no device behind them. The two are never added together.</p>\n";

  return h;
}

// The side-by-side table of counters and times, the failures and compare's verdicts.
std::string sideBySide(const HtmlReport& r) {
  std::string h;
  h += "<h2>Side by side</h2>\n<table>\n<tr><th></th>";
  for (const HtmlModeData& m : r.modes) h += "<th>" + htmlEscape(m.mode) + "</th>";
  h += "</tr>\n";
  auto row = [&](const std::string& label, auto&& f, const char* cls = "") {
    h += fmt::format("<tr class=\"{}\"><td>{}</td>", cls, htmlEscape(label));
    for (const HtmlModeData& m : r.modes)
      h += m.failure.empty() ? cell(f(m)) : "<td class=\"failed\">failed</td>";
    h += "</tr>\n";
  };
  auto count = [](int64_t SessionStats::*field) {
    return [field](const HtmlModeData& m) { return std::to_string(m.stats.*field); };
  };
  row("graph compiles", count(&SessionStats::graphCompiles));
  row("kernel compiles", count(&SessionStats::kernelCompiles));
  row("plan cache hits", count(&SessionStats::planCacheHits));
  row("kernel cache hits", count(&SessionStats::kernelCacheHits));
  row("launches", count(&SessionStats::launches));
  row("syncs", count(&SessionStats::syncs));
  row("allocations", count(&SessionStats::allocations));
  row("fallback runs", count(&SessionStats::fallbackRuns));
  row("peak bytes", count(&SessionStats::peakBytes));
  // Geared calls outside the gears under --gear-fallback dynamic or eager (a mode counter).
  auto hasFallback = [](const HtmlModeData& m) {
    return std::any_of(m.stats.modeCounters.begin(), m.stats.modeCounters.end(),
                       [](const ModeCounter& c) { return c.name == "fallback_calls"; });
  };
  if (std::any_of(r.modes.begin(), r.modes.end(), hasFallback))
    row("gear fallback calls", [&](const HtmlModeData& m) {
      return hasFallback(m) ? std::to_string(m.stats.modeCounter("fallback_calls"))
                            : std::string("-");
    });
  auto spread = [](const HtmlSpread& s) {
    return fmt::format("{} &plusmn;{}", secs(s.median), secs((s.max - s.min) / 2));
  };
  const std::string n = fmt::format(" (median, n={})", r.repeat);
  row("measured host compile" + n, [&](const HtmlModeData& m) { return spread(m.compile); });
  row("measured runs" + n, [&](const HtmlModeData& m) { return spread(m.run); });
  row("measured total" + n, [&](const HtmlModeData& m) { return spread(m.total); });
  auto us = [](double v) { return fmt::format("{:.1f} us", v); };
  row(
      "MODELED compile", [&](const HtmlModeData& m) { return us(m.stats.modeled.compileUs); },
      "modeled");
  row(
      "MODELED launch+sync+alloc",
      [&](const HtmlModeData& m) { return us(m.stats.modeled.launchSyncUs); }, "modeled");
  row(
      "MODELED compute", [&](const HtmlModeData& m) { return us(m.stats.modeled.computeUs); },
      "modeled");
  row(
      "MODELED padding waste (of compute)",
      [&](const HtmlModeData& m) { return us(m.stats.modeled.paddingWasteUs); }, "modeled");
  row(
      "MODELED host dynamic-shape work",
      [&](const HtmlModeData& m) { return us(m.stats.modeled.hostDynamicUs); }, "modeled");
  row(
      "MODELED device time", [&](const HtmlModeData& m) { return us(m.stats.modeled.total()); },
      "modeled");
  // Start-up vs first call (--gear-compile, docs/gears.md).
  row(
      "MODELED start-up (up-front compiles)",
      [&](const HtmlModeData& m) { return us(m.stats.startup.modeledCompileUs); }, "modeled");
  row(
      "MODELED first call",
      [&](const HtmlModeData& m) { return us(m.stats.startup.firstCallModeledUs); }, "modeled");
  const auto mib = humanBytes;
  row(
      "MODELED memory resident",
      [&](const HtmlModeData& m) { return mib(m.stats.memory.residentBytes); }, "modeled");
  row(
      "MODELED memory peak", [&](const HtmlModeData& m) { return mib(m.stats.memory.peakBytes); },
      "modeled");
  h += "</table>\n";
  for (const HtmlModeData& m : r.modes)
    if (!m.failure.empty())
      h += fmt::format("<p class=\"failed\">{}: {}</p>\n", htmlEscape(m.mode),
                       htmlEscape(m.failure));
  if (!r.verdicts.empty()) {
    h += "<pre>";
    for (const std::string& v : r.verdicts) h += htmlEscape(v) + "\n";
    h += "</pre>\n";
  }

  return h;
}

// Cumulative compiles and per-call time (measured and MODELED) over the iterations.
std::string iterationPlots(const HtmlReport& r, const std::vector<const HtmlModeData*>& ok,
                           std::map<std::string, const char*>& color) {
  std::string h;
  // Compiles over iterations: the up-front (geared) compiles are the value before iteration 0.
  size_t longest = 0;
  for (const HtmlModeData* m : ok) longest = std::max(longest, m->history.size());
  const size_t bucket = bucketSize(longest);
  std::vector<LineSeries> graphC, kernelC, measured, modeled;
  for (const HtmlModeData* m : ok) {
    const char* c = color[m->mode];
    LineSeries g{m->mode, c, {}, false, true}, k{m->mode, c, {}, false, true};
    LineSeries t{m->mode, c, {}, r.repeat > 1, false}, d{m->mode, c, {}, false, false};
    int64_t graphs = m->stats.graphCompiles, kernels = m->stats.kernelCompiles;
    for (const CallRecord& rec : m->history) {
      graphs -= rec.graphCompiled ? 1 : 0;
      kernels -= static_cast<int64_t>(rec.kernelsCompiled.size());
    }
    const double first =
        m->history.empty() ? 0.0 : static_cast<double>(m->history.front().iteration);
    g.points.push_back({first, double(graphs), double(graphs), double(graphs)});
    k.points.push_back({first, double(kernels), double(kernels), double(kernels)});
    const size_t calls = m->history.size();
    for (size_t b = 0; b < calls; b += bucket) {
      const size_t e = std::min(calls, b + bucket);
      double med = 0, lo = 0, hi = 0, dev = 0;
      for (size_t i = b; i < e; ++i) {
        const CallRecord& rec = m->history[i];
        graphs += rec.graphCompiled ? 1 : 0;
        kernels += static_cast<int64_t>(rec.kernelsCompiled.size());
        std::vector<double> samples;
        for (const auto& rep : m->callSeconds)
          if (i < rep.size()) samples.push_back(rep[i] * 1e6);
        // Buckets keep the largest call, so a compile spike stays visible.
        med = std::max(med, quantile(samples, true, false));
        lo = std::max(lo, quantile(samples, false, false));
        hi = std::max(hi, quantile(samples, false, true));
        dev = std::max(dev, rec.modeledDeviceUs);
      }
      const double x = static_cast<double>(m->history[e - 1].iteration) + 1;
      g.points.push_back({x, double(graphs), double(graphs), double(graphs)});
      k.points.push_back({x, double(kernels), double(kernels), double(kernels)});
      const double xc = static_cast<double>(m->history[b].iteration);
      t.points.push_back({xc, med, lo, hi});
      d.points.push_back({xc, dev, dev, dev});
    }
    graphC.push_back(std::move(g));
    kernelC.push_back(std::move(k));
    measured.push_back(std::move(t));
    modeled.push_back(std::move(d));
  }
  h += "<h2>Compiles over iterations</h2>\n<div class=\"plots\">\n";
  h += linePlot("graph-compiles", "cumulative graph compiles", "iteration", "graph compiles",
                graphC, {});
  h += linePlot("kernel-compiles", "cumulative kernel compiles", "iteration", "kernel compiles",
                kernelC, {});
  h += "</div>\n";
  const std::string bucketNote =
      bucket > 1 ? fmt::format(" Each point is the largest of {} consecutive calls.", bucket) : "";
  h += "<h2>Per-call time</h2>\n";
  h += fmt::format(
      "<p class=\"note\">MEASURED: host time of each call (compile + run), the line the median "
      "over the {} repeat(s) and the band their min-max. MODELED: the cost model's device time "
      "of each call. Log scale.{}</p>\n<div class=\"plots\">\n",
      r.repeat, bucketNote);
  const LinePlotOptions logY{.logY = true};
  h += linePlot("measured-per-call", "MEASURED host time per call", "iteration",
                "microseconds (measured)", measured, logY);
  h += linePlot("modeled-per-call", "MODELED device time per call", "iteration",
                "microseconds (MODELED)", modeled, logY);
  h += "</div>\n";

  return h;
}

// --sweep-dim: per-call time against the size, MEASURED and MODELED, the calls that compiled
// marked, and the numbers in a table (the text table's).
std::string sweepPlots(const HtmlReport& r, std::map<std::string, const char*>& color) {
  const SizeSweep& sw = *r.sweep;
  std::string h = fmt::format("<h2>Per-call time against {}</h2>\n", htmlEscape(sw.label()));
  h += fmt::format(
      "<p class=\"note\">One call per size ({} sizes, {}), in this order, a fresh session per "
      "mode. MEASURED: host time of each call (compile + run), the line the median over the {} "
      "repeat(s) and the band their min-max. MODELED: the cost model's device time of the call. "
      "Dots: calls that compiled (a graph, or kernels in eager). Static compiles at every new size "
      "until the recompile limit; a gear pads each size up to the next gear, so its time steps "
      "with the gears, not the size. Log scale.{}</p>\n<div class=\"plots\">\n",
      sw.sizes.size(), htmlEscape(sw.spec), r.repeat,
      r.modelOnly ? " Model only: the MEASURED times are not kernel times." : "");
  std::vector<LineSeries> measured, modeled;
  for (const SweepModeCurve& c : r.sweepCurves) {
    if (c.calls.empty()) continue;
    LineSeries t{c.mode, color[c.mode], {}, r.repeat > 1, false};
    LineSeries d{c.mode, color[c.mode], {}, false, false};
    for (const SweepCall& s : c.calls) {
      const bool compiled = s.graphCompiled || s.kernelsCompiled > 0;
      svgplot::LinePoint mp(static_cast<double>(s.size), s.measuredMedian * 1e6,
                            s.measuredMin * 1e6, s.measuredMax * 1e6);
      svgplot::LinePoint dp(static_cast<double>(s.size), s.modeledUs, s.modeledUs, s.modeledUs);
      mp.marked = dp.marked = compiled;
      mp.tooltip =
          fmt::format("{} size {}: compiled, {} measured", c.mode, s.size, secs(s.measuredMedian));
      dp.tooltip =
          fmt::format("{} size {}: compiled, {:.1f} us MODELED", c.mode, s.size, s.modeledUs);
      t.points.push_back(std::move(mp));
      d.points.push_back(std::move(dp));
    }
    measured.push_back(std::move(t));
    modeled.push_back(std::move(d));
  }
  const LinePlotOptions opts{.logY = true, .integerX = true, .xFromZero = false};
  const std::string axis = sw.label();
  h += linePlot("sweep-measured", "MEASURED host time per call against the size", axis,
                "microseconds (measured)", measured, opts);
  h += linePlot("sweep-modeled", "MODELED device time per call against the size", axis,
                "microseconds (MODELED)", modeled, opts);
  h += "</div>\n";
  // The numbers, as the text table prints them.
  h += "<details><summary>The curve as a table</summary>\n<table>\n<tr><th>size</th>";
  for (const SweepModeCurve& c : r.sweepCurves)
    h += fmt::format("<th>{} measured</th><th>{} MODELED</th>", htmlEscape(c.mode),
                     htmlEscape(c.mode));
  h += "</tr>\n";
  for (size_t i = 0; i < sw.sizes.size(); ++i) {
    h += fmt::format("<tr><td>{}</td>", sw.sizes[i]);
    for (const SweepModeCurve& c : r.sweepCurves) {
      if (i >= c.calls.size()) {
        h += "<td>-</td><td>-</td>";
        continue;
      }
      const SweepCall& s = c.calls[i];
      std::string what;
      if (s.graphCompiled || s.kernelsCompiled > 0) what += " compiled";
      if (s.fallback) what += " fallback";
      if (s.padded) what += " padded";
      h += fmt::format("<td>{}</td><td class=\"modeled\">{:.1f} us{}</td>",
                       r.modelOnly ? "-" : secs(s.measuredMedian), s.modeledUs, what);
    }
    h += "</tr>\n";
  }
  return h + "</table>\n</details>\n";
}

// The MODELED device time of each mode as one stacked bar by kind.
std::string modeledBreakdown(const std::vector<const HtmlModeData*>& ok,
                             std::map<std::string, const char*>& color) {
  std::string h;
  const std::pair<const char*, const char*> parts[] = {{"compile", "#7f7f7f"},
                                                       {"launch+sync+alloc", "#E69F00"},
                                                       {"compute", "#0072B2"},
                                                       {"host dynamic-shape work", "#CC79A7"}};
  double maxTotal = 0;
  for (const HtmlModeData* m : ok) maxTotal = std::max(maxTotal, m->stats.modeled.total());
  h += "<h2>MODELED device time by kind</h2>\n";
  h += "<p class=\"note\">MODELED by the device profile, over the whole trace; padding waste "
       "is the hatched part of compute.</p>\n";
  const double rowH = 30, height = PlotFrame::T + 30 + rowH * static_cast<double>(ok.size()) + 40;
  std::string s = fmt::format(
      "<svg class=\"plot\" data-plot=\"modeled-breakdown\" data-expected-series=\"{}\" "
      "width=\"{}\" height=\"{:.0f}\" viewBox=\"0 0 {} {:.0f}\" role=\"img\" "
      "aria-label=\"MODELED device time by kind\">\n"
      "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"3\" height=\"6\" fill=\"#fff\" "
      "opacity=\".6\"/></pattern></defs>\n"
      "<text class=\"title\" x=\"{}\" y=\"16\">MODELED device time by kind (us)</text>\n",
      ok.size(), PlotFrame::W * 2, height, PlotFrame::W * 2, height, PlotFrame::L);
  std::vector<std::pair<std::string, const char*>> entries;
  for (const auto& [label, c] : parts) entries.emplace_back(label, c);
  s += legend(entries);
  const double left = 110, width = PlotFrame::W * 2 - left - 120;
  const double scale = maxTotal > 0 ? width / maxTotal : 0;
  double y = PlotFrame::T + 10;
  for (const HtmlModeData* m : ok) {
    const ModeledTime& t = m->stats.modeled;
    s += fmt::format("<g class=\"series\" data-mode=\"{}\">\n", htmlEscape(m->mode));
    s += fmt::format("<text x=\"{}\" y=\"{:.0f}\" text-anchor=\"end\">{}</text>\n", left - 6,
                     y + rowH * 0.6, htmlEscape(m->mode));
    double x = left;
    const double values[] = {t.compileUs, t.launchSyncUs, t.computeUs, t.hostDynamicUs};
    for (size_t p = 0; p < 4; ++p) {
      const double w = values[p] * scale;
      if (w <= 0) continue;
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.0f}\" width=\"{:.1f}\" height=\"{:.0f}\" "
          "fill=\"{}\"><title>{} "
          "{}: {:.1f} us MODELED</title></rect>\n",
          x, y, w, rowH * 0.7, parts[p].second, htmlEscape(m->mode), parts[p].first, values[p]);
      if (p == 2 && t.paddingWasteUs > 0)
        s += fmt::format(
            "<rect x=\"{:.1f}\" y=\"{:.0f}\" width=\"{:.1f}\" height=\"{:.0f}\" "
            "fill=\"url(#hatch)\"><title>padding waste: {:.1f} us MODELED</title></rect>\n",
            x + w - t.paddingWasteUs * scale, y, t.paddingWasteUs * scale, rowH * 0.7,
            t.paddingWasteUs);
      x += w;
    }
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.0f}\">{:.1f} us</text>\n", x + 6, y + rowH * 0.6,
                     t.total());
    s += "</g>\n";
    y += rowH;
  }
  h += s + "</svg>\n";
  return h;
}

}  // namespace

std::string renderHtmlReport(const HtmlReport& r) {
  std::vector<const HtmlModeData*> ok;
  for (const HtmlModeData& m : r.modes)
    if (m.failure.empty()) ok.push_back(&m);
  std::map<std::string, const char*> color;
  for (size_t i = 0; i < r.modes.size(); ++i) color[r.modes[i].mode] = modeColor(i);

  std::string h = pageHead(r);
  h += sideBySide(r);
  if (r.sweep) h += sweepPlots(r, color);

  h += iterationPlots(r, ok, color);

  // Padding waste per gear (geared): padded elements over real ones, per gear that padded.
  for (const HtmlModeData* m : ok) {
    const int64_t gears = gearedCounters(m->stats).gears;  // 0 outside geared mode
    if (gears == 0) continue;
    std::map<int, std::pair<int64_t, int64_t>> perGear;  // gear -> (real, padded) elements
    std::map<int, int64_t> callsPerGear, paddedPerGear;
    std::map<int, double> wasteUs;
    for (const CallRecord& rec : m->history) {
      const GearedCall call = gearedCall(rec);
      if (call.gear < 0) continue;
      callsPerGear[call.gear]++;
      if (!call.padded) continue;
      paddedPerGear[call.gear]++;
      perGear[call.gear].first += call.realElements;
      perGear[call.gear].second += call.paddedElements;
      wasteUs[call.gear] += rec.modeled.paddingWasteUs;
    }
    h += fmt::format("<h2>Padding waste per gear ({})</h2>\n", htmlEscape(m->mode));
    h += "<p class=\"note\">Per gear: the share of the padded calls' input elements that are "
         "padding, (padded - real) / padded, and the MODELED compute time spent on them.</p>\n";
    PlotFrame f;
    f.x0 = -0.5;
    f.x1 = static_cast<double>(gears) - 0.5;
    f.y0 = 0;
    f.y1 = 100;
    std::string s = svgOpen("padding-waste", "padding waste per gear (% of padded elements)", 1);
    s += legend({{m->mode, color[m->mode]}});
    s += axes(f, "gear", "padding (% of elements)", true);
    s += fmt::format("<g class=\"series\" data-mode=\"{}\">\n", htmlEscape(m->mode));
    const double w = std::max(2.0, (PlotFrame::W - PlotFrame::L - PlotFrame::R) /
                                       static_cast<double>(std::max<int64_t>(gears, 1)) * 0.6);
    for (int gear = 0; gear < gears; ++gear) {
      const auto it = perGear.find(gear);
      const double pct = it == perGear.end() || it->second.second == 0
                             ? 0.0
                             : 100.0 * static_cast<double>(it->second.second - it->second.first) /
                                   static_cast<double>(it->second.second);
      const double X = f.px(gear), Y = f.py(pct);
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
          "fill=\"{}\"><title>gear "
          "{}: {} calls, {} padded, {:.1f}% padding, {:.1f} us MODELED waste</title></rect>\n",
          X - w / 2, Y, w, PlotFrame::H - PlotFrame::B - Y, color[m->mode], gear,
          callsPerGear[gear], paddedPerGear[gear], pct, wasteUs[gear]);
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:.0f}%</text>\n", X,
                       Y - 3, pct);
    }
    h += s + "</g>\n</svg>\n";
  }

  h += modeledBreakdown(ok, color);
  return h + svgplot::pageEnd("gearbox compare --html");
}

void writeHtmlReport(const std::string& path, const HtmlReport& report) {
  writeFileAtomic(path, renderHtmlReport(report));
}

}  // namespace gearbox::cli
