#include "driver/size_sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>

#include "driver/run_report.h"
#include "driver/trace.h"
#include "executor/modes/geared.h"
#include "graph/error.h"

namespace gearbox::cli {

namespace {

std::vector<std::string> splitColons(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(':', start);
    out.push_back(s.substr(start, at == std::string::npos ? at : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

// A whole number written in decimal digits only: no sign, no exponent, no spaces, in int64.
int64_t wholeNumber(const std::string& spec, const std::string& tok, const char* what) {
  int64_t v = 0;
  const char* end = tok.data() + tok.size();
  const auto [ptr, ec] = std::from_chars(tok.data(), end, v);
  if (tok.empty() || tok[0] == '-' || ec != std::errc() || ptr != end)
    fail(ErrorKind::kConfig, "--sweep-dim '{}': {} '{}' is not a whole number", spec, what, tok);
  return v;
}

std::string dimName(int64_t d) {
  return isStaticDim(d) ? std::to_string(d) : dimToString(d);
}

// The dynamic dims of one declared shape, as "0 (B), 1 (S)".
std::string dynamicDims(const Shape& s) {
  std::vector<std::string> parts;
  for (int k = 0; k < s.rank(); ++k)
    if (!isStaticDim(s[k])) parts.push_back(fmt::format("{} ({})", k, dimName(s[k])));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

std::string SizeSweep::label() const {
  return symbol.empty() ? fmt::format("{} dim {}", input, dim)
                        : fmt::format("{} dim {} ({})", input, dim, symbol);
}

SizeSweep parseSizeSweep(const Graph& g, const std::string& spec, const std::string& base) {
  SizeSweep sw;
  sw.spec = spec;
  const std::vector<std::string> f = splitColons(spec);
  if (f.size() != 4 && f.size() != 5)
    fail(ErrorKind::kConfig,
         "--sweep-dim '{}': expected INPUT[:DIM]:START:STEP:END, e.g. x:1:2:128 (sizes 1, 3, "
         "..., 127 of x's one dynamic dim) or input_ids:1:16:16:512",
         spec);
  sw.input = f[0];
  const int in = g.findInput(sw.input);
  if (in < 0) {
    std::vector<std::string> names;
    for (ValueId v : g.inputs) names.push_back(g.values[v].name);
    fail(ErrorKind::kConfig, "--sweep-dim '{}': graph {} has no input '{}' (its inputs: {})", spec,
         g.name, sw.input, fmt::join(names, ", "));
  }
  const Shape& decl = g.values[g.inputs[in]].type.shape;
  if (f.size() == 5) {
    const int64_t d = wholeNumber(spec, f[1], "DIM");
    if (d >= decl.rank())
      fail(ErrorKind::kConfig, "--sweep-dim '{}': input '{}' has rank {}, no dim {}", spec,
           sw.input, decl.rank(), d);
    sw.dim = static_cast<int>(d);
    if (isStaticDim(decl[sw.dim]))
      fail(ErrorKind::kConfig,
           "--sweep-dim '{}': input '{}' dim {} is static ({}); only a dynamic dim can be swept "
           "(its dynamic dims: {})",
           spec, sw.input, sw.dim, decl[sw.dim],
           decl.isStatic() ? std::string("none") : dynamicDims(decl));
  } else {
    std::vector<int> dyn;
    for (int k = 0; k < decl.rank(); ++k)
      if (!isStaticDim(decl[k])) dyn.push_back(k);
    if (dyn.size() != 1)
      fail(ErrorKind::kConfig,
           "--sweep-dim '{}': input '{}' has {} dynamic dims{}{}; say which, as "
           "INPUT:DIM:START:STEP:END",
           spec, sw.input, dyn.size(), dyn.empty() ? "" : ": ", dynamicDims(decl));
    sw.dim = dyn[0];
  }
  const int64_t swept = decl[sw.dim];
  const auto expr = dimExpr(swept);
  if (expr && expr->base != swept)
    fail(ErrorKind::kConfig,
         "--sweep-dim '{}': input '{}' dim {} is the expression {}: sweep the dim of its symbol "
         "instead",
         spec, sw.input, sw.dim, dimToString(swept));
  if (isSymbolDim(swept)) sw.symbol = symbolName(swept);
  const size_t n = f.size();
  const int64_t start = wholeNumber(spec, f[n - 3], "START");
  const int64_t step = wholeNumber(spec, f[n - 2], "STEP");
  const int64_t end = wholeNumber(spec, f[n - 1], "END");
  if (start < 1) fail(ErrorKind::kConfig, "--sweep-dim '{}': START must be >= 1", spec);
  if (step < 1) fail(ErrorKind::kConfig, "--sweep-dim '{}': STEP must be >= 1", spec);
  if (end < start)
    fail(ErrorKind::kConfig, "--sweep-dim '{}': END ({}) is below START ({})", spec, end, start);
  const int64_t count = (end - start) / step + 1;  // both >= 0: no overflow
  if (count > kMaxSweepSizes)
    fail(ErrorKind::kConfig, "--sweep-dim '{}': {} sizes, above the limit of {}", spec, count,
         kMaxSweepSizes);

  // The base call: --sweep-base's shapes, the declared ones for inputs it does not name.
  InputSignature baseSig;
  if (base.empty()) {
    for (ValueId v : g.inputs) baseSig.push_back(g.values[v].type.shape);
  } else {
    baseSig = parseShapesJson(base, g, "--sweep-base");
    // Ranks first: the dims below are read by position.
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      const Shape& d = g.values[g.inputs[i]].type.shape;
      if (baseSig[i].rank() != d.rank())
        fail(ErrorKind::kConfig, "--sweep-base: input '{}': expected rank {} ({}), got rank {}",
             g.values[g.inputs[i]].name, d.rank(), d.toString(), baseSig[i].rank());
    }
  }
  // Symbols the base binds ({"input_ids": [4, 1]} binds B = 4 for attention_mask [B, S] too).
  std::vector<std::pair<int64_t, int64_t>> bound;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Shape& s = g.values[g.inputs[i]].type.shape;
    for (int k = 0; k < s.rank(); ++k)
      // A plain symbol (an expression's base is another dim).
      if (isSymbolDim(s[k]) && s[k] != swept && dimExpr(s[k])->base == s[k] &&
          isStaticDim(baseSig[i][k]))
        bound.emplace_back(s[k], baseSig[i][k]);
  }
  auto boundValue = [&](int64_t d) -> std::optional<int64_t> {
    const auto e = dimExpr(d);
    if (!e) return std::nullopt;
    for (const auto& [sym, value] : bound)
      if (sym == e->base) return evalDim(d, value);
    return std::nullopt;
  };
  // Which dims follow the size: the swept one, and those of its symbol or expressions of it.
  struct Follower {
    size_t input;
    int dim;
  };
  std::vector<Follower> followers;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Value& v = g.values[g.inputs[i]];
    const Shape& s = v.type.shape;
    for (int k = 0; k < s.rank(); ++k) {
      const auto e = dimExpr(s[k]);
      const bool follows = (static_cast<int>(i) == in && k == sw.dim) ||
                           (isSymbolDim(swept) && e && e->base == swept);
      if (follows) {
        followers.push_back({i, k});
      } else if (isStaticDim(baseSig[i][k])) {
        continue;
      } else if (const auto value = boundValue(s[k]); value && *value >= 0) {
        baseSig[i][k] = *value;
      } else {
        fail(ErrorKind::kConfig,
             "--sweep-dim '{}': input '{}' dim {} ({}) is dynamic too: give its size with "
             "--sweep-base, a trace line, e.g. --sweep-base '{{\"{}\": [...]}}'",
             spec, v.name, k, dimName(s[k]), v.name);
      }
    }
  }
  for (int64_t size = start; size <= end; size += step) {
    InputSignature sig = baseSig;
    for (const Follower& fo : followers) {
      const int64_t d = g.values[g.inputs[fo.input]].type.shape[fo.dim];
      const int64_t value = isSymbolDim(d) ? evalDim(d, size) : size;
      if (value < 0)
        fail(ErrorKind::kConfig, "--sweep-dim '{}': size {} makes input '{}' dim {} ({}) {}", spec,
             size, g.values[g.inputs[fo.input]].name, fo.dim, dimToString(d), value);
      sig[fo.input][fo.dim] = value;
    }
    try {
      checkSignature(g, sig);
    } catch (const Error& e) {
      fail(ErrorKind::kConfig, "--sweep-dim '{}' at size {}{}: {}", spec, size,
           base.empty() ? "" : " (with --sweep-base)", e.what());
    }
    sw.sizes.push_back(size);
    sw.trace.push_back(std::move(sig));
    if (end - size < step) break;  // the next size would pass END (or overflow)
  }
  return sw;
}

SweepModeCurve sweepCurve(const SizeSweep& sweep, const std::string& mode,
                          const std::string& failure, const std::vector<CallRecord>& history,
                          const std::vector<std::vector<double>>& callSeconds) {
  SweepModeCurve c;
  c.mode = mode;
  c.failure = failure;
  for (size_t i = 0; i < history.size() && i < sweep.sizes.size(); ++i) {
    const CallRecord& rec = history[i];
    const GearedCall gc = gearedCall(rec);
    SweepCall call;
    call.size = sweep.sizes[i];
    call.modeledUs = rec.modeledDeviceUs;
    call.paddingWasteUs = rec.modeled.paddingWasteUs;
    call.graphCompiled = rec.graphCompiled;
    call.kernelsCompiled = static_cast<int64_t>(rec.kernelsCompiled.size());
    call.fallback = rec.fallback || !gc.fallback.empty();
    call.padded = gc.padded;
    std::vector<double> samples;
    for (const std::vector<double>& rep : callSeconds)
      if (i < rep.size()) samples.push_back(rep[i]);
    if (!samples.empty()) {
      std::sort(samples.begin(), samples.end());
      const size_t n = samples.size();
      call.measuredMedian = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
      call.measuredMin = samples.front();
      call.measuredMax = samples.back();
    }
    c.calls.push_back(call);
  }
  return c;
}

namespace {

std::string flags(const SweepCall& c) {
  std::string f;
  if (c.graphCompiled) f += 'C';
  if (!c.graphCompiled && c.kernelsCompiled > 0) f += 'K';
  if (c.fallback) f += 'F';
  if (c.padded) f += 'P';
  return f;
}

}  // namespace

void printSizeSweepTable(const SizeSweep& sweep, const std::vector<SweepModeCurve>& curves,
                         bool modelOnly, int repeat, std::ostream& os) {
  os << fmt::format(
      "per-call time against {}: one call per size, in this order; {}MODELED: the "
      "call's device time (us)\n",
      sweep.label(),
      modelOnly ? "measured: not shown (model only); "
                : fmt::format("MEASURED: median compile + run over {} repeat(s); ", repeat));
  // Per mode: [measured] MODELED flags.
  const int cell = modelOnly ? 16 : 28;
  std::string head = fmt::format("{:>8}", "size"), sub = fmt::format("{:>8}", "");
  for (const SweepModeCurve& c : curves) {
    head += fmt::format("  {:<{}}", c.mode, cell);
    sub += modelOnly ? fmt::format("  {:>11} {:<4}", "MODELED us", "")
                     : fmt::format("  {:>10} {:>12} {:<4}", "measured", "MODELED us", "");
  }
  auto trimmed = [](std::string line) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line;
  };
  os << trimmed(head) << "\n" << trimmed(sub) << "\n";
  for (size_t i = 0; i < sweep.sizes.size(); ++i) {
    std::string line = fmt::format("{:>8}", sweep.sizes[i]);
    for (const SweepModeCurve& c : curves) {
      if (i >= c.calls.size()) {
        line += fmt::format("  {:<{}}", i == c.calls.size() && !c.failure.empty() ? "failed" : "-",
                            cell);
        continue;
      }
      const SweepCall& s = c.calls[i];
      line += modelOnly ? fmt::format("  {:>11.1f} {:<4}", s.modeledUs, flags(s))
                        : fmt::format("  {:>10} {:>12.1f} {:<4}", formatSeconds(s.measuredMedian),
                                      s.modeledUs, flags(s));
    }
    os << trimmed(line) << "\n";
  }
  os << "C: compiled a graph (a plan or a capture) in the call; K: compiled kernels only; F: "
        "ran the dynamic or eager path (past the recompile limit, or outside the gears); P: "
        "padded up to a gear (the MODELED time is the gear's)\n";
  for (const SweepModeCurve& c : curves)
    if (!c.failure.empty()) os << fmt::format("{}: {}\n", c.mode, c.failure);
}

nlohmann::ordered_json sizeSweepJson(const SizeSweep& sweep,
                                     const std::vector<SweepModeCurve>& curves, bool modelOnly) {
  nlohmann::ordered_json j;
  j["spec"] = sweep.spec;
  j["input"] = sweep.input;
  j["dim"] = sweep.dim;
  j["symbol"] =
      sweep.symbol.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(sweep.symbol);
  j["sizes"] = sweep.sizes;
  auto& modes = j["modes"] = nlohmann::ordered_json::object();
  for (const SweepModeCurve& c : curves) {
    auto& m = modes[c.mode];
    auto column = [&](auto&& get) {
      nlohmann::ordered_json a = nlohmann::ordered_json::array();
      for (const SweepCall& s : c.calls) a.push_back(get(s));
      return a;
    };
    m["calls"] = c.calls.size();
    m["modeled_device_us"] = column([](const SweepCall& s) { return s.modeledUs; });
    m["modeled_padding_waste_us"] = column([](const SweepCall& s) { return s.paddingWasteUs; });
    m["graph_compiled"] = column([](const SweepCall& s) { return s.graphCompiled; });
    m["kernels_compiled"] = column([](const SweepCall& s) { return s.kernelsCompiled; });
    m["fallback"] = column([](const SweepCall& s) { return s.fallback; });
    m["padded"] = column([](const SweepCall& s) { return s.padded; });
    if (!modelOnly) {
      m["measured_median_seconds"] = column([](const SweepCall& s) { return s.measuredMedian; });
      m["measured_min_seconds"] = column([](const SweepCall& s) { return s.measuredMin; });
      m["measured_max_seconds"] = column([](const SweepCall& s) { return s.measuredMax; });
    }
    if (!c.failure.empty()) m["failure"] = c.failure;
  }
  return j;
}

}  // namespace gearbox::cli
