#pragma once
// The instruction set the kernels run with, chosen once per process at run time (issue 23).
//
// The default build targets baseline x86-64 (SSE2) so that a binary or package runs on any
// x86-64. The hot kernels are also compiled for AVX2+FMA and AVX-512 (per-ISA namespaces under
// `#pragma GCC target`, executor/simd/isa_target.h) and chosen here from the CPU, as oneDNN,
// OpenBLAS (DYNAMIC_ARCH) and XNNPACK do. The environment variable GEARBOX_ISA forces a lower
// one (baseline|avx2|avx512); an unknown value, or one the CPU does not have, is an
// Error(kConfig), never a crash.
//
// The compile step reads the active ISA for the decisions that depend on it (the GEMM path and
// blocking, recorded in MatMulParams), so a kernel spec says which ISA it was compiled for.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gearbox {

// Ordered: a higher value runs everything a lower one does.
enum class Isa : unsigned char {
  kBaseline,  // x86-64 baseline (SSE2): always available
  kAvx2,      // AVX2 + FMA (Haswell, Zen and later)
  kAvx512,    // AVX-512 F, BW, VL, DQ (Skylake-SP, Ice Lake, Sapphire Rapids, Zen 4)
};

// "baseline", "avx2", "avx512".
std::string_view isaName(Isa isa);
// The inverse of isaName; nullopt for any other text.
std::optional<Isa> parseIsa(std::string_view text);

// The best ISA this CPU (and operating system: AVX state enabled) supports. Computed once.
Isa detectedIsa();

// The ISA the kernels use: detectedIsa(), or the lower one GEARBOX_ISA names (or a
// ScopedIsaOverride). Decided once; with a bad GEARBOX_ISA every call throws Error(kConfig)
// naming the variable, the value and what this CPU supports (the CLI exits 2). The environment
// is read on the first call.
Isa activeIsa();

// Runs this process's kernels (and compiles its kernel specs) with a lower ISA than
// activeIsa() until destroyed: the differential tests run every ISA path this machine has, and
// kernels_bench compares them in one run. Not for use while kernels run on other threads.
// Throws Error(kConfig) for an ISA above detectedIsa().
class ScopedIsaOverride {
 public:
  explicit ScopedIsaOverride(Isa isa);
  ~ScopedIsaOverride();
  ScopedIsaOverride(const ScopedIsaOverride&) = delete;
  ScopedIsaOverride& operator=(const ScopedIsaOverride&) = delete;

 private:
  int previous_;
};

// Every ISA this CPU runs, lowest first (always starts with kBaseline).
std::vector<Isa> availableIsas();

// "isa: avx2 (detected: avx2)" or "isa: avx2 (detected: avx512; GEARBOX_ISA=avx2)": what
// `gearbox --version`, bench headers and the calibrate profile print. Throws like activeIsa().
std::string isaDescription();

// The name of the environment variable that forces a lower ISA.
inline constexpr const char* kIsaEnvVar = "GEARBOX_ISA";

// For tests: the ISA GEARBOX_ISA=`value` gives on a CPU whose best ISA is `detected` (nullptr:
// unset), or Error(kConfig) with the message activeIsa() would throw.
Isa resolveIsa(Isa detected, const char* value);

}  // namespace gearbox
