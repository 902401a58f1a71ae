// gearbox sweep MODEL --trace TRACE --grid NAME=V1,V2,... [--grid ...] [--measured]
//                [--json FILE] [--html FILE] [any option a point may vary, as its fixed value]
//
// The grid's points are run model-only in parallel (parallelFor: oneTBB over the machine's
// cores), each in its own Session; the reports are built afterwards, on one thread and in grid
// order, so what is printed and written is the same bytes whatever order the points finished
// in. Each point is exactly `gearbox run --model-only` with the point's options: the same
// runTrace, the same report (tests/sweep_test.cpp checks the counters agree).
#include "driver/sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>

#include "compiler/compile_log.h"
#include "compiler/parallel_for.h"
#include "driver/gear_suggest.h"
#include "driver/html_report.h"
#include "driver/run_report.h"
#include "driver/svg_plot.h"
#include "driver/trace.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "graph/text.h"

namespace gearbox::cli {

namespace {

// More points than this is a typo in a grid (a product of long axes), not a plan.
constexpr size_t kMaxSweepPoints = 4096;
// Points run (in parallel) between two rounds of report building; their sessions live until then.
constexpr size_t kPointBatch = 64;
// The calls a point's session keeps (its report reads only the last one).
constexpr size_t kPointHistory = 16;

// "a,b" -> {a, b}; ',' inside [], {}, () or "..." does not split; with a ';' outside them the
// separator is ';' instead (dim marks "x:0,y:1" and --pad-to "x=8,4" hold a ',').
std::vector<std::string> splitValues(const std::string& text) {
  auto topLevel = [&](char sep) {
    std::vector<size_t> at;
    int depth = 0;
    bool quoted = false;
    for (size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if (quoted) {
        if (c == '\\')
          ++i;
        else if (c == '"')
          quoted = false;
      } else if (c == '"') {
        quoted = true;
      } else if (c == '[' || c == '{' || c == '(') {
        ++depth;
      } else if ((c == ']' || c == '}' || c == ')') && depth > 0) {
        --depth;
      } else if (c == sep && depth == 0) {
        at.push_back(i);
      }
    }
    return at;
  };
  std::vector<size_t> cuts = topLevel(';');
  if (cuts.empty()) cuts = topLevel(',');
  std::vector<std::string> values;
  size_t from = 0;
  for (size_t cut : cuts) {
    values.push_back(text.substr(from, cut - from));
    from = cut + 1;
  }
  values.push_back(text.substr(from));
  return values;
}

const OptionInfo* findOption(const std::string& name) {
  for (const OptionInfo& r : runOptionTable())
    if (r.name == name || r.pythonName() == name) return &r;
  return nullptr;
}

std::string axisNames() {
  std::vector<std::string> names;
  for (const OptionInfo& r : runOptionTable())
    if (sweepTakes(r)) names.push_back(r.pythonName());
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string pointLabel(const std::vector<SweepAxis>& axes, const std::vector<std::string>& values) {
  std::vector<std::string> parts;
  for (size_t k = 0; k < axes.size(); ++k) parts.push_back(axes[k].name + "=" + values[k]);
  return fmt::format("{}", fmt::join(parts, ", "));
}

// Sets one axis value on a point's options. gears=suggest is settled later, per point.
void applyAxis(RunOptions& o, const SweepAxis& axis, const std::string& value) {
  if (axis.option->name == "gears" && value == "suggest") {
    o.gears = value;
    return;
  }
  setRunOption(o, *axis.option, {value}, fmt::format("--grid {}={}", axis.name, value));
}

// What a point runs with, made on the calling thread before any point runs.
struct PreparedPoint {
  RunOptions options;
  SessionOptions session;
  std::unique_ptr<Session> ran;  // kept until the reports are built, after the parallel loop
  std::optional<Error> error;    // of the run itself
};

// gears=suggest: the gear set suggest-gears picks for the trace under this point's profile,
// merge policy, passes and gear fallback (computed once per distinct setting).
// Returns the gears JSON and the fallback a run of them takes (GearSuggestion::runFallback).
std::pair<std::string, std::string> suggestFor(
    const RunOptions& o, const Graph& g, const std::vector<InputSignature>& trace,
    std::map<std::string, std::pair<std::string, std::string>>& cache) {
  const CostModel cost = toSessionOptions(o, Mode::kStatic).cost;
  // error (the default) pads, as compare's --gears suggest does.
  const GearFallback fallback =
      o.gearFallback == "error" ? GearFallback::kPad : parseGearFallback(o.gearFallback);
  const std::string key = fmt::format("{}|{}|{}|{}|{}|{}|{}", o.deviceProfile, o.costModel,
                                      fmt::join(o.costOverrides, ";"), o.merge, o.noPasses,
                                      fmt::join(o.disablePasses, ";"), gearFallbackName(fallback));
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  SuggestOptions so;
  so.references = false;
  so.runPasses = !o.noPasses;
  so.disabledPasses = o.disablePasses;
  so.merge = parseMergePolicy(o.merge);
  so.fallback = fallback;
  const GearSuggestion sug = suggestGears(g, trace, cost, so);
  return cache[key] = {sug.gearsJson, gearFallbackName(sug.runFallback)};
}

// The point's run report as `gearbox run --json` writes it, less what the sweep holds once
// (tool, model, trace; the warnings, which the process counts across every point that ran at
// once), the per-iteration records, and, model-only, every measured figure.
nlohmann::ordered_json pointReport(const Session& s, const RunOptions& o, bool measured) {
  nlohmann::ordered_json report =
      reportJson(s, o.model, o.trace, {&o, nullptr, IterationDetail::kNone});
  for (const char* key : {"schema_version", "tool", "model", "trace", "per_iteration", "warnings"})
    report.erase(key);
  if (measured) {
    report["measured_total_seconds"] = s.stats().compileSeconds + s.stats().runSeconds;
  } else {
    // Measured figures of a model-only run are not kernel times, and differ run to run: every
    // "measured_*" key, nested ones too (the startup block's).
    const std::function<void(nlohmann::ordered_json&)> dropMeasured =
        [&](nlohmann::ordered_json& j) {
          if (!j.is_object()) return;
          std::vector<std::string> drop;
          for (auto& [key, value] : j.items()) {
            if (key.rfind("measured_", 0) == 0)
              drop.push_back(key);
            else
              dropMeasured(value);
          }
          for (const std::string& key : drop) j.erase(key);
        };
    dropMeasured(report);
  }
  return report;
}

std::string cellText(const SweepPoint& p, const SweepColumn& c) {
  if (!p.ok()) return "-";
  const nlohmann::ordered_json::json_pointer ptr(c.key);
  if (!p.report.contains(ptr)) return "-";
  const auto& v = p.report[ptr];
  if (v.is_number_float()) return fmt::format("{:.{}f}", v.get<double>(), c.decimals);
  return dumpJson(v);
}

double cellValue(const SweepPoint& p, const SweepColumn& c) {
  const nlohmann::ordered_json::json_pointer ptr(c.key);
  if (!p.ok() || !p.report.contains(ptr) || !p.report[ptr].is_number()) return 0;
  return p.report[ptr].get<double>();
}

}  // namespace

bool sweepTakes(const OptionInfo& r) {
  if (!r.takes(kRunOnly)) return false;
  // A sweep is model-only unless --measured; kernel_meta and record_op_info write files the
  // next run reads, so points running side by side would change each other's counters.
  if (r.name == "model-only" || r.name == "kernel-meta" || r.name == "record-op-info") return false;
  return r.sessionTakes() || r.name == "mode";
}

std::vector<SweepAxis> parseGrid(const std::vector<std::string>& grid, const RunOptions& base) {
  std::vector<SweepAxis> axes;
  for (const std::string& g : grid) {
    const size_t eq = g.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == g.size())
      fail(ErrorKind::kConfig, "--grid '{}': expected NAME=V1,V2,... (e.g. recompile_limit=1,2,4)",
           g);
    SweepAxis axis;
    axis.name = g.substr(0, eq);
    axis.option = findOption(axis.name);
    if (!axis.option)
      fail(ErrorKind::kConfig, "--grid {}: no run option of that name (an axis is one of: {})",
           axis.name, axisNames());
    if (!sweepTakes(*axis.option))
      fail(ErrorKind::kConfig,
           "--grid {}: not an option a sweep point varies (an axis is one of: {}){}", axis.name,
           axisNames(),
           axis.option->name == "model-only" ? "; give --measured to execute the kernels" : "");
    for (const SweepAxis& seen : axes)
      if (seen.option == axis.option)
        fail(ErrorKind::kConfig, "--grid {}: the axis is given twice", axis.name);
    axis.values = splitValues(g.substr(eq + 1));
    for (const std::string& v : axis.values) {
      if (v.empty()) fail(ErrorKind::kConfig, "--grid {}: an empty value in '{}'", axis.name, g);
      // The table's own check of the value, then what a session would refuse of it alone.
      RunOptions o = base;
      applyAxis(o, axis, v);
      try {
        toSessionOptions(o, Mode::kStatic);
      } catch (const Error& e) {
        fail(ErrorKind::kConfig, "--grid {}={}: {}", axis.name, v, e.what());
      }
    }
    axes.push_back(std::move(axis));
  }
  return axes;
}

const std::vector<SweepColumn>& sweepColumns() {
  using C = SweepColumn;
  // One line per column: a report field becomes a column here (docs/sweep.md).
  static const std::vector<SweepColumn> columns = {
      {"graph compiles", "/graph_compiles", C::kPlotX},
      {"kernel compiles", "/kernel_compiles"},
      {"fallback calls", "/fallback_runs"},
      {"plan hits", "/plan_cache_hits"},
      {"plan misses", "/plan_cache_misses"},
      {"kernel hits", "/kernel_cache_hits"},
      {"kernel misses", "/kernel_cache_misses"},
      {"padded calls", "/padded_calls", C::kIfNonZero},
      // Not the report's padding_waste ratio: it counts every input's elements, weights
      // included, so an MLP padded by 25% reads 0.005; the MODELED time wasted says it.
      {"peak bytes", "/peak_bytes"},
      {"modeled peak memory (bytes)", "/modeled_peak_bytes", C::kPlotX},
      {"modeled start-up (us)", "/startup/modeled_up_front_compile_us", C::kIfNonZero},
      {"modeled padding waste (us)", "/modeled/padding_waste_us", C::kIfNonZero},
      {"modeled compile (us)", "/modeled/compile_us"},
      {"modeled total (us)", "/modeled/total_us", C::kModeledTotal},
      {"measured total (s)", "/measured_total_seconds", C::kMeasured, 6},
  };
  return columns;
}

std::vector<const SweepColumn*> SweepResult::columns() const {
  std::vector<const SweepColumn*> out;
  for (const SweepColumn& c : sweepColumns()) {
    if ((c.flags & SweepColumn::kMeasured) && !measured) continue;
    const nlohmann::ordered_json::json_pointer ptr(c.key);
    bool present = false, nonZero = false;
    for (const SweepPoint& p : points)
      if (p.ok() && p.report.contains(ptr)) {
        present = true;
        nonZero = nonZero || cellValue(p, c) != 0;
      }
    if ((c.flags & SweepColumn::kIfPresent) && !present) continue;
    if ((c.flags & SweepColumn::kIfNonZero) && !nonZero) continue;
    out.push_back(&c);
  }
  return out;
}

SweepResult runSweep(const SweepOptions& so, const Graph& g,
                     const std::vector<InputSignature>& trace, const std::vector<int>& traceLines) {
  SweepResult r;
  r.measured = so.measured;
  r.iterations = static_cast<int64_t>(trace.size());
  RunOptions base = so.run;
  base.modelOnly = !so.measured;
  base.quiet = true;  // a point prints nothing (runTrace's gear lines)
  r.profile = toSessionOptions(base, Mode::kStatic).cost.name;
  r.axes = parseGrid(so.grid, base);
  size_t count = 1;
  for (const SweepAxis& a : r.axes) {
    // Checked after each factor (each axis has fewer values than its text has bytes), so the
    // product never nears overflow.
    count *= a.values.size();
    if (count > kMaxSweepPoints)
      fail(ErrorKind::kConfig, "--grid: more than {} points; sweep fewer values at once",
           kMaxSweepPoints);
  }
  // Grid order: the first axis outermost, the last one fastest.
  std::vector<PreparedPoint> prepared(count);
  r.points.resize(count);
  std::map<std::string, std::pair<std::string, std::string>> suggestions;
  for (size_t i = 0; i < count; ++i) {
    SweepPoint& pt = r.points[i];
    PreparedPoint& p = prepared[i];
    size_t rest = i;
    pt.values.resize(r.axes.size());
    for (size_t k = r.axes.size(); k-- > 0;) {
      pt.values[k] = r.axes[k].values[rest % r.axes[k].values.size()];
      rest /= r.axes[k].values.size();
    }
    p.options = base;
    for (size_t k = 0; k < r.axes.size(); ++k) applyAxis(p.options, r.axes[k], pt.values[k]);
    const Mode mode = *parseMode(p.options.mode);
    try {
      if (p.options.gears == "suggest") {
        if (!modeInfo(mode).needsGears) {
          p.options.gears.clear();  // a mode without gears ignores them, as compare does
        } else {
          try {
            const auto [gears, fallback] = suggestFor(p.options, g, trace, suggestions);
            p.options.gears = pt.suggestedGears = gears;
            p.options.gearFallback = fallback;  // as compare: error becomes pad
          } catch (const Error& e) {
            // Nothing to gear (no dim varies): this point cannot run; the others can.
            pt.error = fmt::format("gears=suggest: {}", e.what());
            pt.errorKind = errorKindName(e.kind());
            continue;
          }
        }
      }
      p.session = toSessionOptions(p.options, mode);
      // A gear spec is parsed and checked against the graph when the session is built (no
      // gear compiles yet): a malformed one is a bad value, not a failing point.
      if (modeInfo(mode).needsGears) Session probe(g, p.session);
    } catch (const Error& e) {
      fail(ErrorKind::kConfig, "sweep point {} ({}): {}", i, pointLabel(r.axes, pt.values),
           e.what());
    }
    if (p.options.historyLimit == 0) p.session.historyLimit = kPointHistory;
  }
  auto runPoint = [&](size_t i) {
    PreparedPoint& p = prepared[i];
    if (!r.points[i].ok()) return;
    try {
      p.ran = std::make_unique<Session>(g, std::move(p.session));
      RunTracker tracker(p.ran->graph(), Verbosity::kQuiet, false);
      std::ostringstream nothing;  // quiet: runTrace prints nothing
      runTrace(*p.ran, trace, p.options, nothing, false, nullptr, &tracker, &traceLines);
    } catch (const Error& e) {
      p.error = e;
    } catch (const std::exception& e) {
      p.error = Error(ErrorKind::kConfig, e.what());
    }
  };
  // The reports, on this thread and in grid order: building one reads the process's warning
  // log, which the running points write. Points run in batches, so at most a batch of finished
  // sessions (their plans and kernels) is held at once.
  auto report = [&](size_t i) {
    PreparedPoint& p = prepared[i];
    SweepPoint& pt = r.points[i];
    if (!pt.ok()) return;
    if (p.ran) pt.report = pointReport(*p.ran, p.options, so.measured);
    if (p.error) {
      pt.error = p.error->what();
      pt.errorKind = errorKindName(p.error->kind());
      if (p.ran) {
        pt.report["complete"] = false;
        pt.report["error"] = {{"kind", pt.errorKind}, {"message", pt.error}};
      }
    }
    p.ran.reset();
  };
  for (size_t start = 0; start < count; start += kPointBatch) {
    const size_t n = std::min(kPointBatch, count - start);
    if (so.measured) {
      for (size_t j = 0; j < n; ++j) runPoint(start + j);
    } else {
      parallelFor(n, [&](size_t j) { runPoint(start + j); });
    }
    for (size_t j = 0; j < n; ++j) report(start + j);
  }
  return r;
}

std::string formatSweepTable(const SweepOptions& o, const SweepResult& r) {
  const std::vector<const SweepColumn*> columns = r.columns();
  std::vector<std::string> header = {"#"};
  for (const SweepAxis& a : r.axes) header.push_back(a.name);
  for (const SweepColumn* c : columns) header.push_back(c->header);
  header.push_back("status");
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < r.points.size(); ++i) {
    const SweepPoint& p = r.points[i];
    std::vector<std::string> row = {std::to_string(i)};
    for (const std::string& v : p.values) row.push_back(v);
    for (const SweepColumn* c : columns) row.push_back(cellText(p, *c));
    row.push_back(p.ok() ? "ok" : "failed (" + p.errorKind + ")");
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(header.size());
  for (size_t k = 0; k < header.size(); ++k) {
    width[k] = header[k].size();
    for (const auto& row : rows) width[k] = std::max(width[k], row[k].size());
  }
  std::string s = fmt::format(
      "sweep of {} over {} ({} iterations per point), {} {}, device profile {}{}\n", o.run.model,
      o.run.trace, r.iterations, r.points.size(), r.points.size() == 1 ? "point" : "points",
      r.profile,
      r.measured ? "; measured: kernels executed, one point at a time"
                 : "; model only: kernels NOT executed, every figure exact, times MODELED");
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (size_t k = 0; k < cells.size(); ++k) {
      const bool last = k + 1 == cells.size();
      l += last ? cells[k] : fmt::format("{:>{}}  ", cells[k], width[k]);
    }
    s += l + "\n";
  };
  line(header);
  for (const auto& row : rows) line(row);
  for (size_t i = 0; i < r.points.size(); ++i) {
    const SweepPoint& p = r.points[i];
    if (!p.suggestedGears.empty())
      s += fmt::format("#{} gears=suggest chose {}\n", i, p.suggestedGears);
    if (!p.ok()) s += fmt::format("#{} failed: {}\n", i, p.error);
  }
  return s;
}

nlohmann::ordered_json sweepJson(const SweepOptions& o, const SweepResult& r) {
  nlohmann::ordered_json j;
  j["schema_version"] = kReportSchemaVersion;
  j["tool"] = toolJson();
  j["command"] = "sweep";
  j["model"] = o.run.model;
  j["trace"] = o.run.trace;
  j["iterations"] = r.iterations;
  j["measured"] = r.measured;
  j["device_profile"] = r.profile;
  auto& axes = j["axes"] = nlohmann::ordered_json::array();
  for (const SweepAxis& a : r.axes)
    axes.push_back({{"name", a.name},
                    {"option", a.option->names},
                    {"config", a.option->config},
                    {"values", a.values}});
  const std::vector<const SweepColumn*> columns = r.columns();
  auto& cols = j["columns"] = nlohmann::ordered_json::array();
  for (const SweepColumn* c : columns)
    cols.push_back({{"name", c->header}, {"report_key", c->key}});
  auto& points = j["points"] = nlohmann::ordered_json::array();
  for (const SweepPoint& p : r.points) {
    nlohmann::ordered_json pj;
    auto& values = pj["axes"] = nlohmann::ordered_json::object();
    for (size_t k = 0; k < r.axes.size(); ++k) values[r.axes[k].name] = p.values[k];
    pj["ok"] = p.ok();
    if (!p.ok()) pj["error"] = {{"kind", p.errorKind}, {"message", p.error}};
    if (!p.suggestedGears.empty()) pj["suggested_gears"] = p.suggestedGears;
    auto& row = pj["row"] = nlohmann::ordered_json::object();
    for (const SweepColumn* c : columns) {
      const nlohmann::ordered_json::json_pointer ptr(c->key);
      row[c->header] = p.ok() && p.report.contains(ptr) ? p.report[ptr] : nlohmann::ordered_json();
    }
    pj["report"] = p.report.is_null() ? nlohmann::ordered_json::object() : p.report;
    points.push_back(std::move(pj));
  }
  // Every point's warnings, once each, sorted (the points ran at once, in no fixed order).
  std::vector<WarningLog::Entry> warnings = warningLog().entries();
  std::sort(warnings.begin(), warnings.end(),
            [](const auto& a, const auto& b) { return a.message < b.message; });
  auto& wm = j["warning_messages"] = nlohmann::ordered_json::array();
  for (const WarningLog::Entry& w : warnings)
    wm.push_back({{"message", w.message}, {"count", w.count}});
  return j;
}

std::string renderSweepHtml(const SweepOptions& o, const SweepResult& r) {
  const std::vector<const SweepColumn*> columns = r.columns();
  const SweepColumn* total = nullptr;
  for (const SweepColumn* c : columns)
    if (c->flags & SweepColumn::kModeledTotal) total = c;
  std::string h = svgplot::pageStart("gearbox sweep: " + o.run.model);
  h += fmt::format(
      "<p class=\"note\">trace {} ({} iterations per point), {} points, device profile {}. "
      "{}</p>\n",
      htmlEscape(o.run.trace), r.iterations, r.points.size(), htmlEscape(r.profile),
      r.measured ? "Measured: kernels executed one point at a time on " +
                       htmlEscape(svgplot::machine()) + "."
                 : "Model only: kernels were NOT executed; every figure is exact, and every time "
                   "is MODELED by the cost model from the device profile (docs/cost-model.md).");
  h += "<h2>Grid</h2>\n<table>\n<tr><th>#</th>";
  for (const SweepAxis& a : r.axes) h += "<th>" + htmlEscape(a.name) + "</th>";
  for (const SweepColumn* c : columns) h += "<th>" + htmlEscape(c->header) + "</th>";
  h += "<th>status</th></tr>\n";
  for (size_t i = 0; i < r.points.size(); ++i) {
    const SweepPoint& p = r.points[i];
    h += fmt::format("<tr><td>{}</td>", i);
    for (const std::string& v : p.values) h += "<td>" + htmlEscape(v) + "</td>";
    for (const SweepColumn* c : columns) h += "<td>" + htmlEscape(cellText(p, *c)) + "</td>";
    h += p.ok() ? "<td>ok</td>"
                : "<td class=\"failed\">" + htmlEscape("failed: " + p.error) + "</td>";
    h += "</tr>\n";
  }
  h += "</table>\n";
  // One series per value of the axes after the first, its points along the first axis.
  std::vector<std::string> seriesOf(r.points.size());
  std::vector<std::string> seriesNames;
  for (size_t i = 0; i < r.points.size(); ++i) {
    std::vector<std::string> rest;
    for (size_t k = 1; k < r.axes.size(); ++k)
      rest.push_back(r.axes[k].name + "=" + r.points[i].values[k]);
    seriesOf[i] = rest.empty() ? "all points" : fmt::format("{}", fmt::join(rest, ", "));
    if (std::find(seriesNames.begin(), seriesNames.end(), seriesOf[i]) == seriesNames.end())
      seriesNames.push_back(seriesOf[i]);
  }
  h += "<h2>Trade-offs</h2>\n<p class=\"note\">MODELED total device time of each point "
       "against each figure it trades for; a point is labelled with its first axis's value, "
       "failed points are left out.</p>\n<div class=\"plots\">\n";
  for (const SweepColumn* x : columns) {
    if (!(x->flags & SweepColumn::kPlotX) || !total) continue;
    std::vector<svgplot::ScatterSeries> series;
    for (size_t s = 0; s < seriesNames.size(); ++s) {
      svgplot::ScatterSeries se{seriesNames[s], svgplot::modeColor(s), {}};
      for (size_t i = 0; i < r.points.size(); ++i) {
        const SweepPoint& p = r.points[i];
        if (!p.ok() || seriesOf[i] != seriesNames[s]) continue;
        const std::string label = r.axes.empty() ? "" : p.values[0];
        se.points.push_back({cellValue(p, *x), cellValue(p, *total), label,
                             fmt::format("#{} {}", i, pointLabel(r.axes, p.values))});
      }
      series.push_back(std::move(se));
    }
    h += svgplot::scatterPlot("total-vs-" + x->key.substr(1), total->header + " vs " + x->header,
                              x->header, total->header, series);
  }
  h += "</div>\n";
  for (size_t i = 0; i < r.points.size(); ++i)
    if (!r.points[i].ok())
      h +=
          fmt::format("<p class=\"failed\">#{} failed: {}</p>\n", i, htmlEscape(r.points[i].error));
  h += svgplot::pageEnd("gearbox sweep --html");
  return h;
}

CommandResult sweepCommand(SweepOptions& o, std::ostream& out, std::ostream& err) {
  (void)err;  // a point's warnings are in the JSON, once each; nothing is printed as it runs
  RunOptions& base = o.run;
  if (!o.json.empty()) checkOutputPath("--json", o.json);
  if (!o.html.empty()) checkOutputPath("--html", o.html);
  checkOutputsAreNotInputs({{"--json", o.json}, {"--html", o.html}}, inputPaths(base));
  RunOptions checked = base;
  checked.modelOnly = !o.measured;
  toSessionOptions(checked, Mode::kStatic);  // the fixed settings first: their own errors
  parseGrid(o.grid, checked);
  configureLogging(LogOptions{"", false, true});
  warningLog().clear();
  installWarningSink(nullptr);
  const Graph g = loadGraph(base.model);
  std::vector<int> lines;
  const std::vector<InputSignature> trace = loadTrace(base.trace, g, &lines);
  const SweepResult r = runSweep(o, g, trace, lines);
  out << formatSweepTable(o, r);
  CommandResult result;
  result.report = sweepJson(o, r);
  if (!o.json.empty()) writeJsonFile(o.json, result.report);
  if (!o.html.empty()) {
    writeFileAtomic(o.html, renderSweepHtml(o, r));
    out << fmt::format("html report: {}\n", o.html);
  }
  return result;
}

}  // namespace gearbox::cli
