#pragma once
// The f32 GEMM the MatMul kernel runs (executor/kernels/gemm.cpp), for other kernels that reduce
// to one too: conv2d's im2col and 1x1 paths, which also have their own driver on its
// micro-kernel, and the per-ISA depthwise and max-pool walks beside it. Internal to the
// executor library.

#include <cstdint>

#include "compiler/kernel_spec.h"

namespace gearbox::kernels {

// Whether a fused clamp [lo, hi] can change a value (the unfused graph's Clip/Relu bounds).
inline bool clampsAnything(float lo, float hi) {
  return lo > -__builtin_inff() || hi < __builtin_inff();
}

// What MatMul does to C after the product (the fuse-matmul-epilogue pass, docs/passes.md):
// C[i, j] = clamp(C[i, j] + bias[j] + res[i * ldr + j]), each term optional (null: none; no
// clamp: none), in that order, so the result is bit for bit the unfused add, add, clip. Pointers
// are at the bias and residual of this GEMM's C[0, 0]. The GEMM paths apply it to each block of
// C right after its last K slice, while the block is still in L1 or L2.
struct GemmEpilogue {
  const float* bias = nullptr;
  const float* res = nullptr;
  int64_t ldr = 0;
  bool clamp = false;
  float lo = 0.0f, hi = 0.0f;
};

// C[m, n] = A[m, k] B[k, n], row-major with leading dims lda, ldb, ldc (in elements), on the
// path and blocking the compile step chose for `isa` (MatMulParams), then the epilogue `e` when
// not null. Runs in the calling thread with its per-thread packing buffers. An `isa` above
// activeIsa() runs on activeIsa() with the blocking chosen for it, so any spec runs correctly on
// any CPU.
void gemmF32(Isa isa, const GemmBlocking& blocking, const float* a, int64_t lda, const float* b,
             int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n, int64_t k,
             const GemmEpilogue* e = nullptr);

// The same on the direct path over B packed in strips `width` (48 or 64) columns wide
// (compiler/weight_pack.h, packMatMulB; b at the strip holding this GEMM's column 0): a static
// plan's constant B (MatMulParams::bPacked). The tile is the width's (8 x 48 or 6 x 64); kc and
// nc from `blocking`. With avx512LogicOnAvx2 (tests), the same logic on AVX2 registers. False
// (nothing run) for another width, or for the AVX2 logic on a CPU without AVX2.
bool gemmF32StripsB(const GemmBlocking& blocking, int64_t width, const float* a, int64_t lda,
                    const float* b, float* c, int64_t ldc, int64_t m, int64_t n, int64_t k,
                    const GemmEpilogue* e = nullptr, bool avx512LogicOnAvx2 = false);

// The same, with the path and blocking chosen now for activeIsa() (conv2d, whose GEMM shapes
// are known only inside its loop).
void gemmF32(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
             int64_t m, int64_t n, int64_t k);

// One item of conv2d's im2col or 1x1 path on the packed GEMM's micro-kernel for activeIsa()
// (executor/simd/conv_body.inc): output rows [m0, m1) of one group at output positions [p0, p1),
// all of K. x, w, bias and out point at the group's input planes, weight rows, bias values and
// output planes; the result is clamped to [lo, hi] as Clip does (the fused activation; -inf, inf
// for none). False (nothing run) on the baseline ISA, which gathers and runs Eigen's GEMM.
bool convGemmItemF32(const ConvParams& p, const float* x, const float* w, const float* bias,
                     float lo, float hi, float* out, int64_t m0, int64_t m1, int64_t p0,
                     int64_t p1);

// The same item in two phases, for items whose output channels are split between tasks
// (ConvParams::mSplit > 1), so that B is gathered once rather than once per channel block:
// convPackF32 packs K slices [s0, s1) (slice s: tap rows from s * kc) of the item at positions
// [p0, p1) into `packed` (convPackedFloatsF32 floats, 64-byte aligned, shared by the tasks), and
// convFromPackedF32 then computes output rows [m0, m1) from it, as convGemmItemF32 does.
// 0 / false (nothing run) on the baseline ISA.
int64_t convPackedFloatsF32(const ConvParams& p, int64_t p0, int64_t p1);
bool convPackF32(const ConvParams& p, const float* x, int64_t s0, int64_t s1, int64_t p0,
                 int64_t p1, float* packed);
bool convFromPackedF32(const ConvParams& p, const float* packed, const float* w, const float* bias,
                       float lo, float hi, float* out, int64_t m0, int64_t m1, int64_t p0,
                       int64_t p1);

// One item of a 1x1 conv that writes channel blocks (ConvParams::outBlocked on AVX2;
// conv_body.inc's convItemToBlocks): 16-channel blocks [j0, j1) at output positions [p0, p1) of
// one image (x: its input planes; out: its output, [m / 16][positions][16]), from the plan's
// packed weight wp (compiler/weight_pack.h's 64-channel tiles). Needs one group, a 1x1 window
// read in place and m % 16 == 0. False (nothing run) below AVX2.
bool convItemToBlocksF32(const ConvParams& p, const float* x, const float* wp, const float* bias,
                         float lo, float hi, float* out, int64_t j0, int64_t j1, int64_t p0,
                         int64_t p1);

// One item of a 1x1 conv that reads channel blocks and writes planes (ConvParams::inBlocked on
// AVX2; conv_body.inc's convItemFromBlocks): output channels [c0, c1) (multiples of 8) at
// positions [p0, p1) of one image (x: its input, [c / 16][positions][16]; out and res: its
// output and residual planes, res null for none), from the plan's packed weight wp. The residual
// is added before the clamp. Needs one group, a 1x1 window read in place, c % 16 == 0 and
// m % 8 == 0. False (nothing run) below AVX2.
bool convItemFromBlocksF32(const ConvParams& p, const float* x, const float* wp, const float* bias,
                           float lo, float hi, float* out, const float* res, int64_t c0, int64_t c1,
                           int64_t p0, int64_t p1);

// True when convGemmItemF32 runs 1x1 items with both operands read in place (AVX-512: the direct
// path's tiles), so an item split by channels needs no shared pack (conv2d.cpp).
bool convPointwiseInPlaceF32();

// For tests: the same with the AVX-512 instantiation's logic (12 x 32 tiles) on AVX2 registers.
// False (nothing run) when this CPU has no AVX2.
bool convGemmItemF32Avx512LogicOnAvx2(const ConvParams& p, const float* x, const float* w,
                                      const float* bias, float lo, float hi, float* out, int64_t m0,
                                      int64_t m1, int64_t p0, int64_t p1);

// The taps each output row of conv2d's channel-tile path runs. Set s is the pairs
// taps[2 i], taps[2 i + 1] for i in [begin[s], begin[s + 1]): a tap's offset in the input planes
// and its index k in the packed weight (k = (ci * kh + ki) * kw + kj). Output row oy runs set
// rowSet[oy]. Set 0 is every tap; a row whose window reaches into the zero rows a padded copy
// has above or below the input runs a set without the taps on them (see conv2d.cpp).
struct ConvTapSets {
  const int32_t* taps = nullptr;
  const int32_t* begin = nullptr;
  const int32_t* rowSet = nullptr;
};

// One item of conv2d's channel-tile path (ConvParams::channelTiles; channel_tile_body.inc's
// channelTileItem): output rows [oy0, oy1) of one image (`out`: its output planes) for output
// channels [64 tile, 64 tile + 64). `src`: the image's input planes in padded coordinates, row
// stride pw; sets: the taps each row runs; wp: the whole weight packed as
// compiler/weight_pack.h lays it out; res: null, or a residual laid out as `out` (planes),
// added before the clamp. False (nothing run) unless this process runs AVX-512.
bool convChannelTileItemF32(const ConvParams& p, const float* src, int64_t pw,
                            const ConvTapSets& sets, const float* wp, const float* bias, float lo,
                            float hi, float* out, const float* res, int64_t tile, int64_t oy0,
                            int64_t oy1);
// For tests: the same 16-lane logic on AVX2 registers. False when this CPU has no AVX2.
bool convChannelTileItemF32Avx512LogicOnAvx2(const ConvParams& p, const float* src, int64_t pw,
                                             const ConvTapSets& sets, const float* wp,
                                             const float* bias, float lo, float hi, float* out,
                                             const float* res, int64_t tile, int64_t oy0,
                                             int64_t oy1);

// The whole channel-tile path on NCHW tensors (executor/kernels/conv2d.cpp): the zero-padded
// copy of each image's input where the conv pads, the tap offsets, and (tile, row block) items
// claimed by `tasks` threads, each run by convChannelTileItemF32 (or, with avx512LogicOnAvx2,
// its AVX2 test instantiation). False (nothing run) when that instantiation cannot run here.
bool runConvChannelTiles(const ConvParams& p, int tasks, const float* x, const float* wp,
                         const float* b, float lo, float hi, float* out,
                         bool avx512LogicOnAvx2 = false, const float* residual = nullptr);

// conv2d's Winograd path (ConvParams::winograd; executor/kernels/winograd.cpp): the whole
// convolution of NCHW x into NCHW out, u the weight transformed by the plan (compiler/
// weight_pack.h), b the bias or null, residual null or laid out as out (added before the clamp).
// False (nothing run) unless this process runs AVX-512.
bool runConvWinograd(const ConvParams& p, int tasks, const float* x, const float* u, const float* b,
                     float lo, float hi, float* out, const float* residual);

// Items of conv2d's depthwise path for activeIsa() (conv_body.inc): output planes
// [item0, item1) (item: image * m + channel) of the whole tensors x, w, b (b may be null), out.
// False (nothing run) on the baseline ISA, which runs executor/kernels/conv2d.cpp's direct loop.
bool convDepthwiseItemsF32(const ConvParams& p, const float* x, const float* w, const float* b,
                           float lo, float hi, float* out, int64_t item0, int64_t item1);
// For tests: the same with the AVX-512 instantiation's 16-lane logic on AVX2 registers.
bool convDepthwiseItemF32Avx512LogicOnAvx2(const ConvParams& p, const float* x, const float* w,
                                           const float* b, float lo, float hi, float* out,
                                           int64_t item0, int64_t item1);
// One item of conv2d's depthwise path in channel blocks (ConvParams::channelBlocks;
// conv_body.inc's channelBlockItem): output rows [oy0, oy1) of output channels
// [oc0, oc0 + channels) (channels <= 16) of image img, on the whole tensors x, w, b (b may be
// null), out. With avx512LogicOnAvx2 (tests), the same 16-lane logic on AVX2 registers. False
// (nothing run) when that instantiation cannot run here.
bool convChannelBlockItemF32(const ConvParams& p, const float* x, const float* w, const float* b,
                             float lo, float hi, float* out, int64_t img, int64_t oc0,
                             int64_t channels, int64_t oy0, int64_t oy1,
                             bool avx512LogicOnAvx2 = false);
// Planes per depthwise item: narrow planes in groups, so that each plane's phased copy is made
// well before it is read (conv_body.inc's depthwiseItems says why), up to 8 and ~32 KiB of copies.
int64_t depthwiseGroup(const ConvParams& p);

// One plane of max_pool2d for activeIsa() (conv_body.inc: the depthwise walk with max instead of
// multiply-add). False on the baseline ISA (nothing written) and for a plane holding a NaN (some
// of `out` may be written): the caller's scalar loop then writes all of it (a vector max does
// not propagate NaN as PyTorch does).
bool maxPoolPlaneF32(const PoolParams& p, const float* in, float* out);

// Eigen's GEMM compiled for the baseline ISA (executor/kernels/matmul.cpp).
void eigenGemmF32(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                  int64_t m, int64_t n, int64_t k);

// For tests: the AVX-512 kernels' logic (the same templates over 16-lane vectors: 12 x 32 tiles
// and their packing, 16-lane skinny streams) run on pairs of AVX2 registers, with a blocking
// chosen for Isa::kAvx512. False (nothing run) when this CPU has no AVX2.
bool gemmF32Avx512LogicOnAvx2(const GemmBlocking& blocking, const float* a, int64_t lda,
                              const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m,
                              int64_t n, int64_t k, const GemmEpilogue* e = nullptr);

}  // namespace gearbox::kernels
