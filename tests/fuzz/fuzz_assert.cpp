// --assert bounds (driver/run_options.h parseAsserts): one assertion per line, parsed as compare
// parses them (with mode prefixes), then evaluated against a report holding every metric.
// Besides the harness's rule (nothing but gearbox::Error may escape), an accepted assertion
// must have a finite bound and text that is valid UTF-8 without control characters, and its
// JUnit/HTML escaping must hold no control character (issue 22: a \v bound reached the XML).
#include <cmath>
#include <cstdlib>

#include "driver/html_report.h"
#include "driver/run_options.h"
#include "executor/modes/mode_table.h"
#include "fuzz_common.h"
#include "graph/json_limits.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

bool hasControl(const std::string& s) {
  for (char c : s)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)
      return true;
  return false;
}

}  // namespace

GEARBOX_FUZZ_TARGET({
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= input.size() && lines.size() < 64) {
    size_t end = input.find('\n', start);
    if (end == std::string::npos) end = input.size();
    lines.push_back(input.substr(start, end - start));
    start = end + 1;
  }
  const auto asserts = gearbox::cli::parseAsserts(lines, gearbox::modeNames());
  nlohmann::ordered_json report = nlohmann::ordered_json::object();
  double v = 0;
  for (const std::string& m : gearbox::cli::knownMetrics()) report[m] = v++;
  for (const auto& a : asserts) {
    check(std::isfinite(a.bound));
    check(gearbox::isValidUtf8(a.text) && !hasControl(a.text));
    const auto r = gearbox::cli::evaluateAssert(a, report, nullptr, "static");
    check(!hasControl(gearbox::cli::htmlEscape(r.assertion)));
    check(!hasControl(gearbox::cli::htmlEscape(r.message)));
    (void)gearbox::cli::dumpJson(nlohmann::ordered_json{{"text", a.text}, {"m", r.message}});
  }
})
