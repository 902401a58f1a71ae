// Conv2d: reference and optimized kernels. The optimized kernel runs the path the compile step
// chose (compiler/ops/conv2d.cpp): im2col gathered straight into the GEMM micro-kernel's panels
// (executor/simd/conv_body.inc; on the baseline ISA, into a per-thread buffer + Eigen's GEMM),
// the same without the gather for 1x1 convolutions, or a direct loop for depthwise ones. On AVX2
// a 3 x 3 stride-2 conv over at most 4 input channels (an RGB stem) reads the micro-kernel's B
// rows from a parity-split copy of its input rows instead of gathered panels (convS2x3Item).
// Items with few positions split their output channels between tasks; their B is then gathered
// once into a buffer the tasks share (runSharedPack).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <new>
#include <optional>
#include <vector>

#include "compiler/cpu_isa.h"
#include "executor/kernels/common.h"
#include "executor/kernels/gemm.h"
#include "executor/kernels/op_kernels.h"
#include "executor/kernels/ref_common.h"

namespace gearbox::kernels {
namespace {

// The fused activation (attributes act_min, act_max), as Clip computes it: two comparisons, so
// NaN stays NaN, and [0, inf] is exactly Relu.
float clampAct(float x, float lo, float hi) {
  const float y = x < lo ? lo : x;
  return y > hi ? hi : y;
}

// A clamp bound; attributes built by hand (tests, the reference's callers) may leave the slot
// unset, which means its default: no bound.
float actBound(const Attrs& attrs, int slot, float unset) {
  return attrs.has(slot) ? static_cast<float>(attrs.f(slot)) : unset;
}
constexpr float kInfF = std::numeric_limits<float>::infinity();

// The im2col block of one item: rows are (channel, ki, kj) taps of group g, columns the output
// positions [p0, p1); a tap that falls in the padding reads 0.
void gatherCols(const ConvParams& p, const float* x, int64_t p0, int64_t p1, float* cols) {
  const int64_t cols_n = p1 - p0;
  for (int64_t ci = 0; ci < p.cg; ++ci) {
    const float* plane = x + ci * p.h * p.w;
    for (int64_t ki = 0; ki < p.kh; ++ki) {
      for (int64_t kj = 0; kj < p.kw; ++kj) {
        float* row = cols + ((ci * p.kh + ki) * p.kw + kj) * cols_n;
        int64_t oy = p0 / p.ow, ox = p0 % p.ow;
        for (int64_t q = 0; q < cols_n; ++q) {
          const int64_t iy = oy * p.sh - p.pt + ki * p.dh;
          const int64_t ix = ox * p.sw - p.pl + kj * p.dw;
          row[q] = (iy >= 0 && iy < p.h && ix >= 0 && ix < p.w) ? plane[iy * p.w + ix] : 0.0f;
          if (++ox == p.ow) {
            ox = 0;
            ++oy;
          }
        }
      }
    }
  }
}

// A growing per-thread buffer: the static run path allocates only on a thread's first large
// convolution.
float* colBuffer(size_t floats) {
  thread_local std::vector<float> buf;
  if (buf.size() < floats) buf.resize(floats);
  return buf.data();
}

// The calling thread's buffer for the B the tasks of a two-phase run share (runSharedPack),
// grown and never shrunk. oneTBB may hand a thread that waits on its tasks another task, which
// may run a convolution of its own: that nested run gets a buffer of its own, allocated for it.
class SharedPackLease {
 public:
  explicit SharedPackLease(size_t floats) {
    thread_local Slot slot;
    Slot* use = slot.busy ? &own_ : &slot;
    if (use->cap < floats) {
      std::free(use->ptr);
      use->ptr = nullptr;
      use->cap = 0;
      const size_t bytes = (std::max<size_t>(floats, 16) * sizeof(float) + 63) / 64 * 64;
      use->ptr = static_cast<float*>(std::aligned_alloc(64, bytes));
      if (!use->ptr) throw std::bad_alloc();
      use->cap = bytes / sizeof(float);
    }
    if (use == &slot) {
      slot.busy = true;
      held_ = &slot;
    }
    ptr_ = use->ptr;
  }
  ~SharedPackLease() {
    if (held_) held_->busy = false;
  }
  SharedPackLease(const SharedPackLease&) = delete;
  SharedPackLease& operator=(const SharedPackLease&) = delete;
  float* get() const { return ptr_; }

 private:
  struct Slot {
    float* ptr = nullptr;
    size_t cap = 0;
    bool busy = false;
    ~Slot() { std::free(ptr); }
  };
  Slot own_;
  Slot* held_ = nullptr;
  float* ptr_ = nullptr;
};

// At most this much packed B at once in a two-phase run (8 MiB): more items than fit run in
// turns, each turn two fork-joins.
constexpr int64_t kMaxSharedPackFloats = int64_t{1} << 21;

// Items whose output channels are split between tasks (ConvParams::mSplit > 1: few positions,
// deep layers at batch 1): each item's B is gathered once, its K slices split between the
// tasks, into one buffer; then the tasks compute their channel blocks from it. False when the
// ISA has no such path (the baseline).
bool runSharedPack(const ConvParams& p, int tasks, const float* x, const float* w, const float* b,
                   float lo, float hi, float* out) {
  const int64_t positions = p.oh * p.ow, depth = p.cg * p.kh * p.kw;
  const int64_t blocks = (positions + p.colBlock - 1) / p.colBlock;
  const int64_t kc = p.kc < 1 ? depth : p.kc, slices = (depth + kc - 1) / kc;
  const int64_t itemFloats = convPackedFloatsF32(p, 0, std::min(positions, p.colBlock));
  if (itemFloats <= 0) return false;
  const int64_t outer = p.n * p.group * blocks;
  const int64_t chunk = std::clamp<int64_t>(kMaxSharedPackFloats / itemFloats, 1, outer);
  SharedPackLease lease(static_cast<size_t>(chunk * itemFloats));
  float* packed = lease.get();
  // Outer item o: (image, group, position block).
  struct Where {
    int64_t g, img, p0, p1;
  };
  auto where = [&](int64_t o) {
    const int64_t blk = o % blocks, ng = o / blocks;
    const int64_t p0 = blk * p.colBlock;
    return Where{ng % p.group, ng / p.group, p0, std::min(positions, p0 + p.colBlock)};
  };
  for (int64_t o0 = 0; o0 < outer; o0 += chunk) {
    const int64_t o1 = std::min(outer, o0 + chunk);
    detail::runItems(tasks, (o1 - o0) * slices, [&](int64_t u) {
      const int64_t o = o0 + u / slices, s = u % slices;
      const Where at = where(o);
      const float* xg = x + (at.img * p.c + at.g * p.cg) * p.h * p.w;
      convPackF32(p, xg, s, s + 1, at.p0, at.p1, packed + (o - o0) * itemFloats);
    });
    detail::runItems(tasks, (o1 - o0) * p.mSplit, [&](int64_t u) {
      const int64_t o = o0 + u / p.mSplit, mi = u % p.mSplit;
      const Where at = where(o);
      float* og = out + (at.img * p.m + at.g * p.mg) * positions;
      convFromPackedF32(p, packed + (o - o0) * itemFloats, w + at.g * p.mg * depth,
                        b ? b + at.g * p.mg : nullptr, lo, hi, og, p.channelBound(mi),
                        p.channelBound(mi + 1), at.p0, at.p1);
    });
  }
  return true;
}

void runGemmPath(const ConvParams& p, int tasks, const float* x, const float* w, const float* b,
                 float lo, float hi, float* out) {
  const int64_t positions = p.oh * p.ow, depth = p.cg * p.kh * p.kw;
  const int64_t blocks = (positions + p.colBlock - 1) / p.colBlock;
  const bool pointwise = p.path == ConvParams::Path::kPointwise;
  // A 1x1 item read in place packs nothing, so its channel blocks just run as items.
  if (p.mSplit > 1 && tasks > 1 && !(pointwise && convPointwiseInPlaceF32()) &&
      runSharedPack(p, tasks, x, w, b, lo, hi, out))
    return;
  // Items in (image, group, channel block, position block) order. runItems gives each task a
  // contiguous range of them, so at batch 1 the tasks split the channel blocks, each reading
  // only its own blocks' weight rows.
  const int64_t items = p.n * p.group * p.mSplit * blocks;
  detail::runItems(tasks, items, [&](int64_t item) {
    const int64_t blk = item % blocks, mi = item / blocks % p.mSplit;
    const int64_t ng = item / blocks / p.mSplit, g = ng % p.group, img = ng / p.group;
    const int64_t p0 = blk * p.colBlock, p1 = std::min(positions, p0 + p.colBlock);
    const int64_t m0 = p.channelBound(mi), m1 = p.channelBound(mi + 1);
    const float* xg = x + (img * p.c + g * p.cg) * p.h * p.w;
    float* og = out + (img * p.m + g * p.mg) * positions;
    const float* wg = w + g * p.mg * depth;
    const float* bg = b ? b + g * p.mg : nullptr;
    if (convGemmItemF32(p, xg, wg, bg, lo, hi, og, m0, m1, p0, p1)) return;
    // The baseline ISA: the im2col block into a per-thread buffer, then Eigen's GEMM.
    float* oi = og + m0 * positions + p0;
    const float* wi = wg + m0 * depth;
    if (pointwise) {
      gemmF32(wi, depth, xg + p0, p.h * p.w, oi, positions, m1 - m0, p1 - p0, depth);
    } else {
      float* cols = colBuffer(static_cast<size_t>(depth * (p1 - p0)));
      gatherCols(p, xg, p0, p1, cols);
      gemmF32(wi, depth, cols, p1 - p0, oi, positions, m1 - m0, p1 - p0, depth);
    }
    for (int64_t j = m0; j < m1; ++j) {
      float* row = og + j * positions;
      const float bj = bg ? bg[j] : 0.0f;
      for (int64_t q = p0; q < p1; ++q) row[q] = clampAct(row[q] + bj, lo, hi);
    }
  });
}

// A 1x1 conv writing channel blocks on AVX2 (ConvParams::outBlocked without the channel-tile
// path: the plan's expanding 1x1 before a channel-block depthwise conv), wp the plan's packed
// weight: items of (image, run of 16-channel blocks, block of positions), the compile's colBlock
// and mSplit (a run of whole blocks: its tiles are 16 channels wide). False below AVX2.
bool runPointwiseToBlocks(const ConvParams& p, int tasks, const float* x, const float* wp,
                          const float* b, float lo, float hi, float* out) {
  if (activeIsa() < Isa::kAvx2) return false;
  const int64_t positions = p.oh * p.ow, panels = p.m / 16;
  const int64_t colBlock = std::max<int64_t>(p.colBlock, 1);
  const int64_t blocks = (positions + colBlock - 1) / colBlock;
  const int64_t split = std::clamp<int64_t>(p.mSplit, 1, std::max<int64_t>(panels, 1));
  detail::runItems(tasks, p.n * split * blocks, [&](int64_t item) {
    const int64_t blk = item % blocks, mi = item / blocks % split, img = item / blocks / split;
    const int64_t p0 = blk * colBlock, p1 = std::min(positions, p0 + colBlock);
    const int64_t j0 = panels * mi / split, j1 = panels * (mi + 1) / split;
    if (j1 > j0)
      convItemToBlocksF32(p, x + img * p.c * positions, wp, b, lo, hi, out + img * p.m * positions,
                          j0, j1, p0, p1);
  });
  return true;
}

// A 1x1 conv reading channel blocks on AVX2 (ConvParams::inBlocked without the channel-tile path:
// the plan's projecting 1x1 after a channel-block depthwise conv), writing planes, wp the plan's
// packed weight, r the residual or null: items of (image, run of the weight's 64-channel tiles,
// block of positions), the compile's mSplit and colBlock (rounded to whole 4-position tiles).
// False below AVX2.
bool runPointwiseFromBlocks(const ConvParams& p, int tasks, const float* x, const float* wp,
                            const float* b, float lo, float hi, const float* r, float* out) {
  if (activeIsa() < Isa::kAvx2) return false;
  const int64_t positions = p.oh * p.ow;
  const int64_t tiles = (p.m + kConvTileChannels - 1) / kConvTileChannels;
  const int64_t colBlock = (std::max<int64_t>(p.colBlock, 1) + 3) / 4 * 4;
  const int64_t blocks = (positions + colBlock - 1) / colBlock;
  const int64_t split = std::clamp<int64_t>(p.mSplit, 1, tiles);
  const size_t plane = static_cast<size_t>(p.m * positions);
  detail::runItems(tasks, p.n * split * blocks, [&](int64_t item) {
    const int64_t blk = item % blocks, mi = item / blocks % split, img = item / blocks / split;
    const int64_t p0 = blk * colBlock, p1 = std::min(positions, p0 + colBlock);
    const int64_t c0 = std::min(p.m, tiles * mi / split * kConvTileChannels);
    const int64_t c1 = std::min(p.m, tiles * (mi + 1) / split * kConvTileChannels);
    if (c1 > c0)
      convItemFromBlocksF32(p, x + img * p.c * positions, wp, b, lo, hi, out + img * plane,
                            r ? r + img * plane : nullptr, c0, c1, p0, p1);
  });
  return true;
}

// One output plane of the baseline ISA's depthwise loop.
void runDepthwisePlane(const ConvParams& p, const float* x, const float* w, const float* b,
                       float lo, float hi, float* out, int64_t item) {
  const int64_t oc = item % p.m, img = item / p.m;
  const int64_t g = oc / p.mg;
  const float* plane = x + (img * p.c + g) * p.h * p.w;
  const float* k = w + oc * p.kh * p.kw;
  float* o = out + item * p.oh * p.ow;
  const float bias = b ? b[oc] : 0.0f;
  // Output columns whose whole window row lies inside the input: [x0, x1).
  int64_t x0 = 0;
  while (x0 < p.ow && x0 * p.sw - p.pl < 0) ++x0;
  int64_t x1 = p.ow;
  while (x1 > x0 && (x1 - 1) * p.sw - p.pl + (p.kw - 1) * p.dw >= p.w) --x1;
  for (int64_t oy = 0; oy < p.oh; ++oy) {
    float* orow = o + oy * p.ow;
    for (int64_t ox = 0; ox < p.ow; ++ox) orow[ox] = bias;
    for (int64_t ki = 0; ki < p.kh; ++ki) {
      const int64_t iy = oy * p.sh - p.pt + ki * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      const float* irow = plane + iy * p.w;
      for (int64_t kj = 0; kj < p.kw; ++kj) {
        const float kv = k[ki * p.kw + kj];
        const int64_t off = kj * p.dw - p.pl;
        for (int64_t ox = 0; ox < x0; ++ox) {
          const int64_t ix = ox * p.sw + off;
          if (ix >= 0 && ix < p.w) orow[ox] += kv * irow[ix];
        }
        if (p.sw == 1) {
          const float* src = irow + x0 + off;
          for (int64_t ox = x0; ox < x1; ++ox) orow[ox] += kv * src[ox - x0];
        } else {
          for (int64_t ox = x0; ox < x1; ++ox) orow[ox] += kv * irow[ox * p.sw + off];
        }
        for (int64_t ox = std::max(x0, x1); ox < p.ow; ++ox) {
          const int64_t ix = ox * p.sw + off;
          if (ix >= 0 && ix < p.w) orow[ox] += kv * irow[ix];
        }
      }
    }
    for (int64_t ox = 0; ox < p.ow; ++ox) orow[ox] = clampAct(orow[ox], lo, hi);
  }
}

// Depthwise: in channel blocks where the compile step chose them (ConvParams::channelBlocks: a
// 3 x 3 window, on AVX-512 and AVX2), else each output plane (image, output channel) reads one
// input plane: on AVX2 and AVX-512, conv_body.inc's vector loop over groups of planes
// (depthwiseGroup), else runDepthwisePlane's above: interior output columns need no bounds
// checks, the border ones do.
void runDepthwise(const ConvParams& p, int tasks, const float* x, const float* w, const float* b,
                  float lo, float hi, float* out) {
  if (p.channelBlocks && activeIsa() >= Isa::kAvx2) {
    // Items of (image, 16 channels, band of output rows); bands only where the channel blocks
    // are too few to keep every task busy: eight items per task even out the last ones (9
    // blocks, MobileNetV2's 144 channels, ran as 5 + 4 on two tasks; as 2 bands, 9 + 9). A band
    // transposes its window's 1-2 extra input rows once more. The items are of equal cost, so
    // each task takes one range of them: taken one by one from a shared counter (runItems as it
    // was then), its cache line crossed between the cores at every item (the 7 x 7 layer of 960
    // channels, 60 items of 0.2 us: 11.5-18 us on two threads against 11.4 on one; ranges:
    // 7.4-8.3).
    const int64_t blocks = p.n * ((p.m + 15) / 16);
    const int64_t bands =
        tasks > 1 ? std::clamp<int64_t>((8 * tasks + blocks - 1) / blocks, 1, p.oh) : 1;
    detail::runRanges(tasks, blocks * bands, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t item = i0; item < i1; ++item) {
        const int64_t band = item % bands, block = item / bands;
        const int64_t img = block / ((p.m + 15) / 16), oc0 = block % ((p.m + 15) / 16) * 16;
        const int64_t oy0 = band * p.oh / bands, oy1 = (band + 1) * p.oh / bands;
        if (oy1 > oy0)
          convChannelBlockItemF32(p, x, w, b, lo, hi, out, img, oc0,
                                  std::min<int64_t>(16, p.m - oc0), oy0, oy1);
      }
    });
    return;
  }
  const int64_t planes = p.n * p.m, group = depthwiseGroup(p);
  detail::runItems(tasks, (planes + group - 1) / group, [&](int64_t chunk) {
    const int64_t first = chunk * group, last = std::min(planes, first + group);
    if (convDepthwiseItemsF32(p, x, w, b, lo, hi, out, first, last)) return;
    for (int64_t item = first; item < last; ++item)
      runDepthwisePlane(p, x, w, b, lo, hi, out, item);
  });
}

// out[i] = clamp(out[i] + r[i]) over n floats, in ranges of 16 Ki floats across the tasks.
void addResidual(int64_t n, int tasks, const float* r, float lo, float hi, float* out) {
  detail::runRanges(tasks, n, 16 * 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = clampAct(out[i] + r[i], lo, hi);
  });
}

}  // namespace

bool runConvChannelTiles(const ConvParams& p, int tasks, const float* x, const float* wp,
                         const float* b, float lo, float hi, float* out, bool avx512LogicOnAvx2,
                         const float* residual) {
  auto item = avx512LogicOnAvx2 ? convChannelTileItemF32Avx512LogicOnAvx2 : convChannelTileItemF32;
  const int64_t depth = p.c * p.kh * p.kw, positions = p.oh * p.ow;
  if (p.n <= 0 || positions <= 0 || p.m <= 0) return true;
  // The padded coordinates the taps read: rows [0, rows) and columns [0, cols), the input at
  // [pt, pt + h) x [pl, pl + w). Unpadded convs (ResNet's 1x1 downsamples) read x in place.
  const int64_t rows = (p.oh - 1) * p.sh + (p.kh - 1) * p.dh + 1;
  const int64_t cols = (p.ow - 1) * p.sw + (p.kw - 1) * p.dw + 1;
  const bool inPlace = p.readsInputInPlace();
  // An input in channel blocks (ConvParams::inBlocked) is read in place only: the plan blocks
  // the input of no conv that pads.
  if ((p.inBlocked && (!inPlace || p.c % 16 != 0)) || (p.outBlocked && p.m % 16 != 0) ||
      (residual && p.outBlocked))
    return false;
  // A padded 3 x 3 conv whose every tap on the padding is skipped by the tiles themselves reads
  // its input in place too: the row tap sets (below) skip the padding rows, and CUT tiles
  // (channel_tile_body.inc) the one padding column a row's first or last position reaches,
  // where every tile is a whole 7 x 4 or 14 x 2 tile on AVX-512 itself (the variants built
  // with CUT: rows a multiple of 7 wide, 64-channel tiles; or a last tile of 32 channels, whose
  // rows run 14 x 2 tiles only, a multiple of 14 wide). So does every 3 x 3 of ResNet-18
  // (widths 56, 28, 14, 7; 64-512 channels): the padded copy and its fork-join were 1.7% of its
  // time at batch 32 on one thread. And MobileNetV2's stem (3 -> 32 channels, 224 -> 112): its
  // copy of the 3 input planes took 178 -> 141 us on one thread, 113 -> 76 on two
  // (kernels_bench, as in the plan; Xeon, interleaved minima).
  const bool padInPlace =
      !inPlace && !avx512LogicOnAvx2 && !p.inBlocked && activeIsa() == Isa::kAvx512 && p.kh == 3 &&
      p.kw == 3 && p.dh == 1 && p.dw == 1 && (p.sw == 1 || p.sw == 2) && p.pt <= 1 &&
      rows - p.pt - p.h <= 1 && p.pl <= 1 && cols - p.pl - p.w <= 1 && p.ow % kConvTileRows == 0 &&
      (p.m % kConvTileChannels == 0 ||
       (p.m % kConvTileChannels == 32 && p.ow % (2 * kConvTileRows) == 0));
  const bool direct = inPlace || padInPlace;  // no padded copy
  const int64_t ph = direct ? p.h : rows, pw = direct ? p.w : cols, plane = ph * pw;
  // Read in place with padding, a tap's offset is from the output position's window corner
  // in padded coordinates to its input value: (ki * dh - pt) rows and (kj * dw - pl) columns
  // away, negative for the taps the tiles skip at the top and left.
  const int64_t shift = padInPlace ? p.pt * pw + p.pl : 0;
  // These tables are rebuilt on every call, on the caller before the tasks start. Pushed back
  // tap by tap with a select per tap, ResNet-18's 512 x 512 x 3 x 3 layer (4,608 taps, 3 sets)
  // spent 1.5% of its two-thread profile building them; written through pointers into vectors
  // sized once, 0.4%.
  thread_local std::vector<int32_t> koff;
  koff.resize(static_cast<size_t>(depth));
  {
    const int64_t window = p.kh * p.kw, scale = p.inBlocked ? 16 : 1;
    int32_t* ko = koff.data();
    for (int64_t ki = 0; ki < p.kh; ++ki)
      for (int64_t kj = 0; kj < p.kw; ++kj)
        ko[ki * p.kw + kj] = static_cast<int32_t>((ki * p.dh * pw + kj * p.dw - shift) * scale);
    for (int64_t ci = 1; ci < p.c; ++ci) {
      const auto base =
          static_cast<int32_t>(p.inBlocked ? ci / 16 * plane * 16 + ci % 16 : ci * plane);
      int32_t* row = ko + ci * window;
      for (int64_t k = 0; k < window; ++k) row[k] = ko[k] + base;
    }
  }
  // Tap sets (ConvTapSets): set 0 is every tap. An output row whose window reaches into the
  // zero rows of a padded copy runs only the taps on input rows (ki in [kiLo, kiHi)), as
  // oneDNN's and MLAS's direct convs skip them: a 3 x 3 conv padded by 1 on a 7 x 7 plane
  // (ResNet-18's last stage) spends 2/21 of its FMAs on those rows. Columns are not skipped: a tile
  // spans 7 positions of a row, of which only the first and last reach into the padding.
  thread_local std::vector<int32_t> taps, setBegin, rowSet;
  taps.clear();
  setBegin.assign(1, 0);
  rowSet.assign(static_cast<size_t>(p.oh), 0);
  std::vector<std::pair<int64_t, int64_t>> setRows;  // each set's [kiLo, kiHi)
  auto set = [&](int64_t kiLo, int64_t kiHi) -> int32_t {
    const auto known = std::find(setRows.begin(), setRows.end(), std::pair{kiLo, kiHi});
    if (known != setRows.end()) return static_cast<int32_t>(known - setRows.begin());
    // Set 0 is correct for every row (the zero rows add nothing): past a bound on the table (a
    // huge window padded by much, a set per row) rows run it.
    const int64_t total = static_cast<int64_t>(taps.size()) / 2 + p.c * (kiHi - kiLo) * p.kw;
    if (!setRows.empty() && total > std::min<int64_t>(4 * depth, INT32_MAX)) return 0;
    setRows.emplace_back(kiLo, kiHi);
    const size_t from = taps.size();
    taps.resize(static_cast<size_t>(2 * total));
    int32_t* t = taps.data() + from;
    const int32_t* ko = koff.data();
    const int64_t span = (kiHi - kiLo) * p.kw;  // a channel's taps in this set: consecutive k
    for (int64_t ci = 0; ci < p.c; ++ci) {
      const int64_t k0 = (ci * p.kh + kiLo) * p.kw;
      for (int64_t j = 0; j < span; ++j) {
        t[2 * j] = ko[k0 + j];
        t[2 * j + 1] = static_cast<int32_t>(k0 + j);
      }
      t += 2 * span;
    }
    setBegin.push_back(static_cast<int32_t>(taps.size() / 2));
    return static_cast<int32_t>(setRows.size() - 1);
  };
  set(0, p.kh);
  // Padded rows [pt, pt + h) hold the input; tap ki of output row oy reads row oy * sh + ki * dh.
  for (int64_t oy = 0; oy < p.oh && !inPlace; ++oy) {
    const int64_t top = oy * p.sh;
    const int64_t kiHi =
        top >= p.pt + p.h ? 0 : std::min(p.kh, (p.pt + p.h - top + p.dh - 1) / p.dh);
    const int64_t kiLo = top >= p.pt ? 0 : std::min(kiHi, (p.pt - top + p.dh - 1) / p.dh);
    rowSet[static_cast<size_t>(oy)] = set(kiLo, kiHi);
  }
  // By pointer: inside the tasks' lambda, the thread_locals would name each worker's own.
  const ConvTapSets sets{taps.data(), setBegin.data(), rowSet.data()};
  const int64_t tiles = ((p.m + 15) / 16 * 16 + kConvTileChannels - 1) / kConvTileChannels;
  // Images run in batches, one fork-join per batch (and one more for its padded copies): all
  // of them when x is read in place, else as many as kMaxSharedPackFloats of copies hold.
  // Forking per image cost MobileNetV2 at batch 32 a fork-join per 14 x 14 layer and image.
  const int64_t perImage = direct ? 0 : p.c * plane;
  int64_t batch =
      direct ? p.n
             : std::clamp<int64_t>(kMaxSharedPackFloats / std::max<int64_t>(perImage, 1), 1, p.n);
  // A batch of whole images per task: ResNet-18's 56 x 56 layers fit 9 images, one item each
  // with one channel tile, which two tasks ran as 5 + 4.
  if (batch < p.n && batch > tasks && tasks > 1) batch = batch / tasks * tasks;
  std::optional<SharedPackLease> lease;
  if (!direct) lease.emplace(static_cast<size_t>(batch * perImage));
  for (int64_t i0 = 0; i0 < p.n; i0 += batch) {
    const int64_t imgs = std::min(batch, p.n - i0);
    const float* xb = x + i0 * p.c * p.h * p.w;
    const float* src = xb;
    int64_t imageStride = p.c * p.h * p.w;
    if (!direct) {
      float* padded = lease->get();
      // Only the border is zeroed: filling the whole plane and then copying the input over it
      // wrote most of it twice (memset was 3% of ResNet-18 at batch 1 on two threads).
      // The copy's rows [top, top + y1) and columns [left, left + n) hold the input (a window
      // need not reach the input's last rows and columns: stride leftovers).
      const int64_t top = std::min(p.pt, ph), left = std::min(p.pl, pw);
      const int64_t y1 = std::clamp<int64_t>(ph - p.pt, 0, p.h);
      const int64_t n = std::clamp<int64_t>(pw - p.pl, 0, p.w);
      // Contiguous ranges of planes, one per task: planes of equal cost, and ResNet-18's 9 x 9
      // padded planes (324 bytes) handed out one at a time shared cache lines between the
      // threads and took an atomic per plane (the copy's share of ResNet-18 at batch 1 went
      // from 1.7% on one thread to 5.3% on two).
      detail::runRanges(tasks, imgs * p.c, 1, [&](int64_t u0, int64_t u1) {
        for (int64_t u = u0; u < u1; ++u) {
          float* dst = padded + u * plane;
          const float* in = xb + u * p.h * p.w;
          std::fill(dst, dst + top * pw, 0.0f);
          for (int64_t y = 0; y < y1; ++y) {
            float* row = dst + (top + y) * pw;
            std::fill(row, row + left, 0.0f);
            std::copy(in + y * p.w, in + y * p.w + n, row + left);
            std::fill(row + left + n, row + pw, 0.0f);
          }
          std::fill(dst + (top + y1) * pw, dst + plane, 0.0f);
        }
      });
      src = padded;
      imageStride = perImage;
    }
    // Row blocks: enough items for every task (four per task evens out the last ones).
    // Items in (image, tile, row block) order: runItems gives each task a contiguous range, so
    // at batch 1 the tasks split the tiles and each reads only its own tiles' weights
    // (ResNet-18's 14 x 14 stage, 4 tiles in 2 row blocks: half of its 2.4 MB each, not all).
    int64_t rowBlocks =
        tasks > 1 ? std::clamp<int64_t>((4 * tasks + imgs * tiles - 1) / (imgs * tiles), 1, p.oh)
                  : 1;
    // And a whole number of items per task: MobileNetV2's 32 -> 192 expansion on 28 x 28 planes
    // in blocks (3 channel tiles, 3 row blocks) ran its 9 items as 5 + 4 on two threads, or 4 +
    // 4 and a ninth stolen at the end. 12 items (kernels_bench, two threads, two rounds of five
    // repetitions interleaved): 35.3-36.8 -> 29.9-31.4 us; the 24 -> 144 one on 56 x 56 planes
    // (tiles of 64, 64 and 16 channels) 78.8-81.4 -> 69.7-74.3. Measured on two threads; with
    // more it may add up to tasks - 1 row blocks: smaller items, the same work.
    while (tasks > 1 && imgs * tiles * rowBlocks % tasks != 0 && rowBlocks < p.oh) ++rowBlocks;
    // Where the last tile is narrower than the others and the weight is smaller than an image's
    // input (MobileNetV2's 1x1s of 144 and 96 channels on 56 x 56 and 14 x 14 planes), items go
    // in (image, row block, tile) order instead: each task then takes every tile of its rows,
    // so the narrow tile costs every task alike. In tile order, the 24 -> 144 expansion's 12
    // items (tiles of 64, 64 and 16 channels) ran as 6 x 64 channels on one task and 2 x 64 +
    // 4 x 16 on the other: 61.0-61.3 -> 58.3-59.2 us on two threads (Xeon). With tiles of equal
    // width, tile order stays: ResNet-18's 64 -> 128 stride-2 shortcut ran 8% slower in row
    // order (35.9-37.2 -> 39.1-40.2 us).
    const bool rowOrder = tiles > 1 && p.m % kConvTileChannels != 0 && p.m * depth < p.c * plane;
    std::atomic<bool> ran{true};
    detail::runItems(tasks, imgs * rowBlocks * tiles, [&](int64_t u) {
      const int64_t blk = rowOrder ? u / tiles % rowBlocks : u % rowBlocks;
      const int64_t tile = rowOrder ? u % tiles : u / rowBlocks % tiles;
      const int64_t img = u / rowBlocks / tiles;
      const int64_t oy0 = blk * p.oh / rowBlocks, oy1 = (blk + 1) * p.oh / rowBlocks;
      const int64_t at = (i0 + img) * p.m * positions;
      if (!item(p, src + img * imageStride, pw, sets, wp, b, lo, hi, out + at,
                residual ? residual + at : nullptr, tile, oy0, oy1))
        ran.store(false, std::memory_order_relaxed);
    });
    if (!ran.load()) return false;
  }
  return true;
}

void ref::refConv2d(const Attrs& attrs, std::span<const TensorView> ins, const TensorView& out) {
  namespace a = attr::Conv2d;
  const Shape& xs = ins[0].shape;
  const Shape& ws = ins[1].shape;
  const auto s = attrs.ints(a::strides), d = attrs.ints(a::dilations), pad = attrs.ints(a::pads);
  const int64_t group = attrs.i(a::group);
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3];
  const int64_t m = ws[0], cg = c / group, mg = m / group, kh = ws[2], kw = ws[3];
  const int64_t oh = out.shape[2], ow = out.shape[3];
  const float* x = ins[0].as<const float>();
  const float* wt = ins[1].as<const float>();
  const float* b = ins.size() >= 3 ? ins[2].as<const float>() : nullptr;
  const float* r = ins.size() == 4 ? ins[3].as<const float>() : nullptr;
  const float lo = actBound(attrs, a::act_min, -kInfF), hi = actBound(attrs, a::act_max, kInfF);
  float* o = out.as<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t oc = 0; oc < m; ++oc) {
      const int64_t g = oc / mg;
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t z = 0; z < ow; ++z) {
          // Accumulate in double: the oracle should not share float rounding with the GEMM.
          double acc = b ? b[oc] : 0.0;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ki = 0; ki < kh; ++ki)
              for (int64_t kj = 0; kj < kw; ++kj) {
                const int64_t iy = y * s[0] - pad[0] + ki * d[0];
                const int64_t ix = z * s[1] - pad[1] + kj * d[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                acc += static_cast<double>(x[((i * c + g * cg + ci) * h + iy) * w + ix]) *
                       wt[((oc * cg + ci) * kh + ki) * kw + kj];
              }
          // The residual is added in float to the float sum, as the kernels' epilogues do.
          const int64_t at = ((i * m + oc) * oh + y) * ow + z;
          float v = static_cast<float>(acc);
          if (r) v += r[at];
          o[at] = clampAct(v, lo, hi);
        }
    }
}

bool runConv2d(const KernelSpec& spec, const void* const* in, void* out) {
  const auto* p = std::get_if<ConvParams>(&spec.params);
  if (!p) return false;
  const float* x = static_cast<const float*>(in[0]);
  const float* w = static_cast<const float*>(in[1]);
  const float* b = p->bias ? static_cast<const float*>(in[2]) : nullptr;
  float* o = static_cast<float*>(out);
  float lo = actBound(spec.key.attrs, attr::Conv2d::act_min, -kInfF),
        hi = actBound(spec.key.attrs, attr::Conv2d::act_max, kInfF);
  // A residual (fuse-conv-residual) is added before the clamp: the channel-tile path adds it
  // in each tile's store; the others write the unclamped sums and one pass adds it and clamps
  // (a pass over the output, the same bytes the Add read, without its launch).
  const float* r = spec.key.inputs.size() == 4 ? static_cast<const float*>(in[3]) : nullptr;
  const float clampLo = lo, clampHi = hi;
  if (r) {
    if (p->outBlocked)
      fail(ErrorKind::kShape, "kernel {}: a residual needs an output in planes", spec.name);
    lo = -kInfF;
    hi = kInfF;
  }
  if ((p->inBlocked || p->outBlocked || p->weightsPacked) && p->channelBlocks &&
      activeIsa() < Isa::kAvx2)
    fail(ErrorKind::kShape, "kernel {}: channel-block depthwise needs the AVX2 or AVX-512 paths",
         spec.name);
  if ((p->inBlocked || p->outBlocked) && !p->weightsPacked && !p->channelBlocks)
    fail(ErrorKind::kShape, "kernel {}: channel-block layouts need the plan's packed weight",
         spec.name);
  if (p->weightsPacked && p->channelBlocks) {
    runDepthwise(*p, spec.tasks, x, w, b, lo, hi, o);  // w: the plan's 16-channel tap vectors
  } else if (p->weightsPacked && p->winograd) {
    // The plan packed the weight as Winograd's components; inputs and outputs in planes.
    if (p->inBlocked || p->outBlocked ||
        !runConvWinograd(*p, spec.tasks, x, w, b, clampLo, clampHi, o, r))
      fail(ErrorKind::kShape, "kernel {}: Winograd weights need the AVX-512 Winograd path",
           spec.name);
    return true;
  } else if (p->weightsPacked && p->outBlocked && !p->channelTiles) {
    // AVX2's 1x1 into channel blocks (the plan allows no other conv there: compiler.cpp's
    // blockSide).
    if (p->inBlocked || p->path != ConvParams::Path::kPointwise || p->group != 1 ||
        p->m % 16 != 0 || !runPointwiseToBlocks(*p, spec.tasks, x, w, b, lo, hi, o))
      fail(ErrorKind::kShape, "kernel {}: a 1x1 conv into channel blocks needs the AVX2 paths",
           spec.name);
    return true;
  } else if (p->weightsPacked && p->inBlocked && !p->channelTiles) {
    // AVX2's 1x1 from channel blocks, into planes (compiler.cpp's blockSide); it adds the
    // residual itself, before its clamp.
    if (p->outBlocked || p->path != ConvParams::Path::kPointwise || p->group != 1 ||
        p->c % 16 != 0 || p->m % 8 != 0 ||
        !runPointwiseFromBlocks(*p, spec.tasks, x, w, b, clampLo, clampHi, r, o))
      fail(ErrorKind::kShape, "kernel {}: a 1x1 conv from channel blocks needs the AVX2 paths",
           spec.name);
    return true;
  } else if (p->weightsPacked) {
    // The plan bound the weight packed for this path (compiler/weight_pack.h) and chose it for
    // the ISA this process runs, so it cannot fall back: the im2col path cannot read a pack.
    // Its tiles add a residual themselves, before their clamp.
    if (!runConvChannelTiles(*p, spec.tasks, x, w, b, clampLo, clampHi, o, false, r))
      fail(ErrorKind::kShape, "kernel {}: packed weights need the AVX-512 channel-tile path",
           spec.name);
    return true;
  } else if (p->path == ConvParams::Path::kDepthwise) {
    runDepthwise(*p, spec.tasks, x, w, b, lo, hi, o);
  } else {
    runGemmPath(*p, spec.tasks, x, w, b, lo, hi, o);
  }
  if (r) addResidual(p->n * p->m * p->oh * p->ow, spec.tasks, r, clampLo, clampHi, o);
  return true;
}

}  // namespace gearbox::kernels
