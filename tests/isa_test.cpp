// Run-time ISA dispatch (issue 23): choosing and forcing the ISA, the per-ISA GEMM on every path
// this machine has against a plain loop (odd sizes, K = 0, blocks that do not divide the shape,
// strided leading dims), the AVX-512 kernels' logic run on AVX2 registers, specs compiled for
// another ISA (run correctly; recompiled when loaded from a file), and the disassembly check
// that no baseline function of the executor holds a VEX/EVEX instruction.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "compiler/cpu_isa.h"
#include "compiler/kernel_spec.h"
#include "compiler/kernel_store.h"
#include "compiler/weight_pack.h"
#include "executor/kernels.h"
#include "executor/kernels/gemm.h"
#include "executor/kernels/softmax.h"
#include "graph/error.h"
#include "temp_dir.h"

namespace gearbox {
namespace {

using testing_util::runPipe;
using testing_util::shellQuote;

// ---- choosing and forcing ---------------------------------------------------------------------

TEST(Isa, NamesRoundTrip) {
  for (Isa isa : {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512}) EXPECT_EQ(parseIsa(isaName(isa)), isa);
  EXPECT_EQ(parseIsa("AVX2"), std::nullopt);
  EXPECT_EQ(parseIsa(""), std::nullopt);
  EXPECT_EQ(parseIsa("sse2"), std::nullopt);
}

TEST(Isa, ResolveTakesTheDetectedIsaOrALowerForcedOne) {
  EXPECT_EQ(resolveIsa(Isa::kAvx2, nullptr), Isa::kAvx2);
  EXPECT_EQ(resolveIsa(Isa::kAvx2, ""), Isa::kAvx2);
  EXPECT_EQ(resolveIsa(Isa::kAvx2, "baseline"), Isa::kBaseline);
  EXPECT_EQ(resolveIsa(Isa::kAvx2, "avx2"), Isa::kAvx2);
  EXPECT_EQ(resolveIsa(Isa::kAvx512, "avx2"), Isa::kAvx2);
  EXPECT_EQ(resolveIsa(Isa::kBaseline, "baseline"), Isa::kBaseline);
}

std::string resolveError(Isa detected, const char* value) {
  try {
    resolveIsa(detected, value);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    return e.what();
  }
  ADD_FAILURE() << "no error for " << value;
  return "";
}

// The AVX-512 logic on AVX2 registers (the *Avx512LogicOnAvx2 entry points) runs only where AVX2
// is active. Under GEARBOX_ISA=baseline on a CPU with AVX2 the tests of that logic raise the ISA
// back to AVX2 for their run, as the every-path tests do with each ISA the CPU has; otherwise
// they run at the active ISA, so GEARBOX_ISA=avx2 still reproduces an AVX2 machine's run.
struct AtLeastAvx2 {
  AtLeastAvx2() {
    if (activeIsa() < Isa::kAvx2) raised.emplace(Isa::kAvx2);
  }
  std::optional<ScopedIsaOverride> raised;
};

TEST(Isa, UnknownOrHigherIsaIsAConfigError) {
  EXPECT_EQ(resolveError(Isa::kAvx2, "avx3"),
            "GEARBOX_ISA='avx3' is not an ISA: use baseline, avx2 or avx512 (this CPU: avx2)");
  EXPECT_EQ(resolveError(Isa::kAvx2, "avx512"),
            "GEARBOX_ISA=avx512 asks for an ISA this CPU does not have (it supports up to avx2); "
            "GEARBOX_ISA can only force a lower one");
  EXPECT_EQ(resolveError(Isa::kBaseline, "avx2"),
            "GEARBOX_ISA=avx2 asks for an ISA this CPU does not have (it supports up to "
            "baseline); GEARBOX_ISA can only force a lower one");
}

TEST(Isa, OverrideLowersTheActiveIsaAndRestoresIt) {
  const Isa before = activeIsa();
  {
    ScopedIsaOverride forced(Isa::kBaseline);
    EXPECT_EQ(activeIsa(), Isa::kBaseline);
  }
  EXPECT_EQ(activeIsa(), before);
  EXPECT_EQ(availableIsas().front(), Isa::kBaseline);
  EXPECT_EQ(availableIsas().back(), detectedIsa());
  if (detectedIsa() < Isa::kAvx512) {
    // A cast, not a declaration: `ScopedIsaOverride(Isa::kAvx512);` would declare a variable.
    EXPECT_THROW((void)ScopedIsaOverride(Isa::kAvx512), Error);
  }
}

// The environment variable through the CLI: forced lower, and bad values exit 2 for any command.
testing_util::RunResult runWithIsa(const std::string& value, const std::string& args) {
  return runPipe("GEARBOX_ISA=" + shellQuote(value) + " " + shellQuote(GEARBOX_BINARY) + " " +
                 args + " 2>&1");
}

TEST(IsaCli, VersionStatesTheForcedIsa) {
  const auto r = runWithIsa("baseline", "--version");
  EXPECT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find(fmt::format("isa: baseline (detected: {}; GEARBOX_ISA=baseline)\n",
                                      isaName(detectedIsa()))),
            std::string::npos)
      << r.output;
}

TEST(IsaCli, BadIsaExitsTwoWithTheVariableNamed) {
  auto r = runWithIsa("pentium", "--version");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_EQ(r.output, fmt::format("gearbox: config error: GEARBOX_ISA='pentium' is not an ISA: use "
                                  "baseline, avx2 or avx512 (this CPU: {})\n",
                                  isaName(detectedIsa())));
  r = runWithIsa("pentium", "print " + shellQuote(testing_util::example("seed001_add.gbx")));
  EXPECT_EQ(r.exitCode, 2) << r.output;
  if (detectedIsa() < Isa::kAvx512) {
    r = runWithIsa("avx512", "--version");
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.output.find("asks for an ISA this CPU does not have"), std::string::npos)
        << r.output;
  }
}

// ---- the per-ISA GEMM against a plain loop ----------------------------------------------------

struct GemmShape {
  int64_t m, n, k;
  int64_t padA = 0, padB = 0, padC = 0;  // extra elements per row: strided leading dims
};

// A float GEMM done any way must agree with the double-accumulated loop to within the rounding
// of a k-long float sum.
void checkGemm(const GemmShape& s, const std::string& what,
               const std::function<void(const float*, int64_t, const float*, int64_t, float*,
                                        int64_t)>& gemm) {
  SCOPED_TRACE(
      fmt::format("{}: m {} n {} k {} pads {} {} {}", what, s.m, s.n, s.k, s.padA, s.padB, s.padC));
  const int64_t lda = s.k + s.padA, ldb = s.n + s.padB, ldc = s.n + s.padC;
  std::vector<float> a(static_cast<size_t>(std::max<int64_t>(1, s.m * lda)));
  std::vector<float> b(static_cast<size_t>(std::max<int64_t>(1, s.k * ldb)));
  uint64_t state = static_cast<uint64_t>(s.m * 1000003 + s.n * 1009 + s.k);
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<int64_t>(state >> 40) % 2001 - 1000) / 1000.0f;
  };
  for (float& v : a) v = next();
  for (float& v : b) v = next();
  // C starts as NaN everywhere: every element the GEMM owns must be overwritten (beta = 0), and
  // the padding between rows must stay NaN.
  std::vector<float> c(static_cast<size_t>(std::max<int64_t>(1, s.m * ldc)),
                       std::numeric_limits<float>::quiet_NaN());
  gemm(a.data(), lda, b.data(), ldb, c.data(), ldc);
  int bad = 0;
  for (int64_t i = 0; i < s.m && bad < 5; ++i) {
    for (int64_t j = 0; j < s.n && bad < 5; ++j) {
      double sum = 0, abs = 0;
      for (int64_t p = 0; p < s.k; ++p) {
        const double t = static_cast<double>(a[i * lda + p]) * b[p * ldb + j];
        sum += t;
        abs += std::fabs(t);
      }
      const double got = c[i * ldc + j];
      if (!(std::fabs(got - sum) <= 2e-7 * static_cast<double>(s.k + 1) * abs + 1e-30)) {
        ADD_FAILURE() << "C[" << i << ", " << j << "] = " << got << ", expected " << sum;
        ++bad;
      }
    }
    for (int64_t j = s.n; j < ldc; ++j)
      if (!std::isnan(c[i * ldc + j])) {
        ADD_FAILURE() << "padding C[" << i << ", " << j << "] was written";
        ++bad;
      }
  }
}

std::vector<GemmShape> gemmShapes() {
  std::vector<GemmShape> shapes = {
      {1, 1, 1},
      {1, 1, 0},
      {3, 5, 0},
      {0, 4, 3},
      {4, 0, 3},
      {1, 17, 9},
      {2, 33, 5},
      {5, 7, 3},
      {6, 16, 8},
      {12, 32, 4},
      {7, 17, 33},
      {13, 31, 65},
      {33, 65, 17},
      {40, 100, 300},
      {1, 200, 260},
      {3, 9, 2, 3, 5, 7},
      {31, 47, 29, 1, 2, 3},
      {64, 64, 64, 0, 0, 5},
      // The direct path's tiles: 8 rows of 48 (m = 8, 16 + 8), 6 of 64 with 4-, 3-, 2- and
      // 1-row tiles after them (m = 13 is 6 + 6 + 1, m = 11 is 6 + 4 + 1, m = 3 one 3-row tile),
      // columns past the last whole tile (the copied part-panel).
      {8, 97, 50},
      {24, 49, 7},
      {13, 130, 33},
      {11, 64, 300, 2, 1, 0},
      // Columns past the last whole tile that are whole vectors, read in place by narrower
      // tiles (restInPlace): 8 x 48 with 16 and 32 left (m = 8, 32), 6 x 64 with 48 and 32 left
      // under 6 + 6 + 3 (the 3-row tile a remainder of exactly 3 takes) and 6 + 1 rows.
      {8, 64, 20},
      {32, 80, 9, 1, 2, 3},
      {15, 112, 11},
      {7, 96, 5},
      // AVX2's direct path (4 x 24 tiles, B copied by each panel's first row tile): 1, 2 and 3
      // rows (a 1- or 2-row tile copies; m = 3 then a 1-row tile reads the copy), 4, 5 and 6
      // (4 + 1, 4 + 2), whole panels and a ragged rest (n = 50: 2 x 24 + 2; 73: 3 x 24 + 1; 56:
      // 2 x 24 + one whole vector), K past one slice (300 as 2 x 150), padded leading dims.
      {1, 50, 300},
      {2, 73, 19},
      {3, 56, 40, 1, 3, 2},
      {4, 48, 300},
      {5, 73, 33, 2, 0, 1},
      {6, 120, 17},
      {130, 50, 20},
      // Past 512 rows the chosen path is still direct on AVX-512 (to 1024): 6-row tiles and a
      // 5-row tail (1019 = 169 x 6 + 5), a ragged 64-column panel, and 1025 rows on the packed
      // path just past it.
      {1019, 77, 31},
      {1025, 33, 9, 1, 0, 2},
      // From 256 rows with B's rows 1024 floats apart the direct path packs each K slice of B
      // itself (directPacksB): ragged last columns (1001 = 20 x 48 + 41 = 15 x 64 + 41) and
      // whole vectors left (1040 = 21 x 48 + 32 = 16 x 64 + 16) read from the packed strips,
      // on the 6 x 64 tiles (257 and 256 rows) and the 8 x 48 ones (260 rows).
      {257, 1001, 20, 0, 23, 1},
      {256, 1040, 9},
      {260, 1001, 20, 0, 23, 1},
      // From 16 rows to 255 with B's rows 1024 floats or more apart, AVX-512's direct path walks
      // B panel by panel, the first row tile copying it for the others (directCopiesB): 6 + 6 + 4
      // rows over whole panels, K in two slices; 8 + 8 + 4 + 1 on 8 x 48 tiles with a ragged
      // rest (1001 = 20 x 48 + 41); 8 + 8 + 4 with whole vectors left (1040 = 21 x 48 + 32);
      // 6 x 42 + 3 rows (the 3-row tail tile), the last of the range.
      {16, 1024, 300},
      {21, 1001, 20, 0, 23, 1},
      {20, 1040, 9},
      {255, 1030, 5, 1, 0, 2},
      // One and two columns after the whole tiles, as dot products on AVX2 (gemm_body.inc's
      // dotTile): K with a ragged last 8 (77), and K of exactly one vector.
      {13, 50, 77, 2, 1, 3},
      {6, 17, 8},
  };
  // Deterministic random shapes, sizes 1 and odd sizes included.
  uint64_t state = 23;
  auto uniform = [&](int64_t lo, int64_t hi) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(hi - lo + 1));
  };
  for (int i = 0; i < 12; ++i)
    shapes.push_back({uniform(1, 70), uniform(1, 90), uniform(0, 80), uniform(0, 3), uniform(0, 3),
                      uniform(0, 3)});
  return shapes;
}

// Blockings that cut every shape above into several kc, mc and nc blocks with ragged ends, on
// both paths, next to the blocking the compile step chooses.
std::vector<std::pair<std::string, GemmBlocking>> blockingsFor(Isa isa, const GemmShape& s) {
  std::vector<std::pair<std::string, GemmBlocking>> out;
  out.push_back({"chosen", chooseGemmBlocking(isa, DType::kF32, s.m, s.n, s.k)});
  if (isa == Isa::kBaseline) return out;
  out.push_back({"packed_small_blocks", {GemmPath::kPacked, 7, 13, 40}});
  out.push_back({"packed_one_block", {GemmPath::kPacked, 4096, 4096, 4096}});
  out.push_back({"skinny_small_blocks", {GemmPath::kSkinny, 5, 0, 24}});
  out.push_back({"skinny_one_block", {GemmPath::kSkinny, 4096, 0, 4096}});
  out.push_back({"direct_small_blocks", {GemmPath::kDirect, 7, 1, 70}});
  out.push_back({"direct_one_block", {GemmPath::kDirect, 4096, 1, 4096}});
  return out;
}

TEST(IsaGemm, EveryPathThisMachineHasMatchesThePlainLoop) {
  for (Isa isa : availableIsas()) {
    ScopedIsaOverride forced(isa);
    for (const GemmShape& s : gemmShapes())
      for (const auto& [name, bl] : blockingsFor(isa, s))
        checkGemm(s, fmt::format("{} {}", isaName(isa), name),
                  // An init-capture: clang before 16 cannot capture a structured binding.
                  [&, blocking = bl](const float* a, int64_t lda, const float* b, int64_t ldb,
                                     float* c, int64_t ldc) {
                    kernels::gemmF32(isa, blocking, a, lda, b, ldb, c, ldc, s.m, s.n, s.k);
                  });
  }
}

// The AVX-512 instantiation's logic (12 x 32 tiles, 16-lane vectors, the skinny widths of a
// 32-register file, packing for those tiles) runs here on pairs of AVX2 registers: the same
// templates as the AVX-512 kernels, so they are tested on machines without AVX-512 too.
TEST(IsaGemm, Avx512LogicOnAvx2MatchesThePlainLoop) {
  if (detectedIsa() < Isa::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  const AtLeastAvx2 avx2;
  for (const GemmShape& s : gemmShapes())
    for (const auto& [name, bl] : blockingsFor(Isa::kAvx512, s))
      checkGemm(s, "avx512 logic " + name,
                [&, blocking = bl](const float* a, int64_t lda, const float* b, int64_t ldb,
                                   float* c, int64_t ldc) {
                  ASSERT_TRUE(kernels::gemmF32Avx512LogicOnAvx2(blocking, a, lda, b, ldb, c, ldc,
                                                                s.m, s.n, s.k));
                });
}

// MatMul's fused epilogue (fuse-matmul-epilogue): each path adds the bias and the residual and
// clamps each block of C after its last K slice. The sums are the GEMM's own, so the result
// must be bit for bit the GEMM's C followed by the unfused add, add and clip, on every path,
// blocking and ISA (and the AVX-512 logic on AVX2), with C's row padding untouched.
TEST(IsaGemm, TheEpilogueIsTheUnfusedAddsAndClampBitForBit) {
  struct Variant {
    const char* name;
    bool bias, res, clamp;
  };
  const Variant variants[] = {{"bias", true, false, false},
                              {"residual", false, true, false},
                              {"bias, residual, clamp", true, true, true},
                              {"clamp", false, false, true}};
  auto check = [&](const GemmShape& s, const std::string& what,
                   const std::function<void(const float*, int64_t, const float*, int64_t, float*,
                                            int64_t, const kernels::GemmEpilogue*)>& gemm) {
    const int64_t lda = s.k + s.padA, ldb = s.n + s.padB, ldc = s.n + s.padC, ldr = s.n + s.padA;
    std::vector<float> a(static_cast<size_t>(std::max<int64_t>(1, s.m * lda)));
    std::vector<float> b(static_cast<size_t>(std::max<int64_t>(1, s.k * ldb)));
    std::vector<float> bias(static_cast<size_t>(std::max<int64_t>(1, s.n)));
    std::vector<float> res(static_cast<size_t>(std::max<int64_t>(1, s.m * ldr)));
    uint64_t state = static_cast<uint64_t>(s.m * 7919 + s.n * 31 + s.k);
    auto next = [&] {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return static_cast<float>(static_cast<int64_t>(state >> 40) % 2001 - 1000) / 1000.0f;
    };
    for (auto* v : {&a, &b, &bias, &res})
      for (float& x : *v) x = next();
    for (const Variant& var : variants) {
      SCOPED_TRACE(fmt::format("{}: {}: m {} n {} k {}", what, var.name, s.m, s.n, s.k));
      kernels::GemmEpilogue e;
      e.bias = var.bias ? bias.data() : nullptr;
      e.res = var.res ? res.data() : nullptr;
      e.ldr = ldr;
      e.clamp = var.clamp;
      e.lo = -0.25f;
      e.hi = 0.5f;
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> want(static_cast<size_t>(std::max<int64_t>(1, s.m * ldc)), nan);
      std::vector<float> got = want;
      gemm(a.data(), lda, b.data(), ldb, want.data(), ldc, nullptr);
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          float x = want[i * ldc + j];
          if (e.bias) x += e.bias[j];
          if (e.res) x += e.res[i * ldr + j];
          if (e.clamp) {  // Clip's comparisons
            x = e.lo > x ? e.lo : x;
            x = e.hi < x ? e.hi : x;
          }
          want[i * ldc + j] = x;
        }
      gemm(a.data(), lda, b.data(), ldb, got.data(), ldc, &e);
      EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
    }
  };
  for (Isa isa : availableIsas()) {
    ScopedIsaOverride forced(isa);
    for (const GemmShape& s : gemmShapes())
      for (const auto& [name, bl] : blockingsFor(isa, s))
        check(s, fmt::format("{} {}", isaName(isa), name),
              [&, blocking = bl](const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                                 int64_t ldc, const kernels::GemmEpilogue* e) {
                kernels::gemmF32(isa, blocking, a, lda, b, ldb, c, ldc, s.m, s.n, s.k, e);
              });
  }
  // The AVX-512 logic on AVX2 registers, where this CPU has AVX2 (every CPU CI runs on).
  std::optional<AtLeastAvx2> avx2;
  if (detectedIsa() >= Isa::kAvx2) avx2.emplace();
  if (avx2)
    for (const GemmShape& s : gemmShapes())
      for (const auto& [name, bl] : blockingsFor(Isa::kAvx512, s))
        check(s, "avx512 logic " + name,
              [&, blocking = bl](const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                                 int64_t ldc, const kernels::GemmEpilogue* e) {
                ASSERT_TRUE(kernels::gemmF32Avx512LogicOnAvx2(blocking, a, lda, b, ldb, c, ldc, s.m,
                                                              s.n, s.k, e));
              });
}

// B packed in strips of a direct tile's width (compiler/weight_pack.h, packMatMulB; a static
// plan's constant B): every shape above, both widths, direct blockings that cut K and N into
// ragged blocks, on AVX-512 and its logic on AVX2. Against the plain loop, and bit for bit
// against B as the direct path takes it (in place, or from 256 rows packed per K slice) where
// that path runs the same tile (the same sums in the same order), with and without the fused
// epilogue.
TEST(IsaGemm, BPackedInStripsMatchesBInPlace) {
  const std::pair<std::string, GemmBlocking> blockings[] = {
      {"direct_small_blocks", {GemmPath::kDirect, 7, 1, 70}},
      {"direct_one_block", {GemmPath::kDirect, 4096, 1, 4096}},
      {"direct_as_chosen", {GemmPath::kDirect, 256, 1, 512}}};
  struct Run {
    const char* name;
    bool logicOnAvx2;
  };
  std::vector<Run> runs;
  if (detectedIsa() >= Isa::kAvx512) runs.push_back({"avx512", false});
  if (detectedIsa() >= Isa::kAvx2) runs.push_back({"avx512 logic on avx2", true});
  // The plain loop a plan packed on AVX-512 runs when GEARBOX_ISA lowers the ISA to baseline.
  runs.push_back({"baseline", false});
  auto strips = [](const float* b, int64_t ldb, int64_t k, int64_t n, int64_t width) {
    std::vector<float> dense(static_cast<size_t>(std::max<int64_t>(1, k * n)));
    for (int64_t p = 0; p < k; ++p) std::copy(b + p * ldb, b + p * ldb + n, dense.begin() + p * n);
    std::vector<float> out(
        static_cast<size_t>(std::max<int64_t>(1, matMulPackedBFloats(k, n, width))));
    if (k > 0 && n > 0) packMatMulB(dense.data(), k, n, width, out.data());
    return out;
  };
  for (const Run& run : runs) {
    const bool baseline = std::string_view(run.name) == "baseline";
    std::optional<ScopedIsaOverride> forced;
    if (!run.logicOnAvx2) forced.emplace(baseline ? Isa::kBaseline : Isa::kAvx512);
    if (run.logicOnAvx2 && activeIsa() < Isa::kAvx2) forced.emplace(Isa::kAvx2);  // AtLeastAvx2
    for (const GemmShape& s : gemmShapes())
      for (int64_t width : {48, 64})
        for (const auto& [name, bl] : blockings) {
          const std::string what = fmt::format("{} strips of {} {}", run.name, width, name);
          checkGemm(
              s, what,
              [&, blocking = bl](const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                                 int64_t ldc) {
                const std::vector<float> packed = strips(b, ldb, s.k, s.n, width);
                ASSERT_TRUE(kernels::gemmF32StripsB(blocking, width, a, lda, packed.data(), c, ldc,
                                                    s.m, s.n, s.k, nullptr, run.logicOnAvx2));
              });
          if (s.m <= 0 || s.n <= 0 || (!baseline && gemmDirectTile(s.m).vectors * 16 != width))
            continue;
          // Bit for bit against B in place, with a bias, a residual and a clamp fused (at
          // baseline, against Eigen's product and the same epilogue, within rounding).
          SCOPED_TRACE(fmt::format("{}: m {} n {} k {}", what, s.m, s.n, s.k));
          const int64_t lda = s.k + s.padA, ldb = s.n + s.padB, ldc = s.n + s.padC;
          std::mt19937 rng(static_cast<uint32_t>(s.m * 7919 + s.n * 31 + s.k));
          std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
          std::vector<float> a(static_cast<size_t>(std::max<int64_t>(1, s.m * lda)));
          std::vector<float> b(static_cast<size_t>(std::max<int64_t>(1, s.k * ldb)));
          std::vector<float> bias(static_cast<size_t>(s.n)), res(static_cast<size_t>(s.m * ldc));
          for (auto* v : {&a, &b, &bias, &res})
            for (float& x : *v) x = dist(rng);
          const std::vector<float> packed = strips(b.data(), ldb, s.k, s.n, width);
          for (bool epilogue : {false, true}) {
            kernels::GemmEpilogue e;
            e.bias = bias.data();
            e.res = res.data();
            e.ldr = ldc;
            e.clamp = true;
            e.lo = -0.25f;
            e.hi = 0.5f;
            const kernels::GemmEpilogue* ep = epilogue ? &e : nullptr;
            const float nan = std::numeric_limits<float>::quiet_NaN();
            std::vector<float> want(static_cast<size_t>(s.m * ldc), nan), got = want;
            if (run.logicOnAvx2) {
              ASSERT_TRUE(kernels::gemmF32Avx512LogicOnAvx2(bl, a.data(), lda, b.data(), ldb,
                                                            want.data(), ldc, s.m, s.n, s.k, ep));
            } else {
              kernels::gemmF32(baseline ? Isa::kBaseline : Isa::kAvx512, bl, a.data(), lda,
                               b.data(), ldb, want.data(), ldc, s.m, s.n, s.k, ep);
            }
            ASSERT_TRUE(kernels::gemmF32StripsB(bl, width, a.data(), lda, packed.data(), got.data(),
                                                ldc, s.m, s.n, s.k, ep, run.logicOnAvx2));
            if (baseline) {
              for (int64_t i = 0; i < s.m; ++i)
                for (int64_t j = 0; j < s.n; ++j) {
                  const float w = want[i * ldc + j], g = got[i * ldc + j];
                  ASSERT_NEAR(g, w, 1e-5 * (s.k + 1) * (1.0 + std::fabs(w)))
                      << "C[" << i << ", " << j << "], epilogue " << epilogue;
                }
              for (int64_t i = 0; i < s.m; ++i)  // C's row padding untouched
                for (int64_t j = s.n; j < ldc; ++j) ASSERT_TRUE(std::isnan(got[i * ldc + j]));
            } else {
              EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
                  << "epilogue " << epilogue;
            }
          }
        }
  }
}

// ---- conv2d's GEMM driver (executor/simd/conv_body.inc) ----------------------------------------

struct ConvGeom {
  std::string name;
  Shape x, w;
  std::vector<int64_t> strides, pads, dilations;
  int64_t group = 1;
  bool bias = false;
  // The fused activation's clamp (act_min, act_max).
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
};

// Geometries whose groups hold whole and partial micro-kernel tiles (mg = 29, 25, 30, 13, 50),
// K deeper than one gathered slice (450), padding on every side, strides, dilation, groups, a
// strided 1x1 (gathered) and a plain 1x1 (read in place).
std::vector<ConvGeom> convGeoms() {
  return {
      {"deep_3x3", {1, 50, 11, 13}, {29, 50, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {"deep_3x3_relu",
       {1, 50, 11, 13},
       {29, 50, 3, 3},
       {1, 1},
       {1, 1, 1, 1},
       {1, 1},
       1,
       true,
       0.0f},
      {"pointwise_clip",
       {1, 40, 9, 11},
       {30, 40, 1, 1},
       {1, 1},
       {0, 0, 0, 0},
       {1, 1},
       1,
       true,
       -0.5f,
       0.3f},
      {"grouped_dilated", {2, 6, 9, 17}, {50, 3, 3, 2}, {2, 1}, {1, 0, 2, 1}, {2, 1}, 2, true},
      {"pointwise", {1, 40, 9, 11}, {30, 40, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},
      {"pointwise_s2", {1, 7, 5, 5}, {13, 7, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, false},
      // 1x1 read in place on 16-lane vectors (convPointwiseDirect): 8 rows as one 8 x 48 tile
      // with a one-vector part-panel (63 = 48 + 15), and 13 rows as 6 + 6 + 1 with a two-vector
      // one (91 = 64 + 27), both over two K slices (K > 384) and clamped.
      {"pointwise_8rows_two_slices",
       {2, 400, 7, 9},
       {8, 400, 1, 1},
       {1, 1},
       {0, 0, 0, 0},
       {1, 1},
       1,
       true,
       0.0f,
       6.0f},
      {"pointwise_13rows_two_slices",
       {1, 390, 7, 13},
       {13, 390, 1, 1},
       {1, 1},
       {0, 0, 0, 0},
       {1, 1},
       1,
       true,
       0.0f,
       6.0f},
      // The 3-row tile a remainder of exactly 3 rows takes (directSlice), with the bias and
      // clamp epilogue: 15 rows as 6 + 6 + 3 over two K slices, and 3 rows alone.
      {"pointwise_15rows_two_slices",
       {1, 390, 7, 13},
       {15, 390, 1, 1},
       {1, 1},
       {0, 0, 0, 0},
       {1, 1},
       1,
       true,
       0.0f,
       6.0f},
      {"pointwise_3rows",
       {1, 40, 9, 11},
       {3, 40, 1, 1},
       {1, 1},
       {0, 0, 0, 0},
       {1, 1},
       1,
       true,
       -0.5f,
       0.3f},
      // Positions past the last whole tile that are whole vectors, read in place with narrower
      // tiles (restInPlace): 64 = 48 + 16 under 8 rows, 112 = 64 + 48 under 6 + 6 + 1 rows.
      {"pointwise_8rows_vector_rest",
       {1, 20, 8, 8},
       {8, 20, 1, 1},
       {1, 1},
       {0, 0, 0, 0},
       {1, 1},
       1,
       true,
       0.0f,
       6.0f},
      {"pointwise_13rows_vector_rest",
       {1, 19, 7, 16},
       {13, 19, 1, 1},
       {1, 1},
       {0, 0, 0, 0},
       {1, 1},
       1,
       true},
      {"batch3_5x5_s3", {3, 4, 16, 15}, {50, 4, 5, 5}, {3, 2}, {2, 2, 1, 0}, {1, 1}, 1, false},
      // 3 x 3 stride 2 over at most 4 input channels on AVX2 (conv_body.inc's convS2x3Item, an RGB
      // stem): 32 channels as 6 x 4 + 4 x 2 with relu6, rows of 38 outputs (two 16-wide tiles
      // and a masked 6), an odd width and height; 11 channels as 6 + 4 + 1 with an even left
      // pad, uneven pads and two images; one channel over a 1 x 1 input; two groups of 3.
      {"stem_s2", {1, 3, 37, 75}, {32, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, true, 0.0f, 6.0f},
      {"stem_s2_pads", {2, 4, 9, 70}, {11, 4, 3, 3}, {2, 2}, {0, 2, 1, 0}, {1, 1}, 1, false},
      {"stem_s2_1x1_input", {1, 1, 1, 1}, {3, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {"stem_s2_groups", {1, 6, 10, 9}, {4, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 2, true},
      // One column after three 16-column tiles (7 x 7: 49), and two (5 x 10: 50), as dot
      // products on AVX2 (gemm_body.inc's dotTile), K = 180 (a ragged last 8) and 117.
      {"deep_3x3_7x7", {1, 20, 7, 7}, {13, 20, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, 0.0f},
      {"deep_3x3_5x10", {1, 13, 5, 10}, {8, 13, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, false},
      // Depthwise: rows wider than four vectors (the unrolled loop), a partial vector, narrow
      // planes, strides 2 and 3 (the phases), dilation, a channel multiplier, asymmetric pads.
      {"dw_wide", {1, 3, 9, 83}, {3, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3, true},
      {"dw_s2", {2, 4, 13, 70}, {4, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 4, true},
      {"dw_s3_dilated_x2", {1, 2, 11, 40}, {4, 1, 3, 2}, {3, 3}, {2, 0, 1, 3}, {2, 3}, 2, false},
      {"dw_7x7", {1, 5, 7, 7}, {5, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 5, true},
      {"dw_7x7_relu6",
       {1, 5, 7, 7},
       {5, 1, 3, 3},
       {1, 1},
       {1, 1, 1, 1},
       {1, 1},
       5,
       true,
       0.0f,
       0.4f},
      {"dw_5x5_no_pad", {1, 2, 6, 5}, {2, 1, 5, 5}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2, false},
      // Stride-1 3 x 3 planes read in place on 8-lane vectors (dw3x3Plane): 1-3 rows past the
      // blocks of 4, rows of exactly one vector, one column, every column at an edge, no
      // padding (no edge at all; blocks of 2 and 3 rows inside the plane), a row whose last
      // vector's taps 1 and 2 both cross the right edge (w + pl a multiple of 8; with a part
      // store and without), pads of 2 (two taps cross the left edge, whole rows of top
      // padding), asymmetric pads, a channel multiplier, the clamp.
      {"dw3_s1_5rows_w17", {1, 2, 5, 17}, {2, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, true},
      {"dw3_s1_6rows_w8", {2, 2, 6, 8}, {2, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, false},
      {"dw3_s1_w1", {1, 2, 7, 1}, {2, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, true},
      {"dw3_s1_no_pad", {1, 3, 7, 10}, {3, 1, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 3, true},
      {"dw3_s1_no_pad_6rows", {1, 2, 8, 12}, {2, 1, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2, true},
      {"dw3_s1_no_pad_7rows", {1, 2, 9, 12}, {2, 1, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2, true},
      {"dw3_s1_w15_both_edges", {1, 2, 6, 15}, {2, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, true},
      {"dw3_s1_w15_right_pad2", {1, 2, 6, 15}, {2, 1, 3, 3}, {1, 1}, {1, 1, 1, 2}, {1, 1}, 2, true},
      {"dw3_s1_pad2", {1, 2, 3, 5}, {2, 1, 3, 3}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 2, true},
      {"dw3_s1_asym", {1, 2, 9, 23}, {2, 1, 3, 3}, {1, 1}, {0, 2, 1, 0}, {1, 1}, 2, true},
      {"dw3_s1_multiplier", {1, 2, 6, 30}, {4, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, true},
      // Stride 2 (dw3s2Rows): a partial last vector, no padding (a last single row inside the
      // plane), the left padding of 0 and of 2, an odd number of output rows, the clamp.
      {"dw3_s2_w49", {1, 2, 7, 49}, {2, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 2, true},
      {"dw3_s2_no_pad_rows_inside",
       {1, 2, 11, 20},
       {2, 1, 3, 3},
       {2, 2},
       {0, 0, 0, 0},
       {1, 1},
       2,
       true},
      {"dw3_s2_no_left_pad", {1, 2, 9, 64}, {2, 1, 3, 3}, {2, 2}, {1, 0, 1, 0}, {1, 1}, 2, false},
      {"dw3_s2_pad2_relu6",
       {1, 3, 5, 40},
       {3, 1, 3, 3},
       {2, 2},
       {2, 2, 2, 2},
       {1, 1},
       3,
       true,
       0.0f,
       0.5f},
      {"dw3_s1_relu6_w64",
       {1, 2, 11, 64},
       {2, 1, 3, 3},
       {1, 1},
       {1, 1, 1, 1},
       {1, 1},
       2,
       true,
       0.0f,
       0.5f},
      // Stride-2 3 x 3 planes read in place (depthwiseDirectPlane on AVX-512, dw3s2Rows on
      // AVX2): asymmetric pads, an odd
      // width, rows of 64 + 6 outputs, a single row, the clamp.
      {"dw_s2_asym_relu6",
       {1, 3, 12, 37},
       {3, 1, 3, 3},
       {2, 2},
       {0, 1, 1, 0},
       {1, 1},
       3,
       true,
       0.0f,
       0.6f},
      {"dw_s2_wide", {1, 2, 9, 140}, {2, 1, 3, 3}, {1, 2}, {1, 1, 1, 1}, {1, 1}, 2, false},
      {"dw_s2_one_row", {2, 2, 3, 5}, {2, 1, 3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 2, true},
  };
}

using ConvItemFn = bool (*)(const ConvParams&, const float*, const float*, const float*, float,
                            float, float*, int64_t, int64_t, int64_t, int64_t);

using DepthwiseItemFn = bool (*)(const ConvParams&, const float*, const float*, const float*, float,
                                 float, float*, int64_t, int64_t);

// A path that runs the whole tensors at once (the channel-tile path).
using ConvWholeFn = bool (*)(const ConvParams&, const float*, const float*, const float*, float,
                             float, float*);

// The double-precision result of g (clamped) and the sum of the terms' magnitudes (the
// tolerance) per output, from a plain loop. Kept for the last geometry asked: the tests check
// one geometry's paths and blockings back to back, and this loop (at -O0 in the sanitized build,
// gearbox_cold_code) took most of their time there when each check ran it again.
struct ConvExpected {
  std::string key;
  std::vector<double> value, magnitude;
};

const ConvExpected& expectedConv(const ConvGeom& g, const ConvParams& p, const float* xv,
                                 const float* wv, const float* bv) {
  static ConvExpected last;
  // Everything the loop reads: the tensors (seeded from their shapes), the bias, the clamp and
  // the geometry as compiled.
  const std::string key =
      fmt::format("{} {} {} {} {} {} | {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}", g.name,
                  g.x.toString(), g.w.toString(), g.bias, g.lo, g.hi, p.n, p.c, p.h, p.w, p.m, p.oh,
                  p.ow, p.kh, p.kw, p.sh, p.sw, p.pt, p.pl, p.dh, p.dw, p.cg, p.mg);
  if (last.key == key) return last;
  last.key.clear();
  const int64_t positions = p.oh * p.ow;
  const auto count = static_cast<size_t>(p.n * p.m * positions);
  last.value.assign(count, 0.0);
  last.magnitude.assign(count, 0.0);
  for (int64_t img = 0; img < p.n; ++img)
    for (int64_t oc = 0; oc < p.m; ++oc)
      for (int64_t q = 0; q < positions; ++q) {
        const int64_t oy = q / p.ow, ox = q % p.ow, grp = oc / p.mg;
        double sum = bv ? bv[oc] : 0.0, abs = std::fabs(sum);
        for (int64_t ci = 0; ci < p.cg; ++ci)
          for (int64_t ki = 0; ki < p.kh; ++ki)
            for (int64_t kj = 0; kj < p.kw; ++kj) {
              const int64_t iy = oy * p.sh - p.pt + ki * p.dh, ix = ox * p.sw - p.pl + kj * p.dw;
              if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
              const double t =
                  static_cast<double>(xv[((img * p.c + grp * p.cg + ci) * p.h + iy) * p.w + ix]) *
                  wv[((oc * p.cg + ci) * p.kh + ki) * p.kw + kj];
              sum += t;
              abs += std::fabs(t);
            }
        // The clamp of the exact sum: a result within the tolerance of a bound clamps to it.
        if (sum < g.lo) sum = g.lo;
        if (sum > g.hi) sum = g.hi;
        const auto at = static_cast<size_t>((img * p.m + oc) * positions + q);
        last.value[at] = sum;
        last.magnitude[at] = abs;
      }
  last.key = key;
  return last;
}

// Runs every item of `p` through `item` (or `dwItem` for the depthwise path, or the whole conv
// through `whole`), as executor/kernels/conv2d.cpp does, and checks each output against a
// double-precision loop. The output starts as NaN: every element is written.
void checkConv(const ConvGeom& g, const ConvParams& p, const std::string& label, ConvItemFn item,
               DepthwiseItemFn dwItem = nullptr, ConvWholeFn whole = nullptr) {
  SCOPED_TRACE(g.name + " " + label);
  const Tensor x = randomTensor(DType::kF32, g.x, 31);
  const Tensor w = randomTensor(DType::kF32, g.w, 32);
  const Tensor b = randomTensor(DType::kF32, Shape{g.w[0]}, 33);
  const int64_t positions = p.oh * p.ow, depth = p.cg * p.kh * p.kw;
  std::vector<float> out(static_cast<size_t>(p.n * p.m * positions),
                         std::numeric_limits<float>::quiet_NaN());
  if (whole) {
    ASSERT_TRUE(whole(p, x.as<float>(), w.as<float>(), g.bias ? b.as<float>() : nullptr, g.lo, g.hi,
                      out.data()));
  } else if (p.path == ConvParams::Path::kDepthwise) {
    // In groups of 3 planes and a ragged last one (conv2d.cpp groups narrow planes).
    for (int64_t it = 0; it < p.n * p.m; it += 3)
      ASSERT_TRUE(dwItem(p, x.as<float>(), w.as<float>(), g.bias ? b.as<float>() : nullptr, g.lo,
                         g.hi, out.data(), it, std::min(p.n * p.m, it + 3)));
  } else {
    const int64_t blocks = (positions + p.colBlock - 1) / p.colBlock;
    for (int64_t img = 0; img < p.n; ++img)
      for (int64_t grp = 0; grp < p.group; ++grp)
        for (int64_t mi = 0; mi < p.mSplit; ++mi)
          for (int64_t blk = 0; blk < blocks; ++blk) {
            const int64_t p0 = blk * p.colBlock, p1 = std::min(positions, p0 + p.colBlock);
            ASSERT_TRUE(item(p, x.as<float>() + (img * p.c + grp * p.cg) * p.h * p.w,
                             w.as<float>() + grp * p.mg * depth,
                             g.bias ? b.as<float>() + grp * p.mg : nullptr, g.lo, g.hi,
                             out.data() + (img * p.m + grp * p.mg) * positions, p.channelBound(mi),
                             p.channelBound(mi + 1), p0, p1));
          }
  }
  const ConvExpected& want =
      expectedConv(g, p, x.as<float>(), w.as<float>(), g.bias ? b.as<float>() : nullptr);
  int bad = 0;
  for (size_t at = 0; at < out.size() && bad < 5; ++at) {
    const double got = out[at], sum = want.value[at];
    if (!(std::fabs(got - sum) <=
          2e-7 * static_cast<double>(depth + 2) * want.magnitude[at] + 1e-30)) {
      const auto i = static_cast<int64_t>(at);
      ADD_FAILURE() << "out[" << i / (p.m * positions) << ", " << i / positions % p.m << ", "
                    << i % positions << "] = " << got << ", expected " << sum;
      ++bad;
    }
  }
}

std::shared_ptr<const KernelSpec> convSpec(const ConvGeom& g, int threads = 0) {
  Attrs attrs;
  attrs.setInts(attr::Conv2d::strides, g.strides);
  attrs.setInts(attr::Conv2d::pads, g.pads);
  attrs.setInts(attr::Conv2d::dilations, g.dilations);
  attrs.setInt(attr::Conv2d::group, g.group);
  attrs.setFloat(attr::Conv2d::act_min, g.lo);
  attrs.setFloat(attr::Conv2d::act_max, g.hi);
  std::vector<TensorType> ins{{DType::kF32, g.x}, {DType::kF32, g.w}};
  if (g.bias) ins.push_back({DType::kF32, Shape{g.w[0]}});
  return compileKernelSpec(makeKernelKey(OpKind::kConv2d, ins, attrs, threads));
}

ConvParams compiledConv(const ConvGeom& g, int threads = 0) {
  return std::get<ConvParams>(convSpec(g, threads)->params);
}

// The chosen blocking, and blocks that cut K, the positions and the channels raggedly.
std::vector<std::pair<std::string, ConvParams>> convBlockings(const ConvGeom& g) {
  const ConvParams chosen = compiledConv(g);
  if (chosen.path == ConvParams::Path::kDepthwise) return {{"chosen", chosen}};
  ConvParams small = chosen;
  small.kc = 7;
  small.colBlock = 13;
  small.mSplit = std::max<int64_t>(chosen.mg / 24, 1);
  ConvParams one = chosen;
  one.kc = 100000;
  one.colBlock = chosen.oh * chosen.ow;
  return {{"chosen", chosen}, {"small_blocks", small}, {"one_block", one}};
}

TEST(IsaConv, EveryPathThisMachineHasMatchesThePlainLoop) {
  if (detectedIsa() < Isa::kAvx2) GTEST_SKIP() << "this CPU has no AVX2 (the baseline gathers)";
  for (Isa isa : availableIsas()) {
    if (isa == Isa::kBaseline) continue;
    ScopedIsaOverride forced(isa);
    for (const ConvGeom& g : convGeoms())
      for (const auto& [name, p] : convBlockings(g))
        checkConv(g, p, fmt::format("{} {}", isaName(isa), name), kernels::convGemmItemF32,
                  kernels::convDepthwiseItemsF32);
  }
}

TEST(IsaConv, Avx512LogicOnAvx2MatchesThePlainLoop) {
  if (detectedIsa() < Isa::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  const AtLeastAvx2 avx2;
  for (const ConvGeom& g : convGeoms())
    for (const auto& [name, p] : convBlockings(g))
      checkConv(g, p, "avx512 logic " + name, kernels::convGemmItemF32Avx512LogicOnAvx2,
                kernels::convDepthwiseItemF32Avx512LogicOnAvx2);
}

// The two-phase path (executor/kernels/conv2d.cpp's runSharedPack, for items whose channels are
// split between tasks) as an item function: K slices packed in two calls, as two tasks would.
bool twoPhaseItem(const ConvParams& p, const float* x, const float* w, const float* b, float lo,
                  float hi, float* out, int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  const int64_t floats = kernels::convPackedFloatsF32(p, p0, p1);
  if (floats <= 0) return false;
  std::vector<float> packed(static_cast<size_t>(floats), std::numeric_limits<float>::quiet_NaN());
  const int64_t depth = p.cg * p.kh * p.kw, kc = p.kc < 1 ? depth : p.kc;
  const int64_t slices = (depth + kc - 1) / kc;
  return kernels::convPackF32(p, x, 0, slices / 2, p0, p1, packed.data()) &&
         kernels::convPackF32(p, x, slices / 2, slices, p0, p1, packed.data()) &&
         kernels::convFromPackedF32(p, packed.data(), w, b, lo, hi, out, m0, m1, p0, p1);
}

TEST(IsaConv, TwoPhasePathMatchesThePlainLoopAndTheItemPathBitForBit) {
  if (detectedIsa() < Isa::kAvx2) GTEST_SKIP() << "this CPU has no AVX2 (the baseline gathers)";
  for (Isa isa : availableIsas()) {
    if (isa == Isa::kBaseline) continue;
    ScopedIsaOverride forced(isa);
    for (const ConvGeom& g : convGeoms())
      for (const auto& [name, p] : convBlockings(g)) {
        if (p.path == ConvParams::Path::kDepthwise) continue;
        const std::string label = fmt::format("{} {}", isaName(isa), name);
        checkConv(g, p, label + " two-phase", twoPhaseItem);
        // The same sums in the same order as the one-item path: equal bit for bit.
        SCOPED_TRACE(g.name + " " + label);
        const Tensor x = randomTensor(DType::kF32, g.x, 51);
        const Tensor w = randomTensor(DType::kF32, g.w, 52);
        const Tensor b = randomTensor(DType::kF32, Shape{g.w[0]}, 53);
        const int64_t positions = p.oh * p.ow, depth = p.cg * p.kh * p.kw;
        for (int64_t m0 : {int64_t{0}, p.mg / 3}) {
          std::vector<float> one(static_cast<size_t>(p.mg * positions), 0.0f), two = one;
          const float* bias = g.bias ? b.as<float>() : nullptr;
          for (int64_t p0 = 0; p0 < positions; p0 += p.colBlock) {
            const int64_t p1 = std::min(positions, p0 + p.colBlock);
            ASSERT_TRUE(kernels::convGemmItemF32(p, x.as<float>(), w.as<float>(), bias, g.lo, g.hi,
                                                 one.data(), m0, p.mg, p0, p1));
            ASSERT_TRUE(twoPhaseItem(p, x.as<float>(), w.as<float>(), bias, g.lo, g.hi, two.data(),
                                     m0, p.mg, p0, p1));
          }
          EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0)
              << "rows from " << m0 << ", depth " << depth;
        }
      }
  }
}

// The channel-tile path (ConvParams::channelTiles) as a whole-tensor function: the weight
// packed as a plan packs it (its padding channels checked to be zeros), then run on kTasks
// threads, with the AVX-512 tiles or their logic on AVX2 registers.
template <int kTasks, bool kLogic>
bool channelTilesWhole(const ConvParams& p, const float* x, const float* w, const float* b,
                       float lo, float hi, float* out) {
  ConvParams tiles = p;
  tiles.winograd = 0;  // the channel tiles' pack, where the compile step chose Winograd
  std::vector<float> packed(static_cast<size_t>(convPackedWeightFloats(tiles)),
                            std::numeric_limits<float>::quiet_NaN());
  packConvWeights(tiles, w, packed.data());
  const int64_t depth = p.c * p.kh * p.kw, m16 = (p.m + 15) / 16 * 16;
  for (int64_t c0 = 0; c0 < m16; c0 += kConvTileChannels) {
    const int64_t width = std::min<int64_t>(kConvTileChannels, m16 - c0);
    for (int64_t k = 0; k < depth; ++k)
      for (int64_t c = 0; c < width; ++c) {
        const float v = packed[static_cast<size_t>(c0 * depth + k * width + c)];
        const float want = c0 + c < p.m ? w[(c0 + c) * depth + k] : 0.0f;
        if (!(v == want)) {
          ADD_FAILURE() << "packed weight of channel " << c0 + c << ", tap " << k << ": " << v;
          return true;
        }
      }
  }
  return kernels::runConvChannelTiles(p, kTasks, x, packed.data(), b, lo, hi, out, kLogic);
}

// Geometries of the channel-tile path: rows of 7 and of 1..6 left (13 = 7 + 6, 9 = 7 + 2, 3),
// rows of 14-position tiles (below),
// channel tiles of 4, 3, 2 and 1 vectors with a partial vector (130 = 64 + 64 + 16 with 2
// valid, 40 = 48 with 8 padding, 24), strides 1 and 2 (and 3 down the rows), dilation,
// asymmetric and bottom-right-only padding, rows that skip the taps on padding rows (some with
// none left), 1x1 strided convs read in place, 2 images, and the fused clamp.
std::vector<ConvGeom> channelTileGeoms() {
  std::vector<ConvGeom> out;
  for (const ConvGeom& g : convGeoms())
    if (g.group == 1 && (g.strides[1] == 1 || g.strides[1] == 2)) out.push_back(g);
  const std::vector<ConvGeom> more = {
      {"ct_7x7_130", {1, 9, 7, 7}, {130, 9, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {"ct_13_wide_s2", {2, 5, 9, 27}, {40, 5, 3, 3}, {3, 2}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {"ct_dilated", {1, 4, 12, 11}, {24, 4, 3, 3}, {1, 1}, {2, 0, 1, 3}, {2, 2}, 1, false},
      {"ct_pad_bottom_right", {1, 3, 6, 6}, {17, 3, 2, 2}, {1, 1}, {0, 0, 1, 1}, {1, 1}, 1, true},
      // Output rows whose window lies wholly in the padding (no tap: the bias alone), and rows
      // cut by it at both ends.
      {"ct_rows_all_padding", {1, 5, 4, 6}, {20, 5, 3, 3}, {1, 1}, {4, 1, 4, 1}, {1, 1}, 1, true},
      {"ct_dilated_s2_rows", {2, 3, 9, 8}, {16, 3, 3, 2}, {2, 1}, {3, 1, 2, 0}, {3, 1}, 1, true},
      // 3 x 3 over 64 channels on a padded copy: 7-position tiles whose first position reads
      // the left zero column, whose last reads the right one, both, neither (pads of 2,
      // dilation 2); part tiles (rows of 3, a tile of 1 or 2 left), which multiply their zeros;
      // strides 2.
      {"ct_cut_15", {1, 5, 6, 15}, {64, 5, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {"ct_cut_3", {1, 4, 5, 3}, {64, 4, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, 0.0f},
      {"ct_cut_s2_odd", {2, 3, 8, 13}, {64, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {"ct_cut_s2_even", {1, 3, 7, 14}, {70, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, false},
      {"ct_cut_pad2", {1, 3, 6, 9}, {64, 3, 3, 3}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 1, true},
      {"ct_cut_dilated", {1, 3, 8, 11}, {64, 3, 3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1, true},
      {"ct_cut_right_only", {1, 3, 5, 10}, {64, 3, 3, 3}, {1, 1}, {0, 0, 0, 1}, {1, 1}, 1, true},
      // Padded 3 x 3 convs read in place (conv2d.cpp, padInPlace: whole 7-position tiles of
      // 64 channels, one padding row or column a side at most): both cuts, a row of one tile
      // (both at once), the left one only, stride 2 with and without the right one, 2 images;
      // ct_cut_s2_odd above as well.
      {"ct_pad_in_place_14", {2, 5, 6, 14}, {64, 5, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {"ct_pad_in_place_7", {1, 3, 7, 7}, {128, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, false},
      {"ct_pad_in_place_left", {1, 2, 5, 15}, {64, 2, 3, 3}, {1, 1}, {1, 0, 1, 1}, {1, 1}, 1, true},
      {"ct_pad_in_place_s2", {1, 4, 9, 28}, {64, 4, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, true},
      // Weights too large for one pass (channel_tile_body.inc, kConvPassWeightBytes): 295 KB and
      // 276 KB per 64-channel tile run in two passes over the input channels, the 16-channel
      // tile in one; packs over 1 MiB (1.17 and 1.12 MB) also prefetch the next pass's weight.
      // Rows of 7 + 2 and of 7 + 1, cut rows and columns, stride 2, 2 images, clamps.
      {"ct_depth_passes", {1, 128, 9, 9}, {144, 128, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      // A weight smaller than an image's input: items in (image, row block, tile) order, tiles
      // of 64, 64 and 16 channels, two images.
      {"ct_row_order", {2, 24, 14, 15}, {144, 24, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},
      {"ct_streamed_passes",
       {2, 120, 7, 9},
       {272, 120, 3, 3},
       {1, 1},
       {1, 1, 1, 1},
       {1, 1},
       1,
       true,
       0.0f},
      {"ct_streamed_s2",
       {1, 130, 11, 15},
       {240, 130, 3, 3},
       {2, 2},
       {1, 1, 1, 1},
       {1, 1},
       1,
       false,
       -0.5f,
       0.5f},
      // Rows at least 14 wide run 14-position tiles of two vectors, one half of a 64-channel
      // tile's channels at a time (channel_tile_body.inc, kWide), and a row's last 7 positions a
      // 7 x 4 tile: read in place with both cuts on a row of 4 wide tiles (56), a wide tile
      // cut on the left beside a 7 x 4 cut on the right (21), on a padded copy with a part
      // tile left (30), in two depth passes (30), streamed with prefetch (21), a residual
      // and blocked output as every geometry here.
      {"ct_wide_in_place_56", {1, 3, 3, 56}, {64, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {"ct_wide_in_place_21", {2, 4, 4, 21}, {128, 4, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {"ct_wide_padded_30", {1, 5, 4, 30}, {72, 5, 3, 3}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 1, false},
      {"ct_wide_depth_passes",
       {1, 128, 4, 30},
       {64, 128, 3, 3},
       {1, 1},
       {1, 1, 1, 1},
       {1, 1},
       1,
       true,
       0.0f},
      {"ct_wide_streamed",
       {1, 120, 4, 21},
       {272, 120, 3, 3},
       {1, 1},
       {1, 1, 1, 1},
       {1, 1},
       1,
       true},
      // A channel tile of 32 (two vectors: a 32-channel conv, or the last 32 channels of 96)
      // runs 14 x 2 tiles as well, one per 14 positions, with its own cut variants: read in place
      // with padding at stride 2 (MobileNetV2's stem: the left cut only) and at stride 1 beside
      // a 64-channel tile (both cuts, 2 images), on a padded copy with a 7 x 2 tile left (21),
      // and in two depth passes (276 KB).
      {"ct_wide32_in_place_s2",
       {1, 3, 9, 28},
       {32, 3, 3, 3},
       {2, 2},
       {1, 1, 1, 1},
       {1, 1},
       1,
       true},
      {"ct_wide96_in_place_28",
       {2, 5, 6, 28},
       {96, 5, 3, 3},
       {1, 1},
       {1, 1, 1, 1},
       {1, 1},
       1,
       true},
      {"ct_wide32_padded_21", {1, 4, 5, 21}, {32, 4, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, false},
      {"ct_wide32_depth_passes",
       {1, 240, 3, 14},
       {32, 240, 3, 3},
       {1, 1},
       {1, 1, 1, 1},
       {1, 1},
       1,
       true,
       0.0f},
      // Two depth passes on rows of two 14-position tiles of 32 channels, and on 32-channel
      // row pairs (7-wide planes, below): 276 KB of weights a tile, over kConvPassWeightBytes.
      {"ct_wide32_passes_28",
       {1, 240, 3, 28},
       {32, 240, 3, 3},
       {1, 1},
       {1, 1, 1, 1},
       {1, 1},
       1,
       true},
      {"ct_pair32_7x7_passes",
       {1, 240, 7, 7},
       {32, 240, 3, 3},
       {1, 1},
       {1, 1, 1, 1},
       {1, 1},
       1,
       false,
       0.0f},
      // 7-wide planes read in place run pairs of rows with the same taps as one 14 x 2 tile
      // (channel_tile_body.inc, row pairs): cut at both ends of both rows in two depth passes
      // on 2 images, streamed with prefetch (a 1.1 MB pack) beside 7 x 4 rows, and uncut (a
      // 1 x 1 conv, every row the same taps); ct_pad_in_place_7 above as well.
      {"ct_pair_7x7_passes",
       {2, 128, 7, 7},
       {64, 128, 3, 3},
       {1, 1},
       {1, 1, 1, 1},
       {1, 1},
       1,
       true},
      {"ct_pair_7x7_streamed",
       {1, 160, 7, 7},
       {192, 160, 3, 3},
       {1, 1},
       {1, 1, 1, 1},
       {1, 1},
       1,
       false,
       -0.5f,
       0.5f},
      {"ct_pair_1x1_7x7",
       {1, 70, 7, 7},
       {64, 70, 1, 1},
       {1, 1},
       {0, 0, 0, 0},
       {1, 1},
       1,
       true,
       0.0f},
      // Pairs of a 32-channel tile too (MobileNetV2's 960 -> 160 on 7 x 7: 64 + 64 + 32).
      {"ct_pair_1x1_7x7_96",
       {1, 70, 7, 7},
       {96, 70, 1, 1},
       {1, 1},
       {0, 0, 0, 0},
       {1, 1},
       1,
       true,
       -0.25f,
       0.5f},
      // A tall window padded by more than its reach: a tap set per row would outgrow the
      // table's bound, so the later rows run every tap.
      {"ct_tall_window", {1, 2, 5, 9}, {16, 2, 9, 1}, {1, 1}, {8, 0, 8, 0}, {1, 1}, 1, true},
      {"ct_1x1_s2_in_place",
       {1, 70, 14, 14},
       {64, 70, 1, 1},
       {2, 2},
       {0, 0, 0, 0},
       {1, 1},
       1,
       true,
       0.0f},
      {"ct_row_of_1",
       {1, 6, 5, 1},
       {33, 6, 3, 1},
       {1, 1},
       {1, 0, 1, 0},
       {1, 1},
       1,
       true,
       -0.2f,
       0.25f},
  };
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

TEST(IsaConv, ChannelTilePathMatchesThePlainLoop) {
  if (detectedIsa() < Isa::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  const AtLeastAvx2 avx2;
  const bool avx512 = detectedIsa() >= Isa::kAvx512;
  for (const ConvGeom& g : channelTileGeoms()) {
    const ConvParams p = compiledConv(g);
    checkConv(g, p, "avx512 logic, 1 task", nullptr, nullptr, channelTilesWhole<1, true>);
    checkConv(g, p, "avx512 logic, 3 tasks", nullptr, nullptr, channelTilesWhole<3, true>);
    if (!avx512) continue;
    ScopedIsaOverride forced(Isa::kAvx512);
    checkConv(g, p, "avx512, 1 task", nullptr, nullptr, channelTilesWhole<1, false>);
    checkConv(g, p, "avx512, 2 tasks", nullptr, nullptr, channelTilesWhole<2, false>);
  }
}

TEST(IsaConv, TheCompileStepChoosesChannelTilesForDeepConvsOnAvx512) {
  const ConvGeom l4{"l4", {1, 512, 7, 7}, {512, 512, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  const ConvGeom down{"down", {1, 64, 56, 56}, {128, 64, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1};
  const ConvGeom stem{"stem", {1, 3, 224, 224}, {32, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1};
  const ConvGeom expand{"expand", {1, 24, 56, 56}, {144, 24, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1},
                        1};
  const ConvGeom last{"last", {1, 320, 7, 7}, {1280, 320, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1};
  const ConvGeom s3{"s3", {1, 64, 30, 30}, {64, 64, 3, 3}, {3, 3}, {1, 1, 1, 1}, {1, 1}, 1};
  const ConvGeom grouped{"g2", {1, 64, 14, 14}, {64, 32, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2};
  const int64_t on = activeIsa() == Isa::kAvx512 ? 1 : 0;
  EXPECT_EQ(compiledConv(l4).channelTiles, on);
  EXPECT_EQ(compiledConv(down).channelTiles, on);
  EXPECT_EQ(compiledConv(last).channelTiles, on);
  EXPECT_EQ(compiledConv(stem).channelTiles, 0);     // K = 27: too shallow
  EXPECT_EQ(compiledConv(expand).channelTiles, 0);   // 1x1 over 3,136 positions: in place
  EXPECT_EQ(compiledConv(s3).channelTiles, 0);       // column stride 3
  EXPECT_EQ(compiledConv(grouped).channelTiles, 0);  // groups
}

TEST(IsaConv, TheCompileStepSplitsChannelsOnlyForFewPositions) {
  // ResNet-18's last 3 x 3 (512 channels at 7 x 7, K = 4,608): one block of positions, so with
  // two tasks the channels are split in 8 items (4 per task); its first (64 at 56 x 56) has 14
  // blocks of 224 positions, enough (on AVX-512, 17 blocks in whole 64-column tiles: 16 of 192
  // and one of 64).
  const ConvGeom deep{"l4", {1, 512, 7, 7}, {512, 512, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  const ConvParams p = compiledConv(deep, 2);
  EXPECT_EQ(p.kc, 384);
  EXPECT_EQ(p.colBlock, 49);
  EXPECT_EQ(p.mSplit, 8);
  EXPECT_EQ(p.channelBound(1), 60);
  EXPECT_EQ(p.channelBound(8), 512);
  EXPECT_EQ(compiledConv(deep, 1).mSplit, 1);
  const ConvGeom early{"l1", {1, 64, 56, 56}, {64, 64, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  const ConvParams q = compiledConv(early, 2);
  EXPECT_EQ(q.colBlock, activeIsa() == Isa::kAvx512 ? 192 : 224);
  EXPECT_EQ(q.kc, 288);
  EXPECT_EQ(q.mSplit, 1);
  EXPECT_LE(q.kc * q.colBlock, 64 * 1024);
  EXPECT_EQ(q.colBlock % 16, 0);
}

// On AVX2, with two tasks and one image, a conv whose output channels are no more than its
// positions splits the positions between the tasks (each packs its own B) rather than the
// channels (every task reading one B, half of it packed by the other core): ResNet-18's 1x1
// stride-2 shortcut (128 channels, 784 positions), MobileNetV2's 14 x 14 project (96, 196). Its
// last 3 x 3 (512 channels, 49 positions) keeps the channel split, and so does a batch of two,
// whose images already give each task one.
TEST(IsaConv, OnAvx2TheCompileStepSplitsPositionsWhereChannelsAreFewer) {
  if (detectedIsa() < Isa::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  ScopedIsaOverride forced(Isa::kAvx2);
  const ConvGeom down{"down", {1, 64, 56, 56}, {128, 64, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1};
  const ConvGeom project{"project", {1, 576, 14, 14}, {96, 576, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1},
                         1};
  const ConvGeom deep{"l4", {1, 512, 7, 7}, {512, 512, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  const ConvParams d = compiledConv(down, 2);
  EXPECT_EQ(d.mSplit, 1);
  EXPECT_EQ(d.colBlock, 392);
  const ConvParams q = compiledConv(project, 2);
  EXPECT_EQ(q.mSplit, 1);
  EXPECT_EQ(q.colBlock, 98);
  EXPECT_EQ(q.kc, 288);
  EXPECT_EQ(compiledConv(deep, 2).mSplit, 8);
  // One thread: one block of all the positions, as before.
  EXPECT_EQ(compiledConv(down, 1).colBlock, 784);
  EXPECT_EQ(compiledConv(project, 1).colBlock, 196);
  // Two images on two tasks: as many images as tasks, so the channel split as before.
  ConvGeom two = down;
  two.x[0] = 2;
  const ConvParams t = compiledConv(two, 2);
  EXPECT_EQ(t.colBlock, 784);
  EXPECT_EQ(t.mSplit, 4);
}

// The depthwise channel-block path (ConvParams::channelBlocks) as a whole-tensor function: items
// of (image, 16 channels, band of output rows) as executor/kernels/conv2d.cpp makes them, with
// kBands bands (capped at the rows; 0: one band per row), on the active ISA (AVX-512 or AVX2)
// or the AVX-512 logic on AVX2.
template <int kBands, bool kLogic>
bool channelBlocksWhole(const ConvParams& p, const float* x, const float* w, const float* b,
                        float lo, float hi, float* out) {
  const int64_t bands = kBands == 0 ? p.oh : std::min<int64_t>(kBands, p.oh);
  for (int64_t img = 0; img < p.n; ++img)
    for (int64_t oc0 = 0; oc0 < p.m; oc0 += 16)
      for (int64_t band = 0; band < bands; ++band) {
        const int64_t oy0 = band * p.oh / bands, oy1 = (band + 1) * p.oh / bands;
        if (oy1 > oy0 &&
            !kernels::convChannelBlockItemF32(p, x, w, b, lo, hi, out, img, oc0,
                                              std::min<int64_t>(16, p.m - oc0), oy0, oy1, kLogic))
          return false;
      }
  return true;
}

// Geometries of the channel-block path: the 3 x 3 stride 1-2 depthwise ones above without a
// channel multiplier (2-5 channels: one part-block) and blocks of 16 + 1 and 16 + 16 + 8 channels
// over 2 images; planes narrower than 16 columns (whole-plane transposes, 15 + 1 positions per row
// of chunks), exactly 16 wide, a stride-2 row whose output is narrower than 16 from a wider input,
// rows and columns of 1, pads of 2 and of 0 on one side, row stride 2 with column stride 1, and
// clamps.
std::vector<ConvGeom> channelBlockGeoms() {
  std::vector<ConvGeom> out;
  for (const ConvGeom& g : convGeoms())
    if (g.group > 1 && g.w[0] == g.group && g.w[2] == 3 && g.w[3] == 3 && g.dilations[0] == 1 &&
        g.dilations[1] == 1 && g.strides[0] <= 2 && g.strides[1] <= 2)
      out.push_back(g);
  const std::vector<ConvGeom> more = {
      {"cb_17_ch_15_wide", {2, 17, 9, 15}, {17, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 17, true},
      {"cb_40_ch_16_wide_relu6",
       {1, 40, 5, 16},
       {40, 1, 3, 3},
       {1, 1},
       {1, 1, 1, 1},
       {1, 1},
       40,
       true,
       0.0f,
       0.5f},
      {"cb_s2_out_narrow", {1, 20, 11, 21}, {20, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 20, true},
      {"cb_row_of_1", {1, 16, 1, 40}, {16, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 16, false},
      {"cb_column_of_1", {1, 18, 23, 1}, {18, 1, 3, 3}, {2, 1}, {1, 1, 1, 1}, {1, 1}, 18, true},
      {"cb_pad_2", {1, 33, 6, 19}, {33, 1, 3, 3}, {1, 2}, {2, 2, 2, 0}, {1, 1}, 33, true},
      {"cb_no_pad_s2", {2, 16, 16, 33}, {16, 1, 3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 16, true},
      {"cb_1x1_plane", {1, 24, 1, 1}, {24, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 24, true},
      // Rows a multiple of 7 and not of 8 run in blocks of 7 (dwBlockWidth): 7, 14, 21 and 28.
      {"cb_7x7_32", {1, 32, 7, 7}, {32, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 32, true, 0.0f},
      {"cb_14_s2_to_7", {2, 16, 14, 14}, {16, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 16, true},
      {"cb_21_wide", {1, 48, 5, 21}, {48, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 48, false},
      {"cb_56_s2_to_28", {1, 16, 6, 56}, {16, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 16, true},
      {"cb_14_wide_s1", {1, 32, 4, 14}, {32, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 32, true},
      // A row block past one padding column on both sides (an 8-wide row), and on the right
      // only at stride 2 (27 -> 14): channelBlockRow's kEdgeBoth and kEdgeRight.
      {"cb_8_wide_one_block", {1, 16, 3, 8}, {16, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 16, true},
      {"cb_27_s2_to_14", {1, 16, 5, 27}, {16, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 16, true},
      // AVX2 writes planes back two 28-wide rows at a time (whole 8-position transposes): 9
      // rows, so bands start and end inside a pair, and a 20-channel block of 4.
      {"cb_28_wide_pairs", {1, 36, 9, 28}, {36, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 36, true},
  };
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

// The depthwise taps packed as a plan packs a constant weight (compiler/weight_pack.h: 9 tap
// vectors per 16 channels, zeros past m), the padding NaN-checked.
template <ConvWholeFn kWhole>
bool packedTaps(const ConvParams& p, const float* x, const float* w, const float* b, float lo,
                float hi, float* out) {
  ConvParams q = p;
  q.channelBlocks = 1;
  q.weightsPacked = 1;
  const int64_t floats = convPackedWeightFloats(q);
  if (floats != (p.m + 15) / 16 * 16 * 9) return false;
  std::vector<float> packed(static_cast<size_t>(floats), std::numeric_limits<float>::quiet_NaN());
  packConvWeights(q, w, packed.data());
  for (int64_t i = 0; i < floats; ++i)
    if (std::isnan(packed[static_cast<size_t>(i)])) return false;
  return kWhole(q, x, packed.data(), b, lo, hi, out);
}

TEST(IsaConv, ChannelBlockDepthwisePathMatchesThePlainLoop) {
  if (detectedIsa() < Isa::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  const AtLeastAvx2 avx2;
  const bool avx512 = detectedIsa() >= Isa::kAvx512;
  for (const ConvGeom& g : channelBlockGeoms()) {
    const ConvParams p = compiledConv(g);
    ASSERT_EQ(p.path, ConvParams::Path::kDepthwise) << g.name;
    checkConv(g, p, "avx512 logic, 1 band", nullptr, nullptr, channelBlocksWhole<1, true>);
    checkConv(g, p, "avx512 logic, 3 bands", nullptr, nullptr, channelBlocksWhole<3, true>);
    checkConv(g, p, "avx512 logic, a band per row", nullptr, nullptr, channelBlocksWhole<0, true>);
    checkConv(g, p, "avx512 logic, packed taps", nullptr, nullptr,
              packedTaps<channelBlocksWhole<2, true>>);
    {
      // AVX2's own kernel (F32x16Avx2: each block as two 8-channel halves).
      ScopedIsaOverride forced(Isa::kAvx2);
      checkConv(g, p, "avx2, 1 band", nullptr, nullptr, channelBlocksWhole<1, false>);
      checkConv(g, p, "avx2, packed taps", nullptr, nullptr,
                packedTaps<channelBlocksWhole<1, false>>);
      checkConv(g, p, "avx2, a band per row", nullptr, nullptr, channelBlocksWhole<0, false>);
    }
    if (!avx512) continue;
    ScopedIsaOverride forced(Isa::kAvx512);
    checkConv(g, p, "avx512, 1 band", nullptr, nullptr, channelBlocksWhole<1, false>);
    checkConv(g, p, "avx512, packed taps", nullptr, nullptr,
              packedTaps<channelBlocksWhole<1, false>>);
    checkConv(g, p, "avx512, 2 bands", nullptr, nullptr, channelBlocksWhole<2, false>);
  }
}

// ---- activations in channel blocks (ConvParams::inBlocked / outBlocked) ----------------------

// [n, c, positions] planes <-> [n, c / 16, positions, 16] channel blocks (c a multiple of 16).
std::vector<float> toChannelBlocks(const float* x, int64_t n, int64_t c, int64_t positions) {
  std::vector<float> out(static_cast<size_t>(n * c * positions));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t q = 0; q < positions; ++q)
        out[static_cast<size_t>(((i * c + ch / 16 * 16) * positions + q * 16) + ch % 16)] =
            x[(i * c + ch) * positions + q];
  return out;
}
void fromChannelBlocks(const float* x, int64_t n, int64_t c, int64_t positions, float* out) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t q = 0; q < positions; ++q)
        out[(i * c + ch) * positions + q] =
            x[((i * c + ch / 16 * 16) * positions + q * 16) + ch % 16];
}

// A whole-tensor path run with its input and/or output in channel blocks, as a static plan runs
// it between two convs: checkConv's planes go in blocked and come back out as planes (the
// output buffer NaN-filled, so a position the path never writes shows).
template <ConvWholeFn kWhole, bool kIn, bool kOut>
bool inChannelBlocks(const ConvParams& p, const float* x, const float* w, const float* b, float lo,
                     float hi, float* out) {
  ConvParams q = p;
  q.inBlocked = kIn ? 1 : 0;
  q.outBlocked = kOut ? 1 : 0;
  const int64_t positions = p.oh * p.ow;
  const std::vector<float> xb =
      kIn ? toChannelBlocks(x, p.n, p.c, p.h * p.w) : std::vector<float>{};
  std::vector<float> ob(kOut ? static_cast<size_t>(p.n * p.m * positions) : 0,
                        std::numeric_limits<float>::quiet_NaN());
  if (!kWhole(q, kIn ? xb.data() : x, w, b, lo, hi, kOut ? ob.data() : out)) return false;
  if (kOut) fromChannelBlocks(ob.data(), p.n, p.m, positions, out);
  return true;
}

TEST(IsaConv, ChannelBlockDepthwiseReadsAndWritesChannelBlocks) {
  if (detectedIsa() < Isa::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  const AtLeastAvx2 avx2;
  const bool avx512 = detectedIsa() >= Isa::kAvx512;
  int ran = 0;
  for (const ConvGeom& g : channelBlockGeoms()) {
    if (g.x[1] % 16 != 0) continue;
    ++ran;
    const ConvParams p = compiledConv(g);
    checkConv(g, p, "logic, in", nullptr, nullptr,
              inChannelBlocks<channelBlocksWhole<1, true>, true, false>);
    checkConv(g, p, "logic, out", nullptr, nullptr,
              inChannelBlocks<channelBlocksWhole<1, true>, false, true>);
    checkConv(g, p, "logic, both, 3 bands", nullptr, nullptr,
              inChannelBlocks<channelBlocksWhole<3, true>, true, true>);
    checkConv(g, p, "logic, both, a band per row", nullptr, nullptr,
              inChannelBlocks<channelBlocksWhole<0, true>, true, true>);
    checkConv(g, p, "logic, both, packed taps", nullptr, nullptr,
              inChannelBlocks<packedTaps<channelBlocksWhole<1, true>>, true, true>);
    {
      ScopedIsaOverride forced(Isa::kAvx2);
      checkConv(g, p, "avx2, in", nullptr, nullptr,
                inChannelBlocks<channelBlocksWhole<1, false>, true, false>);
      checkConv(g, p, "avx2, out", nullptr, nullptr,
                inChannelBlocks<channelBlocksWhole<1, false>, false, true>);
      checkConv(g, p, "avx2, both, 3 bands", nullptr, nullptr,
                inChannelBlocks<channelBlocksWhole<3, false>, true, true>);
    }
    if (!avx512) continue;
    ScopedIsaOverride forced(Isa::kAvx512);
    checkConv(g, p, "avx512, both", nullptr, nullptr,
              inChannelBlocks<channelBlocksWhole<1, false>, true, true>);
    checkConv(g, p, "avx512, both, 2 bands", nullptr, nullptr,
              inChannelBlocks<channelBlocksWhole<2, false>, true, true>);
  }
  EXPECT_EQ(ran, 9);
}

// Channel-tile convs that read channel blocks in place (no padding: 1x1 at strides 1 and 2, and
// a 3 x 3 without padding, whose taps step 16 floats per column) or write them: 7-position rows
// and rows of 1-6 left, tiles of 4 and of 1-3 vectors, 2 images, clamps.
// A residual (fuse-conv-residual) added in the tiles' store: bit for bit the unclamped sums of
// the same tiles plus the residual, then Clip's comparisons, on every channel-tile geometry
// (whole and part tiles, cuts, partial vectors), on AVX-512 and its logic on AVX2.
TEST(IsaConv, ChannelTilesAddAResidualBeforeTheClamp) {
  if (detectedIsa() < Isa::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  const AtLeastAvx2 avx2;
  constexpr float kInfF = std::numeric_limits<float>::infinity();
  constexpr float kNaNF = std::numeric_limits<float>::quiet_NaN();
  const bool avx512 = detectedIsa() >= Isa::kAvx512;
  for (const ConvGeom& g : channelTileGeoms()) {
    ConvParams p = compiledConv(g);
    p.winograd = 0;  // the channel tiles' pack, where the compile step chose Winograd
    const Tensor x = randomTensor(DType::kF32, g.x, 41);
    const Tensor w = randomTensor(DType::kF32, g.w, 42);
    const Tensor b = randomTensor(DType::kF32, Shape{g.w[0]}, 43);
    const int64_t size = p.n * p.m * p.oh * p.ow;
    const Tensor r = randomTensor(DType::kF32, Shape{size}, 44);
    std::vector<float> packed(static_cast<size_t>(convPackedWeightFloats(p)));
    packConvWeights(p, w.as<float>(), packed.data());
    const float lo = g.lo == -kInfF ? -0.5f : g.lo, hi = g.hi == kInfF ? 0.75f : g.hi;
    for (bool logic : {true, false}) {
      if (!logic && !avx512) continue;
      SCOPED_TRACE(g.name + (logic ? " avx512 logic" : " avx512"));
      std::optional<ScopedIsaOverride> forced;
      if (!logic) forced.emplace(Isa::kAvx512);
      const float* bias = g.bias ? b.as<float>() : nullptr;
      std::vector<float> sums(static_cast<size_t>(size)), got(static_cast<size_t>(size), kNaNF);
      ASSERT_TRUE(kernels::runConvChannelTiles(p, 2, x.as<float>(), packed.data(), bias, -kInfF,
                                               kInfF, sums.data(), logic));
      ASSERT_TRUE(kernels::runConvChannelTiles(p, 2, x.as<float>(), packed.data(), bias, lo, hi,
                                               got.data(), logic, r.as<float>()));
      for (int64_t i = 0; i < size; ++i) {
        const float v = sums[static_cast<size_t>(i)] + r.as<float>()[i], y = v < lo ? lo : v;
        const float want = y > hi ? hi : y;
        ASSERT_EQ(std::memcmp(&want, &got[static_cast<size_t>(i)], 4), 0)
            << "at " << i << ": " << got[static_cast<size_t>(i)] << " want " << want;
      }
    }
  }
}

TEST(IsaConv, ChannelTilesReadAndWriteChannelBlocks) {
  if (detectedIsa() < Isa::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  const AtLeastAvx2 avx2;
  const bool avx512 = detectedIsa() >= Isa::kAvx512;
  const std::vector<ConvGeom> geoms = {
      {"expand_7x7",
       {1, 32, 7, 7},
       {96, 32, 1, 1},
       {1, 1},
       {0, 0, 0, 0},
       {1, 1},
       1,
       true,
       0.0f,
       6.0f},
      {"project_15x9_2img", {2, 48, 15, 9}, {80, 48, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},
      {"s2_13x13", {1, 16, 13, 13}, {16, 16, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, false},
      {"3x3_unpadded", {1, 32, 9, 12}, {48, 32, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},
      // 14 x 2 tiles of a 32-channel tile reading channel blocks at strides 1 (beside a
      // 64-channel tile) and 2.
      {"wide32_1x1", {1, 48, 3, 28}, {96, 48, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},
      {"wide32_1x1_s2", {1, 32, 5, 28}, {32, 32, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, true},
      {"wide_tile_1x1",
       {1, 64, 3, 20},
       {256, 64, 1, 1},
       {1, 1},
       {0, 0, 0, 0},
       {1, 1},
       1,
       true,
       -1.0f,
       1.0f},
  };
  for (const ConvGeom& g : geoms) {
    const ConvParams p = compiledConv(g);
    checkConv(g, p, "logic, in", nullptr, nullptr,
              inChannelBlocks<channelTilesWhole<1, true>, true, false>);
    checkConv(g, p, "logic, out", nullptr, nullptr,
              inChannelBlocks<channelTilesWhole<3, true>, false, true>);
    checkConv(g, p, "logic, both", nullptr, nullptr,
              inChannelBlocks<channelTilesWhole<2, true>, true, true>);
    if (!avx512) continue;
    ScopedIsaOverride forced(Isa::kAvx512);
    checkConv(g, p, "avx512, in", nullptr, nullptr,
              inChannelBlocks<channelTilesWhole<1, false>, true, false>);
    checkConv(g, p, "avx512, out, 2 tasks", nullptr, nullptr,
              inChannelBlocks<channelTilesWhole<2, false>, false, true>);
  }
  // A padded conv cannot read channel blocks (no padded copy is made of them): the path refuses.
  const ConvGeom padded{"padded", {1, 16, 5, 5}, {16, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  ConvParams q = compiledConv(padded);
  q.inBlocked = 1;
  std::vector<float> x(16 * 25, 1.0f), w(16 * 16 * 9, 1.0f), out(16 * 25);
  std::vector<float> packed(static_cast<size_t>(convPackedWeightFloats(q)));
  packConvWeights(q, w.data(), packed.data());
  EXPECT_FALSE(kernels::runConvChannelTiles(q, 1, x.data(), packed.data(), nullptr, -1e30f, 1e30f,
                                            out.data(), true));
}

// A 1x1 conv writing channel blocks on AVX2 (conv_body.inc's convItemToBlocks: a static plan's
// expanding 1x1 before a channel-block depthwise conv), its weight packed as the channel tiles'
// and its tiles run as positions x channels: bit for bit the planar AVX2 path's output, in
// blocks (the same FMA chains: the bias, k ascending within each K slice, + C on later slices,
// the clamp last). Positions in whole and part 6-row tiles (49, 196, 45, 1), K over two slices
// (450), a last 64-channel tile of 16 (80) and of 0 (320), 2 and 3 images, 1 and 2 threads
// (items split by channel blocks and by positions), with and without bias and clamp. The
// kernel refuses what it cannot write: a 3 x 3 conv, two groups.
TEST(IsaConv, A1x1WritesChannelBlocksOnAvx2BitForBitWithItsPlanarPath) {
  if (detectedIsa() < Isa::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  ScopedIsaOverride forced(Isa::kAvx2);
  const std::vector<ConvGeom> geoms = {
      {"expand_7x7",
       {1, 32, 7, 7},
       {96, 32, 1, 1},
       {1, 1},
       {0, 0, 0, 0},
       {1, 1},
       1,
       true,
       0.0f,
       6.0f},
      {"expand_14x14_2img",
       {2, 24, 14, 14},
       {144, 24, 1, 1},
       {1, 1},
       {0, 0, 0, 0},
       {1, 1},
       1,
       true,
       0.0f,
       6.0f},
      {"deep_450_9x5", {1, 450, 9, 5}, {48, 450, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, false},
      {"one_position_3img",
       {3, 16, 1, 1},
       {16, 16, 1, 1},
       {1, 1},
       {0, 0, 0, 0},
       {1, 1},
       1,
       true,
       -0.5f,
       0.5f},
      {"m80_9x9", {1, 16, 9, 9}, {80, 16, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},
      {"m320_7x7", {1, 160, 7, 7}, {320, 160, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},
      {"wide_14x14",
       {1, 64, 14, 14},
       {384, 64, 1, 1},
       {1, 1},
       {0, 0, 0, 0},
       {1, 1},
       1,
       true,
       0.0f,
       6.0f},
  };

  // The spec a plan runs: output blocked, the weight packed.
  auto blockedOf = [](const KernelSpec& spec) {
    KernelSpec blocked = spec;
    auto& p = std::get<ConvParams>(blocked.params);
    p.outBlocked = 1;
    p.weightsPacked = 1;
    return blocked;
  };
  bool split = false;
  for (const ConvGeom& g : geoms)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(fmt::format("{} threads {}", g.name, threads));
      const auto spec = convSpec(g, threads);
      const ConvParams& p = std::get<ConvParams>(spec->params);
      ASSERT_EQ(p.path, ConvParams::Path::kPointwise);
      ASSERT_TRUE(convBlocksFromGemmFit(p));
      split = split || (spec->tasks > 1 && p.mSplit > 1);
      const Tensor x = randomTensor(DType::kF32, g.x, 51);
      const Tensor w = randomTensor(DType::kF32, g.w, 52);
      const Tensor b = randomTensor(DType::kF32, Shape{g.w[0]}, 53);
      const int64_t positions = p.oh * p.ow, size = p.n * p.m * positions;
      std::vector<float> planar(static_cast<size_t>(size)),
          got(static_cast<size_t>(size), std::numeric_limits<float>::quiet_NaN());
      const void* in[] = {x.data(), w.data(), b.data()};
      kernels::run(*spec, in, planar.data());
      const KernelSpec blocked = blockedOf(*spec);
      std::vector<float> packed(static_cast<size_t>(convPackedWeightFloats(p)));
      packConvWeights(p, w.as<float>(), packed.data());
      const void* inPacked[] = {x.data(), packed.data(), b.data()};
      kernels::run(blocked, inPacked, got.data());
      const std::vector<float> want = toChannelBlocks(planar.data(), p.n, p.m, positions);
      for (int64_t i = 0; i < size; ++i)
        ASSERT_EQ(std::memcmp(&want[static_cast<size_t>(i)], &got[static_cast<size_t>(i)], 4), 0)
            << "at " << i << ": " << got[static_cast<size_t>(i)] << " want "
            << want[static_cast<size_t>(i)];
    }
  EXPECT_TRUE(split);  // some geometry split its channel blocks between two tasks
  for (const ConvGeom& g : {
           ConvGeom{"3x3", {1, 16, 5, 5}, {16, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
           ConvGeom{"groups", {1, 32, 5, 5}, {32, 16, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2},
       }) {
    SCOPED_TRACE(g.name);
    const auto spec = convSpec(g, 1);
    EXPECT_FALSE(convBlocksFromGemmFit(std::get<ConvParams>(spec->params)));
    const KernelSpec blocked = blockedOf(*spec);
    std::vector<float> x(static_cast<size_t>(g.x.numel()), 1.0f), out(x.size() * 4);
    std::vector<float> packed(
        static_cast<size_t>(convPackedWeightFloats(std::get<ConvParams>(spec->params))), 1.0f);
    const void* in[] = {x.data(), packed.data()};
    EXPECT_THROW(kernels::run(blocked, in, out.data()), Error);
  }
}

// A 1x1 conv reading channel blocks on AVX2 (conv_body.inc's convItemFromBlocks: a static plan's
// projecting 1x1 after a channel-block depthwise conv), whole, its weight packed as the channel
// tiles', its items as conv2d.cpp cuts them or cut raggedly: output channels split at a 64-channel
// tile and mid-tile (8-channel strips), positions at a 4-position tile's middle. x comes in
// blocks (inChannelBlocks); res, when set, is added before the clamp.
template <int kCut>
bool fromBlocksWhole(const ConvParams& p, const float* x, const float* w, const float* b, float lo,
                     float hi, float* out, const float* res) {
  std::vector<float> packed(static_cast<size_t>(convPackedWeightFloats(p)));
  packConvWeights(p, w, packed.data());
  const int64_t positions = p.oh * p.ow, plane = p.m * positions;
  // kCut 0: one item per image; 1: channels at 64 (or m / 2 rounded to 8) and positions at 6.
  const int64_t cm = p.m > 64 ? 64 : p.m / 2 / 8 * 8, cp = positions > 6 ? 6 : positions;
  for (int64_t img = 0; img < p.n; ++img) {
    const float* xi = x + img * p.c * positions;
    const float* ri = res ? res + img * plane : nullptr;
    float* oi = out + img * plane;
    const std::vector<std::pair<int64_t, int64_t>> cs =
        kCut ? std::vector<std::pair<int64_t, int64_t>>{{0, cm}, {cm, p.m}}
             : std::vector<std::pair<int64_t, int64_t>>{{0, p.m}};
    const std::vector<std::pair<int64_t, int64_t>> ps =
        kCut ? std::vector<std::pair<int64_t, int64_t>>{{0, cp}, {cp, positions}}
             : std::vector<std::pair<int64_t, int64_t>>{{0, positions}};
    for (const auto& [c0, c1] : cs)
      for (const auto& [p0, p1] : ps)
        if (c1 > c0 && p1 > p0 &&
            !kernels::convItemFromBlocksF32(p, xi, packed.data(), b, lo, hi, oi, ri, c0, c1, p0,
                                            p1))
          return false;
  }
  return true;
}
template <int kCut>
bool fromBlocksNoResidual(const ConvParams& p, const float* x, const float* w, const float* b,
                          float lo, float hi, float* out) {
  return fromBlocksWhole<kCut>(p, x, w, b, lo, hi, out, nullptr);
}

// Against the double-precision loop: positions in whole and part 4-position tiles (1, 3, 4, 49,
// 50, 196), strips of 24, 16 and 8 channels (m 8, 16, 24, 40, 72, 96, 136, 320: tiles of 64 and
// what is left), K of one block to 60 (960), 1-3 images, with and without bias and clamp. The
// residual: bit for bit the sum without it plus it, then the clamp. And the plan's kernel refuses
// what it cannot read: a 3 x 3 conv, two groups, 24 input channels (not whole blocks).
TEST(IsaConv, A1x1ReadsChannelBlocksOnAvx2) {
  if (detectedIsa() < Isa::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  ScopedIsaOverride forced(Isa::kAvx2);
  auto pw = [](std::string name, Shape x, int64_t m, bool bias, float lo, float hi) {
    return ConvGeom{
        std::move(name), x, Shape{m, x[1], 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, bias, lo, hi};
  };
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<ConvGeom> geoms = {
      pw("project_7x7", {1, 144, 7, 7}, 24, true, -inf, inf),
      pw("project_14x14_2img", {2, 192, 14, 14}, 40, true, 0.0f, 6.0f),
      pw("one_position_3img", {3, 16, 1, 1}, 8, false, -0.5f, 0.5f),
      pw("three_positions", {1, 32, 1, 3}, 16, true, -inf, inf),
      pw("four_positions", {1, 48, 2, 2}, 72, true, -0.25f, inf),
      pw("fifty", {2, 96, 5, 10}, 136, true, -inf, inf),
      pw("deep_480", {1, 480, 7, 7}, 96, true, 0.0f, 6.0f),
      pw("m320_7x7", {1, 960, 7, 7}, 320, true, -inf, inf),
  };
  for (const ConvGeom& g : geoms) {
    const ConvParams p = compiledConv(g);
    ASSERT_EQ(p.path, ConvParams::Path::kPointwise) << g.name;
    ASSERT_TRUE(convPointwiseFromBlocksFit(p)) << g.name;
    checkConv(g, p, "one item", nullptr, nullptr,
              inChannelBlocks<fromBlocksNoResidual<0>, true, false>);
    checkConv(g, p, "cut items", nullptr, nullptr,
              inChannelBlocks<fromBlocksNoResidual<1>, true, false>);
    // The residual, exactly: clamp(sum + r), the sum from the run without it or the clamp.
    SCOPED_TRACE(g.name + " residual");
    const Tensor x = randomTensor(DType::kF32, g.x, 61);
    const Tensor w = randomTensor(DType::kF32, g.w, 62);
    const Tensor b = randomTensor(DType::kF32, Shape{g.w[0]}, 63);
    const int64_t size = p.n * p.m * p.oh * p.ow;
    const Tensor r = randomTensor(DType::kF32, Shape{size}, 64);
    const std::vector<float> xb = toChannelBlocks(x.as<float>(), p.n, p.c, p.h * p.w);
    std::vector<float> sum(static_cast<size_t>(size)), got(static_cast<size_t>(size));
    const float* bias = g.bias ? b.as<float>() : nullptr;
    ASSERT_TRUE(
        fromBlocksWhole<1>(p, xb.data(), w.as<float>(), bias, -inf, inf, sum.data(), nullptr));
    ASSERT_TRUE(fromBlocksWhole<1>(p, xb.data(), w.as<float>(), bias, g.lo, g.hi, got.data(),
                                   r.as<float>()));
    for (int64_t i = 0; i < size; ++i) {
      float want = sum[static_cast<size_t>(i)] + r.as<float>()[i];
      want = g.lo > want ? g.lo : want;
      want = g.hi < want ? g.hi : want;
      ASSERT_EQ(std::memcmp(&want, &got[static_cast<size_t>(i)], 4), 0)
          << "at " << i << ": " << got[static_cast<size_t>(i)] << " want " << want;
    }
  }
  for (const ConvGeom& g : {
           ConvGeom{"3x3", {1, 16, 5, 5}, {16, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
           ConvGeom{"groups", {1, 32, 5, 5}, {32, 16, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2},
           ConvGeom{"c24", {1, 24, 5, 5}, {16, 24, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
       }) {
    SCOPED_TRACE(g.name);
    const auto spec = convSpec(g, 1);
    EXPECT_FALSE(convPointwiseFromBlocksFit(std::get<ConvParams>(spec->params)));
    KernelSpec blocked = *spec;
    std::get<ConvParams>(blocked.params).inBlocked = 1;
    std::get<ConvParams>(blocked.params).weightsPacked = 1;
    std::vector<float> x(static_cast<size_t>(g.x.numel()), 1.0f), out(x.size() * 4);
    std::vector<float> packed(
        static_cast<size_t>(convPackedWeightFloats(std::get<ConvParams>(spec->params))), 1.0f);
    const void* in[] = {x.data(), packed.data()};
    EXPECT_THROW(kernels::run(blocked, in, out.data()), Error);
  }
}

// On this machine's ISA and, where it has more, forced to AVX2 (whose rule differs).
TEST(IsaConv, TheCompileStepChoosesChannelBlocksFor3x3DepthwiseOnAvx2AndAvx512) {
  std::vector<Isa> isas = {activeIsa()};
  if (activeIsa() > Isa::kAvx2) isas.push_back(Isa::kAvx2);
  for (Isa isa : isas) {
    ScopedIsaOverride forced(isa);
    SCOPED_TRACE(isaName(isa));
    const int64_t on = activeIsa() >= Isa::kAvx2 ? 1 : 0;
    auto dw = [](std::string name, int64_t c, int64_t k, std::vector<int64_t> strides,
                 std::vector<int64_t> dilations, int64_t mult) {
      const int64_t pad = (k - 1) / 2;
      return ConvGeom{std::move(name),
                      {1, c, 28, 28},
                      {c * mult, 1, k, k},
                      strides,
                      {pad, pad, pad, pad},
                      dilations,
                      c};
    };
    // On AVX2, output rows at least 24 columns wide (48 at stride 2) run on planes
    // (dw3x3Plane): 28 at stride 1 and 56 at stride 2; 23 and 28 stay in channel blocks.
    const int64_t wideOn = activeIsa() == Isa::kAvx512 ? 1 : 0;
    EXPECT_EQ(compiledConv(dw("s1", 144, 3, {1, 1}, {1, 1}, 1)).channelBlocks, wideOn);
    ConvGeom narrow = dw("s1_narrow", 144, 3, {1, 1}, {1, 1}, 1);
    narrow.x = {1, 144, 23, 23};
    EXPECT_EQ(compiledConv(narrow).channelBlocks, on);
    EXPECT_EQ(compiledConv(dw("s2", 96, 3, {2, 2}, {1, 1}, 1)).channelBlocks, on);
    ConvGeom s2 = dw("s2_28", 96, 3, {2, 2}, {1, 1}, 1);
    s2.x = {1, 96, 56, 56};
    EXPECT_EQ(compiledConv(s2).channelBlocks, on);
    s2.x = {1, 96, 112, 112};
    EXPECT_EQ(compiledConv(s2).channelBlocks, wideOn);
    EXPECT_EQ(compiledConv(dw("5x5", 96, 5, {1, 1}, {1, 1}, 1)).channelBlocks, 0);
    EXPECT_EQ(compiledConv(dw("dilated", 96, 3, {1, 1}, {2, 2}, 1)).channelBlocks, 0);
    EXPECT_EQ(compiledConv(dw("s3", 96, 3, {3, 3}, {1, 1}, 1)).channelBlocks, 0);
    EXPECT_EQ(compiledConv(dw("multiplier", 8, 3, {1, 1}, {1, 1}, 2)).channelBlocks, 0);
    // Not depthwise: one group.
    const ConvGeom dense{"dense", {1, 16, 28, 28}, {16, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
    EXPECT_EQ(compiledConv(dense).channelBlocks, 0);
  }
}

// max_pool2d's vector walk (conv_body.inc) against the reference on every ISA: a NaN in a plane
// must come out as NaN where its windows reach (that plane takes the scalar loop), and +-inf
// are ordinary values. The NaN scan runs in vectors, then a part-vector: one NaN sits in a
// plane's last float (a part-vector where the plane is not a multiple of 16 floats).
TEST(IsaMaxPool, VectorWalkMatchesTheReferenceWithNaNAndInf) {
  for (const Shape& shape : {Shape{2, 3, 9, 40}, Shape{1, 2, 7, 7}, Shape{1, 1, 112, 112}}) {
    Tensor x = randomTensor(DType::kF32, shape, 41);
    float* v = x.as<float>();
    const int64_t hw = shape[2] * shape[3], planes = shape[0] * shape[1];
    v[(planes - 1) * hw + 5] = std::numeric_limits<float>::quiet_NaN();
    v[std::min<int64_t>(2, planes - 1) * hw + hw - 1] = std::numeric_limits<float>::quiet_NaN();
    v[3] = std::numeric_limits<float>::infinity();
    v[x.numel() - 1] = -std::numeric_limits<float>::infinity();
    Attrs attrs;
    attrs.setInts(attr::MaxPool2d::kernel, {3, 3});
    attrs.setInts(attr::MaxPool2d::strides, {2, 2});
    attrs.setInts(attr::MaxPool2d::pads, {1, 1, 1, 1});
    const KernelKey key = makeKernelKey(OpKind::kMaxPool2d, {{DType::kF32, shape}}, attrs);
    const auto spec = compileKernelSpec(key);
    Tensor want(DType::kF32, spec->output.shape);
    const TensorView in[] = {x.view()};
    kernels::ref::runOp(OpKind::kMaxPool2d, key.attrs, in, want.view());
    for (Isa isa : availableIsas()) {
      ScopedIsaOverride forced(isa);
      Tensor got(DType::kF32, spec->output.shape);
      const void* ptrs[] = {x.data()};
      kernels::run(*spec, ptrs, got.data());
      for (int64_t i = 0; i < want.numel(); ++i) {
        const float e = want.as<float>()[i], g = got.as<float>()[i];
        ASSERT_TRUE(std::isnan(e) ? std::isnan(g) : e == g)
            << isaName(isa) << " " << shape.toString() << " at " << i << ": " << g << " vs " << e;
      }
    }
  }
}

// The fused attention's row softmax in vectors (executor/kernels/softmax_isa.cpp, a Cephes
// expf) against the definition in double, on every ISA this machine has: whole vectors and
// tails (sizes 1, odd, one past a vector), scores that underflow, each mask form, and the NaN
// rows softmaxLine gives (a NaN score; every score -inf).
TEST(IsaSoftmax, RowMatchesTheDefinition) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-30.0f, 30.0f);
  const float kInf = std::numeric_limits<float>::infinity();
  for (Isa isa : availableIsas()) {
    SCOPED_TRACE(isaName(isa));
    if (isa == Isa::kBaseline) {
      float x = 1;
      EXPECT_FALSE(kernels::softmaxRowIsa(isa, &x, &x, 1, 1.0f, nullptr, 0));
      continue;
    }
    for (int64_t n : {1, 2, 7, 8, 9, 15, 16, 17, 33, 128, 1001}) {
      for (int maskKind : {0, 1, 2}) {  // none, one float, a row (with -inf entries)
        std::vector<float> s(static_cast<size_t>(n)), mask(static_cast<size_t>(n));
        for (float& v : s) v = dist(rng);
        for (size_t i = 0; i < mask.size(); ++i) mask[i] = i % 3 == 1 ? -kInf : dist(rng);
        if (n > 2) s[1] = 400.0f;  // every other score underflows after the max (scale 0.25)
        const float scale = 0.25f;
        const float* m = maskKind == 0 ? nullptr : mask.data();
        const int64_t stride = maskKind == 2 ? 1 : 0;
        std::vector<double> want(s.size());
        double mx = -INFINITY;
        for (size_t i = 0; i < s.size(); ++i) {
          const double add = maskKind == 0 ? 0.0 : maskKind == 1 ? mask[0] : mask[i];
          want[i] = static_cast<double>(s[i]) * scale + add;
          mx = std::max(mx, want[i]);
        }
        double sum = 0;
        for (double& w : want) sum += (w = std::exp(w - mx));
        std::vector<float> got(s.size(), -1.0f);  // out of place, as the Softmax op runs it
        ASSERT_TRUE(kernels::softmaxRowIsa(isa, s.data(), got.data(), n, scale, m, stride));
        std::vector<float> inPlace = s;  // in place, as the fused attention runs it
        ASSERT_TRUE(
            kernels::softmaxRowIsa(isa, inPlace.data(), inPlace.data(), n, scale, m, stride));
        EXPECT_EQ(inPlace, got);
        for (size_t i = 0; i < s.size(); ++i)
          ASSERT_NEAR(got[i], want[i] / sum, 1e-7 + 2e-6 * want[i] / sum)
              << "n " << n << " mask " << maskKind << " at " << i;
      }
    }
    // A NaN score, or every score -inf (-inf - -inf), makes the row NaN throughout.
    for (int64_t n : {1, 5, 16, 21}) {
      std::vector<float> nan(static_cast<size_t>(n), 1.0f), ninf(static_cast<size_t>(n), -kInf);
      nan[static_cast<size_t>(n - 1)] = std::numeric_limits<float>::quiet_NaN();
      ASSERT_TRUE(kernels::softmaxRowIsa(isa, nan.data(), nan.data(), n, 1.0f, nullptr, 0));
      ASSERT_TRUE(kernels::softmaxRowIsa(isa, ninf.data(), ninf.data(), n, 1.0f, nullptr, 0));
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_TRUE(std::isnan(nan[static_cast<size_t>(i)])) << n << " " << i;
        EXPECT_TRUE(std::isnan(ninf[static_cast<size_t>(i)])) << n << " " << i;
      }
    }
  }
}

TEST(IsaGemm, BlockingFollowsTheIsaAndTheShape) {
  EXPECT_EQ(chooseGemmBlocking(Isa::kBaseline, DType::kF32, 64, 64, 64).path, GemmPath::kEigen);
  EXPECT_EQ(chooseGemmBlocking(Isa::kAvx2, DType::kI32, 64, 64, 64).path, GemmPath::kEigen);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    const int64_t mr = isa == Isa::kAvx2 ? kGemmMrAvx2 : kGemmMrAvx512;
    const int64_t nr = isa == Isa::kAvx2 ? kGemmNrAvx2 : kGemmNrAvx512;
    // AVX-512 streams B's rows (skinny) up to 2 rows and reads both operands in place from 3
    // rows to 1024 (the direct path), and from 1 row where a plan packs B (bPacked); AVX2 streams
    // up to 3 rows, takes its own direct path from 4 to 128 and packs from 129. Attention's row
    // blocks (rowBlock) keep the skinny path up to 3 rows on AVX-512 and 16 on AVX2, and AVX2's
    // pack above that.
    const bool avx512 = isa == Isa::kAvx512;
    const GemmPath few = avx512 ? GemmPath::kDirect : GemmPath::kSkinny;
    EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 1, 1024, 1024).path, GemmPath::kSkinny);
    EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 2, 1024, 1024).path, GemmPath::kSkinny);
    EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 3, 1024, 1024).path, few);
    for (int64_t m : {1, 2, 3})
      EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, m, 1024, 1024, false, true).path,
                avx512 ? GemmPath::kDirect : GemmPath::kSkinny);
    EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 2, 1024, 1024, true, true).path,
              GemmPath::kSkinny);
    EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 3, 1024, 1024, true).path, GemmPath::kSkinny);
    EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 4, 1024, 1024, true).path,
              avx512 ? GemmPath::kDirect : GemmPath::kSkinny);
    EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 16, 1024, 1024, true).path,
              avx512 ? GemmPath::kDirect : GemmPath::kSkinny);
    EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 17, 1024, 1024, true).path,
              avx512 ? GemmPath::kDirect : GemmPath::kPacked);
    EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 4, 1024, 1024).path, GemmPath::kDirect);
    EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 16, 1024, 1024).path, GemmPath::kDirect);
    EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 64, 1024, 1024).path, GemmPath::kDirect);
    EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 128, 1024, 1024).path, GemmPath::kDirect);
    EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 129, 1024, 1024).path,
              avx512 ? GemmPath::kDirect : GemmPath::kPacked);
    if (!avx512) {
      // The whole N in one block up to 16 rows (1032 = 43 tiles of 24 columns), 22 tiles above.
      EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 16, 1024, 1024).nc, 1032);
      EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 17, 1024, 1024).nc, 528);
      EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 17, 100, 1024).nc, 120);
      EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 17, 20, 100).nc, 24);
      EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 6, 1000, 1024).nc, 1008);
    }
    EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 512, 1024, 1024).path,
              avx512 ? GemmPath::kDirect : GemmPath::kPacked);
    EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 1024, 256, 1024).path,
              avx512 ? GemmPath::kDirect : GemmPath::kPacked);
    EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 1025, 1024, 1024).path, GemmPath::kPacked);
    const GemmBlocking b = chooseGemmBlocking(isa, DType::kF32, 2048, 1024, 1024);
    EXPECT_EQ(b.path, GemmPath::kPacked);
    EXPECT_EQ(b.mc % mr, 0);
    EXPECT_EQ(b.nc % nr, 0);
    EXPECT_EQ(b.kc, 256);
    // k = 300: two even blocks rather than 256 + 44.
    EXPECT_EQ(chooseGemmBlocking(isa, DType::kF32, 100, 100, 300).kc, 150);
  }
}

// MatMul's thread split (splitMatMul): rows per task unless whole 64-column blocks share the
// work more evenly, for the blocking each ISA's compile chooses. Exact values, from the shapes
// alone (no CPU or core count involved).
MatMulParams splitFor(Isa isa, DType dtype, int64_t batch, int64_t m, int64_t k, int64_t n,
                      int tasks, int* used) {
  MatMulParams p;
  p.batch = batch;
  p.m = m;
  p.k = k;
  p.n = n;
  p.isa = isa;
  p.gemm = chooseGemmBlocking(isa, dtype, m, n, k);
  *used = splitMatMul(p, tasks);
  return p;
}

TEST(IsaGemm, TheSplitSharesWorkEvenlyByRowsOrColumns) {
  int used = 0;
  // AVX-512's direct path, M = 64 in 6-row tiles: rows would be 36 + 28, columns are 512 + 512.
  MatMulParams p = splitFor(Isa::kAvx512, DType::kF32, 1, 64, 1024, 1024, 2, &used);
  EXPECT_EQ(p.gemm.path, GemmPath::kDirect);
  EXPECT_EQ(p.colsPerTask, 512);
  EXPECT_EQ(p.rowsPerTask, 0);
  EXPECT_EQ(used, 2);
  // The packed path at M = 2048, N = 1024: 1032 + 1016 rows (AVX-512's 12-row tiles) against
  // 512 + 512 columns.
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    p = splitFor(isa, DType::kF32, 1, 2048, 1024, 1024, 2, &used);
    EXPECT_EQ(p.gemm.path, GemmPath::kPacked);
    EXPECT_EQ(p.colsPerTask, 512);
    EXPECT_EQ(p.rowsPerTask, 0);
  }
  // Even either way: rows (a row task reads its own rows of A and C whole).
  p = splitFor(Isa::kAvx512, DType::kF32, 1, 512, 512, 512, 2, &used);
  EXPECT_EQ(p.rowsPerTask, 256);
  EXPECT_EQ(p.colsPerTask, 0);
  // Rows share more evenly: 96 + 96 rows against 128 + 32 columns.
  p = splitFor(Isa::kAvx512, DType::kF32, 1, 192, 256, 160, 2, &used);
  EXPECT_EQ(p.rowsPerTask, 96);
  EXPECT_EQ(p.colsPerTask, 0);
  // Three tasks over 1000 x 256: 336 rows (56 of the direct path's 6-row tiles) are 0.336 of
  // M, 128 columns 0.5.
  p = splitFor(Isa::kAvx512, DType::kF32, 1, 1000, 64, 256, 3, &used);
  EXPECT_EQ(p.rowsPerTask, 336);
  EXPECT_EQ(used, 3);
  // Small M keeps its column split; whole batches need none; integers (Eigen) never split
  // columns; one task, no split.
  // On the direct path in whole tiles: 8 rows run 8 x 48 tiles, so 528 + 496 columns.
  p = splitFor(Isa::kAvx512, DType::kF32, 1, 8, 1024, 1024, 2, &used);
  EXPECT_EQ(p.colsPerTask, 528);
  // AVX2's direct path splits columns at any of its M (a row task would read all of B), in pairs
  // of its 24-column tiles (whole cache lines): 528 + 496 at M = 8, 64 and 128.
  for (int64_t m : {8, 64, 128}) {
    p = splitFor(Isa::kAvx2, DType::kF32, 1, m, 1024, 1024, 2, &used);
    EXPECT_EQ(p.gemm.path, GemmPath::kDirect);
    EXPECT_EQ(p.colsPerTask, 528);
    EXPECT_EQ(p.rowsPerTask, 0);
    EXPECT_EQ(used, 2);
  }
  p = splitFor(Isa::kAvx512, DType::kF32, 4, 1024, 1024, 1024, 2, &used);
  EXPECT_EQ(p.colsPerTask + p.rowsPerTask, 0);
  EXPECT_EQ(used, 2);
  p = splitFor(Isa::kAvx512, DType::kI64, 1, 1024, 64, 1024, 2, &used);
  EXPECT_EQ(p.colsPerTask, 0);
  EXPECT_EQ(p.rowsPerTask, 512);
  p = splitFor(Isa::kAvx512, DType::kF32, 1, 1024, 1024, 1024, 1, &used);
  EXPECT_EQ(p.colsPerTask + p.rowsPerTask, 0);
  EXPECT_EQ(used, 1);
}

// ---- specs compiled for another ISA -----------------------------------------------------------

KernelKey matmulKey(int64_t m, int64_t k, int64_t n) {
  return makeKernelKey(OpKind::kMatMul, {{DType::kF32, Shape{m, k}}, {DType::kF32, Shape{k, n}}},
                       Attrs{});
}

TEST(IsaSpecs, MatMulSpecRecordsTheIsaAndPath) {
  for (Isa isa : availableIsas()) {
    ScopedIsaOverride forced(isa);
    for (int64_t m : {1, 8, 64, 200}) {
      const auto spec = compileKernelSpec(matmulKey(m, 96, 80));
      const auto& p = std::get<MatMulParams>(spec->params);
      EXPECT_EQ(p.isa, isa);
      EXPECT_EQ(p.gemm, chooseGemmBlocking(isa, DType::kF32, m, 80, 96));
      const nlohmann::ordered_json j = kernelDescriptorJson(*spec, "t");
      EXPECT_EQ(j["kernel"]["params"]["isa"], std::string(isaName(isa)));
      EXPECT_EQ(j["kernel"]["params"]["gemm_path"], std::string(gemmPathName(p.gemm.path)));
    }
  }
}

// A spec built for an ISA this CPU may not have (or a lower one than it runs) still computes the
// right product: the GEMM never runs above activeIsa().
TEST(IsaSpecs, SpecForAnyIsaRunsCorrectlyHere) {
  const int64_t m = 37, k = 53, n = 70;
  const Tensor a = randomTensor(DType::kF32, {m, k}, 1), b = randomTensor(DType::kF32, {k, n}, 2);
  Tensor expected(DType::kF32, {m, n});
  kernels::ref::matmul(a.view(), b.view(), expected.view());
  const auto compiled = compileKernelSpec(matmulKey(m, k, n));
  for (Isa isa : {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512}) {
    for (GemmPath path : {GemmPath::kPacked, GemmPath::kSkinny, GemmPath::kDirect}) {
      SCOPED_TRACE(fmt::format("{} {}", isaName(isa), gemmPathName(path)));
      KernelSpec spec = *compiled;
      auto& p = std::get<MatMulParams>(spec.params);
      p.isa = isa;
      p.gemm = chooseGemmBlocking(isa, DType::kF32, m, n, k);
      if (isa != Isa::kBaseline) p.gemm.path = path;
      Tensor got(DType::kF32, {m, n});
      const void* ins[] = {a.data(), b.data()};
      kernels::run(spec, ins, got.data());
      double worst = 0;
      for (int64_t i = 0; i < m * n; ++i)
        worst = std::max(
            worst, std::fabs(static_cast<double>(got.as<float>()[i]) - expected.as<float>()[i]));
      EXPECT_LE(worst, 1e-4);
    }
  }
}

// A kernel file written where another ISA ran (an AVX-512 machine, or GEARBOX_ISA) is a cache
// entry for that machine: loading it gives the spec compiled here, never the file's.
TEST(IsaSpecs, KernelFileForAnotherIsaIsRecompiledOnLoad) {
  const Isa here = activeIsa();
  const Isa other = here == Isa::kAvx2 ? Isa::kAvx512 : Isa::kAvx2;
  const KernelKey key = matmulKey(96, 64, 80);
  KernelSpec foreign = *compileKernelSpec(key);
  auto& p = std::get<MatMulParams>(foreign.params);
  p.isa = other;
  p.gemm = chooseGemmBlocking(other, DType::kF32, 96, 80, 64);
  const std::string text = serializeKernelDescriptor(foreign, "t");
  const KernelDescriptor d = parseKernelDescriptor(text);
  EXPECT_TRUE(d.recompiledForIsa);
  EXPECT_EQ(std::get<MatMulParams>(d.spec->params).isa, here);
  EXPECT_EQ(kernelDescriptorBody(*d.spec, ""), kernelDescriptorBody(*compileKernelSpec(key), ""));

  // Through a kernel_meta directory: counted apart from loads and from damaged files.
  testing_util::TempDir dir;
  {
    std::FILE* f = std::fopen((dir.path() / kernelFileName(key)).c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
  KernelMetaStore store(dir.path().string());
  const auto loaded = store.load(key);
  ASSERT_NE(loaded, nullptr);
  EXPECT_EQ(std::get<MatMulParams>(loaded->params).isa, here);
  EXPECT_EQ(store.stats().otherIsa, 1);
  EXPECT_EQ(store.stats().loads, 0);
  EXPECT_EQ(store.stats().corrupt, 0);

  // The same file with any other field forged is still damage, ISA or not.
  nlohmann::ordered_json j = kernelDescriptorJson(foreign, "t");
  j["kernel"]["params"]["m"] = 95;
  j.erase("hash");
  j["hash"] = fnv1a64Hex(j.dump());
  EXPECT_THROW(parseKernelDescriptor(j.dump()), Error);
}

// ---- no AVX outside the ISA regions -----------------------------------------------------------

// Disassembles the executor library: every function holding a VEX or EVEX instruction (an
// AT&T mnemonic starting with 'v') must belong to an isa_avx2 / isa_avx512 namespace, and those
// namespaces must hold AVX code. This is what keeps the default build running on a baseline
// x86-64 CPU (isa_target.h).
TEST(IsaDisassembly, OnlyIsaNamespacesHoldVexInstructions) {
#if defined(GEARBOX_NATIVE_BUILD) || !defined(__x86_64__)
  GTEST_SKIP() << "-march=native build: everything may use the build machine's ISA";
#else
  if (std::system("objdump --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no objdump";
  const auto r =
      runPipe("objdump -d --no-show-raw-insn -C " + shellQuote(GEARBOX_EXECUTOR_LIBRARY) +
              " | awk '/^[0-9a-f]+ <.*>:$/ {fn = $0; next} "
              "$2 ~ /^v[a-z0-9]+$/ {print fn}' | sort -u");
  ASSERT_EQ(r.exitCode, 0);
  std::istringstream lines(r.output);
  int isaFunctions = 0;
  std::set<std::string> offenders;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("isa_avx2::") != std::string::npos ||
        line.find("isa_avx512::") != std::string::npos) {
      ++isaFunctions;
    } else {
      offenders.insert(line);
    }
  }
  EXPECT_GT(isaFunctions, 10);
  for (const std::string& f : offenders)
    ADD_FAILURE() << "VEX instruction outside an ISA region: " << f;
#endif
}

// ---- conv2d's Winograd path (ConvParams::winograd, executor/kernels/winograd.cpp) ----------

// The Winograd path as a whole-tensor function: the weight transformed as a plan packs it, run on
// kTasks threads.
template <int kTasks>
bool winogradWhole(const ConvParams& p, const float* x, const float* w, const float* b, float lo,
                   float hi, float* out) {
  ConvParams wp = p;
  wp.winograd = 1;
  std::vector<float> packed(static_cast<size_t>(convPackedWeightFloats(wp)));
  packConvWeights(wp, w, packed.data());
  return kernels::runConvWinograd(wp, kTasks, x, packed.data(), b, lo, hi, out, nullptr);
}

// 3 x 3, stride 1, padded by 1: planes of odd and even sizes (a last tile row and column half
// outside the output), rows of 1, 16 and 17 tiles (a second 16-tile column of one tile), blocks
// of tiles that start and end inside a tile row (many channels: small blocks), channel counts
// off the 16-channel parts, 2 images, bias and clamps.
std::vector<ConvGeom> winogradGeoms() {
  return {
      {"wg_1x1_plane", {1, 5, 1, 1}, {3, 5, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {"wg_odd", {2, 17, 5, 7}, {19, 17, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {"wg_row_of_17_tiles",
       {1, 16, 3, 34},
       {32, 16, 3, 3},
       {1, 1},
       {1, 1, 1, 1},
       {1, 1},
       1,
       false,
       0.0f},
      {"wg_33x33_clamped",
       {1, 24, 33, 33},
       {40, 24, 3, 3},
       {1, 1},
       {1, 1, 1, 1},
       {1, 1},
       1,
       true,
       -0.25f,
       0.5f},
      {"wg_blocks_split_rows",
       {2, 300, 10, 30},
       {70, 300, 3, 3},
       {1, 1},
       {1, 1, 1, 1},
       {1, 1},
       1,
       true},
      {"wg_resnet_l3", {1, 256, 14, 14}, {256, 256, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      // Blocks of 64 and 48 tiles at M = 128: the GEMMs in 6 x 4 tiles and in 8 x 3 tiles
      // (winogradGemmTile), where M alone would pick 8 x 3 for both.
      {"wg_resnet_l2", {1, 128, 28, 28}, {128, 128, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
  };
}

// Below AVX-512 the path refuses to run (nothing written): the compile step never picks it there
// (TheCompileStepChoosesWinograd... below), and a plan that bound its pack fails the call.
bool winogradRefusesBelowAvx512() {
  const ConvGeom g = winogradGeoms()[1];
  ConvParams p = compiledConv(g);
  p.winograd = 1;
  std::vector<float> x(static_cast<size_t>(g.x.numel()), 1.0f), u(16 * 19 * 17, 1.0f);
  std::vector<float> out(static_cast<size_t>(2 * 19 * 5 * 7), -7.0f);
  const bool ran = kernels::runConvWinograd(p, 1, x.data(), u.data(), nullptr, -1e30f, 1e30f,
                                            out.data(), nullptr);
  return !ran && std::all_of(out.begin(), out.end(), [](float v) { return v == -7.0f; });
}

TEST(IsaConv, WinogradPathMatchesThePlainLoop) {
  if (detectedIsa() < Isa::kAvx512) {
    EXPECT_TRUE(winogradRefusesBelowAvx512());
    return;
  }
  ScopedIsaOverride forced(Isa::kAvx512);
  {
    ScopedIsaOverride avx2(Isa::kAvx2);  // the same process limited to AVX2
    EXPECT_TRUE(winogradRefusesBelowAvx512());
  }
  for (const ConvGeom& g : winogradGeoms()) {
    const ConvParams p = compiledConv(g);
    checkConv(g, p, "1 task", nullptr, nullptr, winogradWhole<1>);
    checkConv(g, p, "2 tasks", nullptr, nullptr, winogradWhole<2>);
    checkConv(g, p, "5 tasks", nullptr, nullptr, winogradWhole<5>);
  }
}

// A residual (fuse-conv-residual): the unclamped sums plus the residual, then Clip's comparisons,
// bit for bit; a NaN stays NaN through the clamp.
TEST(IsaConv, WinogradAddsAResidualBeforeTheClamp) {
  if (detectedIsa() < Isa::kAvx512) {
    EXPECT_TRUE(winogradRefusesBelowAvx512());
    return;
  }
  ScopedIsaOverride forced(Isa::kAvx512);
  constexpr float kInfF = std::numeric_limits<float>::infinity();
  constexpr float kNaNF = std::numeric_limits<float>::quiet_NaN();
  for (const ConvGeom& g : winogradGeoms()) {
    SCOPED_TRACE(g.name);
    ConvParams p = compiledConv(g);
    p.winograd = 1;
    const Tensor x = randomTensor(DType::kF32, g.x, 51);
    const Tensor w = randomTensor(DType::kF32, g.w, 52);
    const Tensor b = randomTensor(DType::kF32, Shape{g.w[0]}, 53);
    const int64_t size = p.n * p.m * p.oh * p.ow;
    Tensor r = randomTensor(DType::kF32, Shape{size}, 54);
    r.as<float>()[size / 2] = kNaNF;
    std::vector<float> packed(static_cast<size_t>(convPackedWeightFloats(p)));
    packConvWeights(p, w.as<float>(), packed.data());
    std::vector<float> sums(static_cast<size_t>(size)), got(static_cast<size_t>(size), kNaNF);
    ASSERT_TRUE(kernels::runConvWinograd(p, 2, x.as<float>(), packed.data(), b.as<float>(), -kInfF,
                                         kInfF, sums.data(), nullptr));
    ASSERT_TRUE(kernels::runConvWinograd(p, 2, x.as<float>(), packed.data(), b.as<float>(), -0.5f,
                                         0.75f, got.data(), r.as<float>()));
    for (int64_t i = 0; i < size; ++i) {
      const float v = sums[static_cast<size_t>(i)] + r.as<float>()[i], y = v < -0.5f ? -0.5f : v;
      const float want = y > 0.75f ? 0.75f : y;
      ASSERT_EQ(std::memcmp(&want, &got[static_cast<size_t>(i)], 4), 0)
          << "at " << i << ": " << got[static_cast<size_t>(i)] << " want " << want;
    }
  }
}

// The transformed weight: U = G g G^T of each 3 x 3 kernel, 16 [m, c] matrices.
TEST(IsaConv, WinogradWeightsAreGgGt) {
  ConvParams p;
  p.m = 2;
  p.c = 3;
  p.cg = 3;
  p.kh = p.kw = 3;
  p.winograd = 1;
  ASSERT_EQ(convPackedWeightFloats(p), 16 * 2 * 3);
  std::vector<float> w(2 * 3 * 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) - 2.5f;
  std::vector<float> u(96);
  packConvWeights(p, w.data(), u.data());
  const double gm[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  for (int oc = 0; oc < 2; ++oc)
    for (int ic = 0; ic < 3; ++ic)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          double want = 0;
          for (int a = 0; a < 3; ++a)
            for (int c = 0; c < 3; ++c)
              want += gm[i][a] * w[static_cast<size_t>((oc * 3 + ic) * 9 + a * 3 + c)] * gm[j][c];
          EXPECT_EQ(u[static_cast<size_t>(((4 * i + j) * 2 + oc) * 3 + ic)],
                    static_cast<float>(want))
              << oc << " " << ic << " " << i << " " << j;
        }
}

// Where the compile step takes the Winograd path: ResNet's 3 x 3 stride-1 layers on AVX-512;
// not a stride 2, a dilation, a padding of 0 or 2, groups, fewer than 16 channels or 32 tiles.
TEST(IsaConv, TheCompileStepChoosesWinogradForPaddedStride1Convs3x3) {
  const int64_t on = activeIsa() == Isa::kAvx512 ? 1 : 0;
  const ConvGeom l1{"l1", {1, 64, 56, 56}, {64, 64, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  const ConvGeom s2{"s2", {1, 64, 56, 56}, {128, 64, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1};
  const ConvGeom dil{"dil", {1, 64, 28, 28}, {64, 64, 3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1};
  const ConvGeom valid{"valid", {1, 64, 28, 28}, {64, 64, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1};
  const ConvGeom narrow{"narrow", {1, 8, 28, 28}, {64, 8, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  const ConvGeom grouped{"g2", {1, 64, 14, 14}, {64, 32, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2};
  const ConvGeom l3{"l3", {1, 256, 14, 14}, {256, 256, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  const ConvGeom l4{"l4", {1, 512, 7, 7}, {512, 512, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  const ConvGeom edge{"edge", {1, 64, 15, 16}, {64, 64, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  const ConvGeom under{"under", {1, 64, 14, 16}, {64, 64, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  EXPECT_EQ(compiledConv(l1).winograd, on);
  EXPECT_EQ(compiledConv(edge).winograd, on);  // 8 x 8 = 64 tiles
  EXPECT_EQ(compiledConv(under).winograd, 0);  // 7 x 8 = 56
  EXPECT_EQ(compiledConv(l3).winograd, 0);     // 49 tiles
  EXPECT_EQ(compiledConv(l4).winograd, 0);     // 16 tiles: one vector
  EXPECT_EQ(compiledConv(s2).winograd, 0);
  EXPECT_EQ(compiledConv(dil).winograd, 0);
  EXPECT_EQ(compiledConv(valid).winograd, 0);
  EXPECT_EQ(compiledConv(narrow).winograd, 0);
  EXPECT_EQ(compiledConv(grouped).winograd, 0);
}

}  // namespace
}  // namespace gearbox
