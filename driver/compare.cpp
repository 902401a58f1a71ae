#include "driver/compare.h"

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>

#include "graph/error.h"

namespace gearbox::cli {

namespace {

struct Cost {
  double compile, run, total;
};

// Explains the winner: for every other mode, whether it loses on compiles or on per-call
// cost, in the same units as the table.
std::string explain(const std::vector<const ModeResult*>& ranked, auto&& cost) {
  const ModeResult* best = ranked.front();
  const Cost b = cost(*best);
  const double calls = std::max(1.0, best->calls);
  std::string why;
  for (const ModeResult* r : ranked) {
    if (r == best) continue;
    const Cost c = cost(*r);
    why += why.empty() ? "" : "; ";
    if (c.total == b.total) {
      why += fmt::format("{} ties ({:.0f} us)", modeName(r->mode), c.total);
      continue;
    }
    why += c.compile - b.compile >= c.run - b.run
               ? fmt::format("{} loses on compiles ({:.0f} us vs {:.0f} us)", modeName(r->mode),
                             c.compile, b.compile)
               : fmt::format("{} loses on per-call cost ({:.1f} us vs {:.1f} us per call)",
                             modeName(r->mode), c.run / calls, b.run / calls);
  }
  return why;
}

std::string withSpread(const Spread& s) {
  return fmt::format("{} +-{}", formatSeconds(s.median), formatSeconds(s.spread() / 2));
}

}  // namespace

Spread spreadOf(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return {median, v.front(), v.back()};
}

int64_t totalWarnings() {
  int64_t n = 0;
  for (const WarningLog::Entry& w : warningLog().entries()) n += w.count;
  return n;
}

std::vector<Mode> parseModes(const std::string& list) {
  std::vector<Mode> modes;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto m = parseMode(item);
    if (!m)
      fail(ErrorKind::kConfig, "--modes: unknown mode '{}' ({})", item,
           joinModeNames(ModeSet::kAll, ", ", ", "));
    for (Mode seen : modes)
      if (seen == *m) fail(ErrorKind::kConfig, "--modes: '{}' given twice", item);
    modes.push_back(*m);
  }
  if (modes.empty()) fail(ErrorKind::kConfig, "--modes: no mode given");
  return modes;
}

// Largest elementwise difference between two modes' outputs over the whole trace.
double maxDiff(const std::vector<std::vector<Tensor>>& a,
               const std::vector<std::vector<Tensor>>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    for (size_t k = 0; k < a[i].size(); ++k) m = std::max(m, maxAbsDiff(a[i][k], b[i][k]));
  return m;
}

// oneTBB creates its worker threads on the first parallel algorithm; geared mode is the first
// to use one, so that start-up used to land in its measured compile time. Warm the arena up
// once before anything is timed, and report what it cost on its own line.
double warmTbbArena() {
  const auto start = std::chrono::steady_clock::now();
  std::vector<double> sink(1 << 12, 1.0);
  tbb::parallel_for(size_t{0}, sink.size(), [&](size_t i) { sink[i] = sink[i] * 0.5 + 1.0; });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void printCompareTable(const std::vector<ModeResult>& results, int repeat, std::ostream& os) {
  std::string header = fmt::format("{:<36}", "");
  for (const ModeResult& r : results) header += fmt::format(" {:>21}", modeName(r.mode));
  os << header << "\n";
  auto row = [&](const std::string& label, auto&& cell) {
    std::string line = fmt::format("{:<36}", label);
    for (const ModeResult& r : results) line += fmt::format(" {:>21}", r.ok() ? cell(r) : "failed");
    os << line << "\n";
  };
  auto count = [&](const char* key) {
    return [key](const ModeResult& r) { return dumpJson(r.report[key]); };
  };
  row("graph compiles", count("graph_compiles"));
  row("kernel compiles", count("kernel_compiles"));
  row("plan cache hits", count("plan_cache_hits"));
  row("kernel cache hits", count("kernel_cache_hits"));
  row("launches", count("launches"));
  row("syncs", count("syncs"));
  row("allocations", count("allocations"));
  row("fallback runs", count("fallback_runs"));
  // Geared calls outside the gears under --gear-fallback dynamic or eager (a mode counter).
  auto fallbackCalls = [](const ModeResult& r) {
    const auto mc = r.report.find("mode_counters");
    return mc != r.report.end() && mc->contains("fallback_calls")
               ? std::optional<int64_t>((*mc)["fallback_calls"].get<int64_t>())
               : std::nullopt;
  };
  if (std::any_of(results.begin(), results.end(),
                  [&](const ModeResult& r) { return r.ok() && fallbackCalls(r); }))
    row("gear fallback calls", [&](const ModeResult& r) {
      const auto n = fallbackCalls(r);
      return n ? std::to_string(*n) : std::string("-");
    });
  const std::string n = fmt::format(" (median, n={})", repeat);
  row("measured host compile" + n, [](const ModeResult& r) { return withSpread(r.compileS); });
  row("measured runs" + n, [](const ModeResult& r) { return withSpread(r.runS); });
  row("measured total" + n, [](const ModeResult& r) { return withSpread(r.totalS); });
  auto us = [](double v) { return fmt::format("{:.1f} us", v); };
  row("MODELED compile", [&](const ModeResult& r) { return us(r.modeled.compileUs); });
  row("MODELED launch+sync+alloc", [&](const ModeResult& r) { return us(r.modeled.launchSyncUs); });
  row("MODELED compute", [&](const ModeResult& r) { return us(r.modeled.computeUs); });
  row("MODELED padding waste (of compute)", [&](const ModeResult& r) {
    const double pct =
        r.modeled.computeUs > 0 ? 100.0 * r.modeled.paddingWasteUs / r.modeled.computeUs : 0.0;
    return fmt::format("{:.1f} us {:.0f}%", r.modeled.paddingWasteUs, pct);
  });
  row("MODELED host dynamic-shape work",
      [&](const ModeResult& r) { return us(r.modeled.hostDynamicUs); });
  row("MODELED device time", [&](const ModeResult& r) { return us(r.modeled.total()); });
  row("MODELED last call", [&](const ModeResult& r) { return us(r.modeledLastCallUs); });
  // Start-up vs first call (--gear-compile): the up-front compiles and the first call.
  auto startup = [](const ModeResult& r, const char* key) {
    const auto s = r.report.find("startup");
    return s != r.report.end() ? (*s)[key].get<double>() : 0.0;
  };
  row("MODELED start-up (up-front compiles)",
      [&](const ModeResult& r) { return us(startup(r, "modeled_up_front_compile_us")); });
  row("MODELED first call",
      [&](const ModeResult& r) { return us(startup(r, "modeled_first_call_us")); });
  auto mib = [](const char* key) {
    return [key](const ModeResult& r) {
      return humanBytes(r.report["modeled_memory"][key].get<int64_t>());
    };
  };
  row("MODELED memory resident", mib("resident_bytes"));
  row("MODELED memory peak", mib("peak_bytes"));
}

std::string modeledVerdict(const std::vector<ModeResult>& results) {
  std::vector<const ModeResult*> ranked;
  for (const ModeResult& r : results)
    if (r.ok()) ranked.push_back(&r);
  if (ranked.empty()) return "no MODELED verdict: every mode failed";
  auto cost = [](const ModeResult& r) {
    return Cost{r.modeled.compileUs, r.modeled.total() - r.modeled.compileUs, r.modeled.total()};
  };
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](auto* a, auto* b) { return cost(*a).total < cost(*b).total; });
  const Cost b = cost(*ranked.front());
  const std::string why = explain(ranked, cost);
  return fmt::format(
      "fastest by MODELED device time: {}: {:.0f} us = {:.0f} us compiling + {:.0f} us "
      "running{}{}",
      modeName(ranked.front()->mode), b.total, b.compile, b.run, why.empty() ? "" : "\n  ", why);
}

// Measured verdict: by median total; printed only when the winner beats the runner-up by more
// than the larger of their spreads (max - min over the repeats).
std::string measuredVerdict(const std::vector<ModeResult>& results, int repeat) {
  std::vector<const ModeResult*> ranked;
  for (const ModeResult& r : results)
    if (r.ok()) ranked.push_back(&r);
  if (ranked.empty()) return "no measured verdict: every mode failed";
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](auto* a, auto* b) { return a->totalS.median < b->totalS.median; });
  const ModeResult& w = *ranked.front();
  if (ranked.size() > 1) {
    const ModeResult& r = *ranked[1];
    const double gap = r.totalS.median - w.totalS.median;
    const double noise = std::max(w.totalS.spread(), r.totalS.spread());
    if (gap <= noise)
      return fmt::format(
          "measured host time: no clear winner: {} and {} within noise ({} vs {}; the "
          "medians differ by {}, the spread over {} runs is {})",
          modeName(w.mode), modeName(r.mode), formatSeconds(w.totalS.median),
          formatSeconds(r.totalS.median), formatSeconds(gap), repeat, formatSeconds(noise));
  }
  auto cost = [](const ModeResult& r) {
    return Cost{r.compileS.median * 1e6, r.runS.median * 1e6, r.totalS.median * 1e6};
  };
  const Cost b = cost(w);
  const std::string why = explain(ranked, cost);
  return fmt::format(
      "fastest by measured host time (median of {}): {}: {:.0f} us = {:.0f} us compiling + "
      "{:.0f} us running{}{}",
      repeat, modeName(w.mode), b.total, b.compile, b.run, why.empty() ? "" : "\n  ", why);
}

}  // namespace gearbox::cli
