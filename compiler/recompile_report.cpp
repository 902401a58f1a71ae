#include "compiler/recompile_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <unordered_set>
#include <utility>

#include "graph/error.h"

namespace gearbox {
namespace {

// Python's str.strip() removes every code point for which str.isspace() is true, not only
// ASCII blanks: \x1c-\x1f and Unicode spaces count too, and they end up in (or out of) kernel
// names, so matching the script byte for byte needs the whole set. UTF-8 encodings of the
// non-ASCII ones; each starts with a lead byte, so a match at either end of valid UTF-8 is
// always a whole code point.
constexpr std::array<std::string_view, 19> kUnicodeSpaces = {
    "\xc2\x85",     "\xc2\xa0",     "\xe1\x9a\x80", "\xe2\x80\x80", "\xe2\x80\x81",
    "\xe2\x80\x82", "\xe2\x80\x83", "\xe2\x80\x84", "\xe2\x80\x85", "\xe2\x80\x86",
    "\xe2\x80\x87", "\xe2\x80\x88", "\xe2\x80\x89", "\xe2\x80\x8a", "\xe2\x80\xa8",
    "\xe2\x80\xa9", "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80"};

bool isAsciiPythonSpace(char c) {
  return (c >= '\t' && c <= '\r') || c == ' ' || (c >= '\x1c' && c <= '\x1f');
}

// Length of the whitespace code point at the start (atEnd = false) or end of `s`, 0 if none.
size_t spaceLength(std::string_view s, bool atEnd) {
  if (s.empty()) return 0;
  if (isAsciiPythonSpace(atEnd ? s.back() : s.front())) return 1;
  for (std::string_view space : kUnicodeSpaces) {
    if (atEnd ? s.ends_with(space) : s.starts_with(space)) return space.size();
  }
  return 0;
}

std::string_view pythonStrip(std::string_view s) {
  while (size_t n = spaceLength(s, false)) s.remove_prefix(n);
  while (size_t n = spaceLength(s, true)) s.remove_suffix(n);
  return s;
}

// Python's `line.split(sep)[1]` for a line known to contain `sep`: the text after the first
// occurrence up to the next one (or the end of the line).
std::string_view secondField(std::string_view line, std::string_view sep) {
  const size_t start = line.find(sep) + sep.size();
  const size_t end = line.find(sep, start);
  return line.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
}

// The op type used to group kernels: the name up to its first '_' (the whole name if none).
std::string_view opType(std::string_view name) {
  return name.substr(0, name.find('_'));
}

std::string displayName(std::string_view name) {
  return name.empty() ? std::string("(empty name)") : std::string(name);
}

std::string joinSections(const std::vector<size_t>& sections) {
  std::string out;
  for (size_t s : sections) out += fmt::format("{}{}", out.empty() ? "" : ", ", s);
  return out;
}

std::string plural(size_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// "1, 2, 5" or, for more than three consecutive sizes, "1..64".
std::string sizesText(const std::set<int64_t>& v) {
  if (v.size() > 3 && *v.rbegin() - *v.begin() == static_cast<int64_t>(v.size()) - 1)
    return fmt::format("{}..{}", *v.begin(), *v.rbegin());
  return fmt::format("{}", fmt::join(v, ", "));
}

// The "(input i dim j varies: ...)" text for one op type: every kernel of that type in the
// log, grouped by input ranks, but only groups holding a suspect are described.
std::string describeVariation(const std::vector<std::string>& allOfType,
                              const std::set<std::string>& suspects) {
  struct Group {
    std::vector<std::vector<std::set<int64_t>>> values;  // [input][dim] -> distinct values
    size_t kernels = 0;
    bool hasSuspect = false;
  };
  std::map<std::vector<size_t>, Group> groups;
  size_t unparsedSuspects = 0;
  for (const std::string& name : allOfType) {
    const bool suspect = suspects.count(name) > 0;
    std::optional<ParsedKernelName> parsed = parseKernelName(name);
    if (!parsed) {
      unparsedSuspects += suspect;
      continue;
    }
    std::vector<size_t> ranks;
    for (const auto& dims : parsed->inputs) ranks.push_back(dims.size());
    Group& g = groups[ranks];
    if (g.values.empty()) {
      for (size_t r : ranks) g.values.emplace_back(r);
    }
    for (size_t i = 0; i < parsed->inputs.size(); ++i) {
      for (size_t j = 0; j < parsed->inputs[i].size(); ++j) {
        g.values[i][j].insert(parsed->inputs[i][j]);
      }
    }
    ++g.kernels;
    g.hasSuspect = g.hasSuspect || suspect;
  }

  std::vector<std::string> parts;
  size_t describedGroups = 0;
  for (const auto& [ranks, g] : groups) describedGroups += g.hasSuspect;
  for (const auto& [ranks, g] : groups) {
    if (!g.hasSuspect) continue;
    std::vector<std::string> varying;
    for (size_t i = 0; i < g.values.size(); ++i) {
      for (size_t j = 0; j < g.values[i].size(); ++j) {
        if (g.values[i][j].size() < 2) continue;
        varying.push_back(
            fmt::format("input {} dim {} varies: {}", i, j, sizesText(g.values[i][j])));
      }
    }
    std::string text = varying.empty() ? fmt::format("no dim varies across its {} with these ranks",
                                                     plural(g.kernels, "kernel"))
                                       : fmt::format("{}", fmt::join(varying, "; "));
    // Only name the ranks when an op type has several rank signatures among its suspects;
    // otherwise they add nothing to the line.
    if (describedGroups > 1) {
      std::vector<std::string> rankText;
      for (size_t r : ranks) rankText.push_back(std::to_string(r));
      text = fmt::format("ranks {}: {}", fmt::join(rankText, ","), text);
    }
    parts.push_back(std::move(text));
  }
  if (unparsedSuspects > 0) {
    parts.push_back(fmt::format("{} not in gearbox kernel-name format, no dim analysis",
                                plural(unparsedSuspects, "name")));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

RecompileReport parseCompileLog(std::string_view text, std::string_view splitFlag) {
  RecompileReport report;
  report.sections.emplace_back();
  // The script dedups with a list scan; a set per section gives the same result in O(1).
  std::unordered_set<std::string> seen;
  auto handleLine = [&](std::string_view rawLine) {
    const std::string_view line = pythonStrip(rawLine);
    // Order matters: the script tests the split flag first, so a line with both flags is only
    // a marker.
    if (line.find(splitFlag) != std::string_view::npos) {
      report.sections.emplace_back();
      seen.clear();
    } else if (line.find(kRecompileFlag) != std::string_view::npos) {
      std::string op(secondField(line, kRecompileFlag));
      if (seen.insert(op).second) report.sections.back().push_back(std::move(op));
    }
  };
  // Python opens the log in text mode, whose universal newlines turn "\r\n" and a lone "\r"
  // into "\n" before split('\n') runs; splitting on all three here is the same thing.
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n' && text[i] != '\r') continue;
    handleLine(text.substr(start, i - start));
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    start = i + 1;
  }
  handleLine(text.substr(start));
  return report;
}

std::string formatRecompileOpList(const RecompileReport& report) {
  std::string out;
  for (size_t k = 0; k < report.sections.size(); ++k) {
    out += fmt::format("iter: {}\n{}\n", k, fmt::join(report.sections[k], ","));
  }
  return out;
}

std::string summarize(const RecompileReport& report, int stableSteps) {
  if (stableSteps < 0) {
    fail(ErrorKind::kConfig, "stable steps must be >= 0, got {}", stableSteps);
  }
  const size_t firstSuspect = static_cast<size_t>(stableSteps) + 1;

  // Every distinct name per op type in order of first appearance, and the suspect sections of
  // each name compiled after the stable steps.
  std::map<std::string, std::vector<std::string>, std::less<>> allByType;
  std::set<std::string> distinct;
  std::map<std::string, std::vector<size_t>> suspectSections;
  std::map<std::string, std::vector<size_t>> earlierSections;
  std::map<std::string, std::vector<std::string>, std::less<>> suspectsByType;
  size_t entries = 0;
  for (size_t k = 0; k < report.sections.size(); ++k) {
    for (const std::string& name : report.sections[k]) {
      ++entries;
      if (distinct.insert(name).second) allByType[std::string(opType(name))].push_back(name);
      if (k < firstSuspect) {
        earlierSections[name].push_back(k);
        continue;
      }
      std::vector<size_t>& sections = suspectSections[name];
      if (sections.empty()) suspectsByType[std::string(opType(name))].push_back(name);
      sections.push_back(k);
    }
  }

  std::string out = fmt::format(
      "recompile report: {} (iter 0 = before the first marker), {}, {} {}\n",
      plural(report.sections.size(), "section"), plural(distinct.size(), "distinct kernel"),
      entries, entries == 1 ? "list entry" : "list entries");
  out += "kernels per section:";
  for (size_t k = 0; k < report.sections.size(); ++k) {
    out += fmt::format("{} iter {}: {}", k == 0 ? "" : ",", k, report.sections[k].size());
  }
  out += "\n";
  if (entries == 0 && report.sections.size() > 1) {
    // The seed's `grep "To compile op|=====iter"` is a basic regex: '|' is a literal there, so
    // it keeps the markers and drops every compile line.
    out +=
        "hint: the log has iteration markers but no 'To compile op: <kernel>' lines. In a basic "
        "regex '|' is a literal, so grep \"To compile op|=====iter\" keeps only the markers; use "
        "grep -E 'To compile op(: |\\|=====iter)' (or gearbox run --log) to keep both\n";
  }

  if (suspectSections.empty()) {
    out += fmt::format("dynamic-shape suspects (compiled after iter {}): none\n", stableSteps);
    return out;
  }
  out += fmt::format("dynamic-shape suspects (compiled after iter {}): {} of {}\n", stableSteps,
                     plural(suspectSections.size(), "kernel"),
                     plural(suspectsByType.size(), "op type"));
  for (const auto& [type, names] : suspectsByType) {
    const std::set<std::string> suspects(names.begin(), names.end());
    out += fmt::format("{}: {} compiled after iter {} ({})\n", displayName(type),
                       plural(names.size(), "kernel"), stableSteps,
                       describeVariation(allByType.find(type)->second, suspects));
    for (const std::string& name : names) {
      // A suspect that was also compiled early means the same shape came back after other
      // shapes were seen: a hint that the shape cycles (or that the kernel cache evicted it).
      auto earlier = earlierSections.find(name);
      out +=
          fmt::format("  {} (iter {}{})\n", displayName(name), joinSections(suspectSections[name]),
                      earlier == earlierSections.end()
                          ? std::string()
                          : "; also before, in iter " + joinSections(earlier->second));
    }
  }
  return out;
}

}  // namespace gearbox
