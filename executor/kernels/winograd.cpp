// Conv2d's Winograd path (ConvParams::winograd): 3 x 3 convolutions of stride 1 padded by 1 as
// Lavin and Gray's F(2 x 2, 3 x 3) ("Fast Algorithms for Convolutional Neural Networks", 2015),
// the algorithm cuDNN, oneDNN (its AVX-512 wino_4x3) and NNPACK offer for these layers. Each 2 x 2
// block of outputs (a "tile") is A^T [(G g G^T) . (B^T d B)] A over its 4 x 4 input window d:
// 16 products per tile and channel pair instead of 36, 2.25x fewer multiply-adds, for a
// transform of the input and of the outputs around them. The 16 products of a tile are 16
// independent GEMMs over the channels, M[xi] = U[xi] V[xi] (xi: the 4 x 4 component), which run on
// the MatMul kernel's tiles (gemm.h); U = G g G^T is the weight, transformed once by the plan
// (compiler/weight_pack.cpp).
//
// Layout (vectors over tiles): a block of a few hundred tiles of one image (in row-major tile
// order) is transformed into V[xi][c][t], multiplied into M[xi][k][t], and transformed back, 16
// tiles of a tile row per vector: a tile row's input windows are its input rows read 2 columns
// apart, split into even and odd columns by one permute per vector, and its outputs are two
// output rows, rebuilt by interleaving. So both transforms read and write NCHW planes directly.
//
// Numerics: B and A hold 0 and +-1, G halves: the result differs from the direct sum by a few
// ulps of the inputs' magnitude (the reference tests' tolerance for conv holds with margin).
#include <algorithm>
#include <cstdint>

#include "compiler/cpu_isa.h"
#include "executor/kernels/common.h"
#include "executor/kernels/gemm.h"
#include "executor/kernels/gemm_isa.h"
#include "executor/simd/isa_target.h"

#if !defined(__clang__)
// GCC 12 on _mm512_setzero_ps and the masked loads' pass-through operand (avx512fintrin.h).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace gearbox::kernels {
namespace {

// A block's V and M (16 (c + m) floats per tile) stay within this, so that its 16 GEMMs read
// them from L2. Measured on ResNet-18's 3 x 3 layers (a 2 MiB-L2 Xeon, one and two threads):
// 256 KiB was 10-40% slower than 1 MiB (more, shorter GEMMs), 512 KiB and 2 MiB each slower on
// one of the three layers.
constexpr int64_t kWinogradBlockBytes = int64_t{1} << 20;

// The direct path's tile for a block's GEMMs, M = kn output channels by N = ts tiles (whole
// vectors), by a count of cycles per step of k: an r x v tile issues r * v FMAs (two a cycle),
// r broadcasts, v loads and v prefetches (two a cycle), and runs no faster than one FMA latency
// (4 cycles); rows past the whole tiles go in tiles of 4, 2 and 1, columns past them in one
// narrower tile (directSlice, directRows). gemmDirectTile(m), MatMul's choice, looks at M
// alone: ResNet-18's 28 x 28 layers (M = 128, blocks of 64 tiles) took 8 x 3 and ran a quarter
// of their columns in 8 x 1 tiles, 22% of the layer's one-thread profile, where 6 x 4 covers 64
// columns whole.
[[maybe_unused]] GemmDirectTile winogradGemmTile(int64_t m, int64_t n) {
  auto tile = [](int64_t r, int64_t v) {
    return std::max({static_cast<double>(r * v) / 2.0, static_cast<double>(r + 2 * v) / 2.0, 4.0});
  };
  auto cycles = [&](GemmDirectTile t) {
    const int64_t vectors = (n + 15) / 16, whole = vectors / t.vectors, rest = vectors % t.vectors;
    auto rows = [&](int64_t r) {
      return static_cast<double>(whole) * tile(r, t.vectors) + (rest > 0 ? tile(r, rest) : 0.0);
    };
    double sum = static_cast<double>(m / t.rows) * rows(t.rows);
    int64_t left = m % t.rows;
    for (; left >= 4; left -= 4) sum += rows(4);
    if (left >= 2) {
      sum += rows(2);
      left -= 2;
    }
    if (left > 0) sum += rows(1);
    return sum;
  };
  const GemmDirectTile wide{6, 4}, tall{8, 3};
  return cycles(tall) < cycles(wide) ? tall : wide;
}

}  // namespace

#if GEARBOX_HAVE_ISA_REGIONS

GEARBOX_ISA_BEGIN_AVX512
namespace isa_avx512 {
namespace {

// Lanes [lo, hi) of a 16-lane vector, clamped to [0, 16].
__mmask16 laneMask(int64_t lo, int64_t hi) {
  lo = std::max<int64_t>(lo, 0);
  hi = std::min<int64_t>(hi, 16);
  if (hi <= lo) return 0;
  return static_cast<__mmask16>(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

struct Geometry {
  int64_t c, h, w, m, oh, ow, tw;  // tw: tiles per tile row
};

// V[xi][c][t - t0] for the tiles [t0, t1) of one image (x: its planes), channels [0, c); row
// stride ts. Channel by channel, and down each 16-tile column of tile rows: a plane's rows are
// then read in order (the prefetchers' streams; a tile row's 4 input rows across 64 channels
// were 57 KB, past L1, and the loads waited on L2), and the 2 rows a tile row shares with the
// next are loaded and split into even and odd columns once.
void inputTransform(const Geometry& g, const float* x, int64_t t0, int64_t t1, float* v,
                    int64_t ts) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const int64_t plane = g.h * g.w, step = g.c * ts;  // step: between components xi, xi + 1
  const int64_t ty0 = t0 / g.tw, ty1 = (t1 - 1) / g.tw + 1;
  for (int64_t ci = 0; ci < g.c; ++ci) {
    const float* pl = x + ci * plane;
    for (int64_t tx0 = 0; tx0 < g.tw; tx0 += 16) {
      const int64_t col = 2 * tx0 - 1;  // input column of lane 0's window
      // The four loads' lanes inside the row [0, w) (the rest is the padding, read as zeros):
      // the same for every row, so computed once here rather than per load.
      const __mmask16 ma = laneMask(-col, g.w - col), mb = laneMask(-col - 16, g.w - col - 16);
      const __mmask16 mc = laneMask(-col - 2, g.w - col - 2);
      const __mmask16 me = laneMask(-col - 18, g.w - col - 18);
      // One input row as the 4 window columns of 16 tiles: j = 0..3 at columns col + 2 l + j.
      auto split = [&](int64_t iy, __m512* d) {
        if (iy < 0 || iy >= g.h) {
          for (int j = 0; j < 4; ++j) d[j] = _mm512_setzero_ps();
          return;
        }
        const float* row = pl + iy * g.w + col;
        const __m512 a = _mm512_maskz_loadu_ps(ma, row), b = _mm512_maskz_loadu_ps(mb, row + 16);
        const __m512 c = _mm512_maskz_loadu_ps(mc, row + 2);
        const __m512 e = _mm512_maskz_loadu_ps(me, row + 18);
        d[0] = _mm512_permutex2var_ps(a, even, b);
        d[1] = _mm512_permutex2var_ps(a, odd, b);
        d[2] = _mm512_permutex2var_ps(c, even, e);
        d[3] = _mm512_permutex2var_ps(c, odd, e);
      };
      __m512 d[4][4];
      split(2 * ty0 - 1, d[0]);
      split(2 * ty0, d[1]);
      for (int64_t ty = ty0; ty < ty1; ++ty) {
        if (ty > ty0)
          for (int j = 0; j < 4; ++j) {
            d[0][j] = d[2][j];
            d[1][j] = d[3][j];
          }
        split(2 * ty + 1, d[2]);
        split(2 * ty + 2, d[3]);
        // This tile row's tiles in the block, as lanes of this column.
        const int64_t lo = std::max<int64_t>(t0 - ty * g.tw, 0);
        const int64_t hi = std::min<int64_t>(t1 - ty * g.tw, g.tw);
        const __mmask16 store = laneMask(lo - tx0, hi - tx0);
        if (!store) continue;
        // B^T d: rows.
        __m512 t[4][4];
        for (int j = 0; j < 4; ++j) {
          t[0][j] = _mm512_sub_ps(d[0][j], d[2][j]);
          t[1][j] = _mm512_add_ps(d[1][j], d[2][j]);
          t[2][j] = _mm512_sub_ps(d[2][j], d[1][j]);
          t[3][j] = _mm512_sub_ps(d[1][j], d[3][j]);
        }
        // (B^T d) B: columns; component xi = 4 i + j at V[xi][ci].
        float* vt = v + ci * ts + (ty * g.tw + tx0 - t0);
        for (int i = 0; i < 4; ++i) {
          float* o = vt + 4 * i * step;
          _mm512_mask_storeu_ps(o, store, _mm512_sub_ps(t[i][0], t[i][2]));
          _mm512_mask_storeu_ps(o + step, store, _mm512_add_ps(t[i][1], t[i][2]));
          _mm512_mask_storeu_ps(o + 2 * step, store, _mm512_sub_ps(t[i][2], t[i][1]));
          _mm512_mask_storeu_ps(o + 3 * step, store, _mm512_sub_ps(t[i][1], t[i][3]));
        }
      }
    }
  }
}

// The outputs of channels [k0, k1) at the tiles [t0, t1) of one image (out, res: its planes)
// from M[xi][k - k0][t - t0] (row stride ts; component stride (k1 - k0) * ts): A^T M A, plus the
// bias, plus the residual, clamped.
void outputTransform(const Geometry& g, const float* mb, int64_t ts, int64_t k0, int64_t k1,
                     int64_t t0, int64_t t1, const float* bias, const float* res, float lo,
                     float hi, bool clamp, float* out) {
  const __m512i ilo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i ihi =
      _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const int64_t plane = g.oh * g.ow, xs = (k1 - k0) * ts;
  for (int64_t k = k0; k < k1; ++k) {
    const __m512 bk = _mm512_set1_ps(bias ? bias[k] : 0.0f);
    for (int64_t ty = t0 / g.tw; ty * g.tw < t1; ++ty) {
      const int64_t lo_t = std::max<int64_t>(t0 - ty * g.tw, 0);
      const int64_t hi_t = std::min<int64_t>(t1 - ty * g.tw, g.tw);
      for (int64_t tx0 = lo_t; tx0 < hi_t; tx0 += 16) {
        const __mmask16 lanes = laneMask(0, hi_t - tx0);
        const float* m = mb + (k - k0) * ts + (ty * g.tw + tx0 - t0);
        __m512 s0[4], s1[4];
        for (int j = 0; j < 4; ++j) {
          const __m512 m0 = _mm512_maskz_loadu_ps(lanes, m + j * xs);
          const __m512 m1 = _mm512_maskz_loadu_ps(lanes, m + (4 + j) * xs);
          const __m512 m2 = _mm512_maskz_loadu_ps(lanes, m + (8 + j) * xs);
          const __m512 m3 = _mm512_maskz_loadu_ps(lanes, m + (12 + j) * xs);
          s0[j] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
          s1[j] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
        }
        __m512 y[2][2];
        for (int i = 0; i < 2; ++i) {
          const __m512* s = i == 0 ? s0 : s1;
          y[i][0] = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s[0], s[1]), s[2]), bk);
          y[i][1] = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(s[1], s[2]), s[3]), bk);
        }
        const int64_t ox = 2 * tx0;
        for (int i = 0; i < 2; ++i) {
          const int64_t oy = 2 * ty + i;
          if (oy >= g.oh) break;
          float* orow = out + k * plane + oy * g.ow + ox;
          const float* rrow = res ? res + k * plane + oy * g.ow + ox : nullptr;
          __m512 half[2] = {_mm512_permutex2var_ps(y[i][0], ilo, y[i][1]),
                            _mm512_permutex2var_ps(y[i][0], ihi, y[i][1])};
          for (int hh = 0; hh < 2; ++hh) {
            const __mmask16 sm = laneMask(0, std::min(g.ow, 2 * hi_t) - ox - 16 * hh);
            if (!sm) break;
            __m512 r = half[hh];
            if (rrow) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(sm, rrow + 16 * hh));
            // max(lo, r) then min(hi, r): NaN stays NaN, as Clip does.
            if (clamp) r = _mm512_min_ps(vhi, _mm512_max_ps(vlo, r));
            _mm512_mask_storeu_ps(orow + 16 * hh, sm, r);
          }
        }
      }
    }
  }
}

}  // namespace

void winogradItem(const ConvParams& p, const float* x, const float* u, const float* bias, float lo,
                  float hi, const float* res, float* out, int64_t t0, int64_t t1, int64_t k0,
                  int64_t k1) {
  const Geometry g{p.c, p.h, p.w, p.m, p.oh, p.ow, (p.ow + 1) / 2};
  const int64_t tiles = t1 - t0, ts = (tiles + 15) / 16 * 16, kn = k1 - k0;
  float* v = gemmBuffer(4, static_cast<size_t>(16 * g.c * ts));
  float* mb = gemmBuffer(5, static_cast<size_t>(16 * kn * ts));
  inputTransform(g, x, t0, t1, v, ts);
  // The GEMMs run over whole 16-column vectors, the columns past the block's tiles zero: a
  // ragged rest (49 tiles: ResNet's 14 x 14 layers) ran on the GEMM's edge tiles and its copy
  // of the rest's columns, 80% of that layer's time.
  if (ts > tiles)
    for (int64_t r = 0; r < 16 * g.c; ++r) std::fill(v + r * ts + tiles, v + (r + 1) * ts, 0.0f);
  const GemmBlocking bl = chooseGemmBlocking(Isa::kAvx512, DType::kF32, kn, ts, g.c);
  const GemmDirectTile tile = winogradGemmTile(kn, ts);
  for (int xi = 0; xi < 16; ++xi) {
    const float* ux = u + (xi * g.m + k0) * g.c;
    if (bl.path == GemmPath::kDirect) {
      on_avx512::gemmDirectInTile(bl, tile, ux, g.c, v + xi * g.c * ts, ts, mb + xi * kn * ts, ts,
                                  kn, ts, g.c, nullptr);
    } else {
      gemmF32(Isa::kAvx512, bl, ux, g.c, v + xi * g.c * ts, ts, mb + xi * kn * ts, ts, kn, ts, g.c);
    }
  }
  outputTransform(g, mb, ts, k0, k1, t0, t1, bias, res, lo, hi, clampsAnything(lo, hi), out);
}

}  // namespace isa_avx512
GEARBOX_ISA_END

#endif  // GEARBOX_HAVE_ISA_REGIONS

bool runConvWinograd(const ConvParams& p, int tasks, const float* x, const float* u, const float* b,
                     float lo, float hi, float* out, const float* residual) {
#if GEARBOX_HAVE_ISA_REGIONS
  if (activeIsa() != Isa::kAvx512) return false;
  const int64_t tiles = (p.oh + 1) / 2 * ((p.ow + 1) / 2);
  if (p.n <= 0 || tiles <= 0 || p.m <= 0) return true;
  // Blocks of tiles: V and M of a block (16 (c + m) floats per tile) within kWinogradBlockBytes,
  // so that the GEMMs read them from L2.
  const int64_t perTile = 16 * (p.c + p.m) * static_cast<int64_t>(sizeof(float));
  const int64_t cap = std::max<int64_t>(kWinogradBlockBytes / perTile / 16 * 16, 16);
  // Fewer images than tasks (batch 1): each image's tiles in one range per task, so the tasks
  // get equal shares (ResNet-18's 28 x 28 layer, 196 tiles in blocks of 64, 64, 64 and 4, ran
  // as 128 tiles on one task and 68 on the other). Each range in blocks of whole 16-tile
  // vectors (the GEMMs' columns), its last block shorter.
  const int64_t ranges = p.n < tasks ? std::min<int64_t>(tasks, tiles) : 1;
  const int64_t longest = (tiles + ranges - 1) / ranges;
  const int64_t perRange = (longest + cap - 1) / cap;
  // Output-channel parts where the blocks are too few for the tasks (several images, fewer
  // than two blocks per task): each part transforms the block's input again. Not where the
  // ranges already give every task its own equal share (fewer images than tasks: a range per
  // task in each image): there a task ran its range's parts one after the other, so it
  // transformed the same input once per part and gained nothing (ResNet-18's 14 x 14 layer on
  // two threads, kernels_bench: 576-603 us in two parts, 524-546 in one, oneDNN 507-557 in the
  // same runs; the task reads all of the layer's transformed weights either way).
  const int64_t outer = p.n * ranges * perRange;
  const bool ownShares = ranges == tasks;
  const int64_t parts =
      tasks > 1 && outer < 2 * tasks && !ownShares
          ? std::clamp<int64_t>((2 * tasks + outer - 1) / outer, 1, std::max<int64_t>(p.m / 16, 1))
          : 1;
  const int64_t planeIn = p.c * p.h * p.w, planeOut = p.m * p.oh * p.ow;
  detail::runItems(tasks, outer * parts, [&](int64_t item) {
    const int64_t part = item % parts, blk = item / parts % perRange;
    const int64_t range = item / parts / perRange % ranges, img = item / parts / perRange / ranges;
    const int64_t r0 = range * tiles / ranges, r1 = (range + 1) * tiles / ranges;
    const int64_t span = ((r1 - r0 + perRange - 1) / perRange + 15) / 16 * 16;
    const int64_t t0 = r0 + blk * span, t1 = std::min(r1, t0 + span);
    const int64_t k0 = part * p.m / parts / 16 * 16;
    const int64_t k1 = part + 1 == parts ? p.m : (part + 1) * p.m / parts / 16 * 16;
    if (t1 <= t0 || k1 <= k0) return;
    isa_avx512::winogradItem(p, x + img * planeIn, u, b, lo, hi,
                             residual ? residual + img * planeOut : nullptr, out + img * planeOut,
                             t0, t1, k0, k1);
  });
  return true;
#else
  (void)p, (void)tasks, (void)x, (void)u, (void)b, (void)lo, (void)hi, (void)out, (void)residual;
  return false;
#endif
}

}  // namespace gearbox::kernels
