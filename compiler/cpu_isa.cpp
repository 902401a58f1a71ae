#include "compiler/cpu_isa.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>

#include "graph/error.h"

namespace gearbox {

std::string_view isaName(Isa isa) {
  switch (isa) {
    case Isa::kBaseline: return "baseline";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "baseline";
}

std::optional<Isa> parseIsa(std::string_view text) {
  for (Isa isa : {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512})
    if (text == isaName(isa)) return isa;
  return std::nullopt;
}

Isa detectedIsa() {
  static const Isa isa = [] {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    // __builtin_cpu_supports reads CPUID and also checks that the OS saves the wider register
    // state (XGETBV), so a feature it reports is usable.
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      return Isa::kAvx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
#endif
    return Isa::kBaseline;
  }();
  return isa;
}

Isa resolveIsa(Isa detected, const char* value) {
  if (value == nullptr || *value == '\0') return detected;
  const std::optional<Isa> wanted = parseIsa(value);
  if (!wanted)
    fail(ErrorKind::kConfig, "{}='{}' is not an ISA: use baseline, avx2 or avx512 (this CPU: {})",
         kIsaEnvVar, value, isaName(detected));
  if (*wanted > detected)
    fail(ErrorKind::kConfig,
         "{}={} asks for an ISA this CPU does not have (it supports up to {}); {} can only force "
         "a lower one",
         kIsaEnvVar, value, isaName(detected), kIsaEnvVar);
  return *wanted;
}

namespace {
// -1: no override; else the Isa value a ScopedIsaOverride set.
std::atomic<int> gOverride{-1};
}  // namespace

Isa activeIsa() {
  // A static whose initialiser throws is not initialised, so a bad GEARBOX_ISA fails every call
  // with the same message instead of being half-applied.
  static const Isa isa = resolveIsa(detectedIsa(), std::getenv(kIsaEnvVar));
  const int forced = gOverride.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<Isa>(forced) : isa;
}

ScopedIsaOverride::ScopedIsaOverride(Isa isa) {
  if (isa > detectedIsa())
    fail(ErrorKind::kConfig, "cannot run {} kernels: this CPU supports up to {}", isaName(isa),
         isaName(detectedIsa()));
  previous_ = gOverride.exchange(static_cast<int>(isa));
}

ScopedIsaOverride::~ScopedIsaOverride() {
  gOverride.store(previous_);
}

std::vector<Isa> availableIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512})
    if (isa <= detectedIsa()) out.push_back(isa);
  return out;
}

std::string isaDescription() {
  const Isa active = activeIsa();
  const char* forced = std::getenv(kIsaEnvVar);
  if (forced != nullptr && *forced != '\0')
    return fmt::format("isa: {} (detected: {}; {}={})", isaName(active), isaName(detectedIsa()),
                       kIsaEnvVar, forced);
  return fmt::format("isa: {} (detected: {})", isaName(active), isaName(detectedIsa()));
}

}  // namespace gearbox
