// A device profile plus --cost overrides (executor/cost_model.h): the first line is profile JSON
// applied over the built-in profile, every further line one --cost key=value. Besides the
// harness's own rule (nothing but gearbox::Error may escape), a profile that loaded must
// write itself out as a profile that loads again with the same figures, and every modeled
// figure of it must be finite: the physical ranges (issue 22) are what guarantees that.
#include <cmath>
#include <cstdlib>

#include "executor/cost_model.h"
#include "fuzz_common.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();  // an invariant broke: a finding, not an input error
}

void run(const std::string& input) {
  gearbox::CostModel m;
  size_t start = 0;
  bool first = true;
  while (start <= input.size()) {
    size_t end = input.find('\n', start);
    if (end == std::string::npos) end = input.size();
    const std::string line = input.substr(start, end - start);
    if (first) {
      if (!line.empty()) gearbox::applyCostJson(m, line, "fuzz.json");
    } else {
      gearbox::applyCostOverride(m, line);
    }
    first = false;
    start = end + 1;
  }
  const std::string text = gearbox::costModelToJson(m);
  gearbox::CostModel again;
  gearbox::applyCostJson(again, text, "round trip");  // an Error here escapes: a finding
  check(gearbox::costModelToJson(again) == text);
  // The largest per-call figures the ranges allow stay finite.
  check(std::isfinite(m.graphCompile(1000000)) && std::isfinite(m.graphLaunch(1000000)));
  gearbox::KernelCost huge{1e30, 1e30};
  for (gearbox::DType t : {gearbox::DType::kF32, gearbox::DType::kI32, gearbox::DType::kI64})
    check(std::isfinite(m.roofline(huge, t)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  try {
    run(input);
  } catch (const gearbox::Error& e) {
    // The round trip throwing is a finding, an input error is not: only the first kind names
    // "round trip".
    check(std::string(e.what()).rfind("round trip", 0) != 0);
  }
  return 0;
}
