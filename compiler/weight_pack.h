#pragma once
// Weights re-laid out once, when a static plan is built, for kernels that read them in another
// order than the graph holds them: conv2d's channel-tile path (ConvParams::channelTiles) reads,
// per tap k, 64 consecutive output channels, where the graph's [M, C, KH, KW] weight has them
// K = C * KH * KW floats apart. ONNX Runtime (MLAS's NCHWc convolutions), TensorRT and Ascend's
// GE (FRACTAL_Z) do the same to constant weights at session or engine build.
//
// Only constants are packed: a weight fed as a graph input may change between calls, so its
// convolution keeps the im2col path, as do eager and dynamic modes, which run generic or
// per-op specs on the graph's tensors.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "compiler/kernel_spec.h"
#include "compiler/lru_cache.h"
#include "graph/tensor.h"

namespace gearbox {

// Whether conv2d's channel-tile path can run `p` on this process's ISA (AVX-512, one group,
// column stride 1 or 2, tap offsets within 32 bits): compiler/ops/conv2d.cpp's own test, which
// a static plan also asks when it keeps a value in channel blocks (compiler.cpp).
bool convChannelTilesFit(const ConvParams& p);
// Whether `p` can write its output in channel blocks from the GEMM micro-kernel's positions x
// channels tiles (conv_body.inc's convItemToBlocks) on this process's ISA: AVX2 (where
// convChannelTilesFit is false), a 1x1 read in place (Path::kPointwise), one group, m % 16 == 0.
// Its weight is packed in the channel-tile layout (packConvWeights, tag 0).
bool convBlocksFromGemmFit(const ConvParams& p);
// Whether `p` can read its input in channel blocks and write planes from tiles run as positions
// x channels (conv_body.inc's convItemFromBlocks) on this process's ISA: AVX2, a 1x1 read in
// place, one group, c % 16 == 0, m % 8 == 0. Its weight is packed in the channel-tile layout.
bool convPointwiseFromBlocksFit(const ConvParams& p);
// Whether the depthwise channel-block path (ConvParams::channelBlocks) can run `p` on this
// process's ISA (AVX2 or AVX-512, a 3 x 3 window at strides 1-2, one channel per group), whatever
// the compile step preferred for it: on AVX2 wide layers run on planes unless a static plan
// gives them their input in blocks (compiler.cpp's blockActivations).
bool convDepthwiseBlocksFit(const ConvParams& p);

// The packed layout: output channels rounded up to a multiple of 16 (zeros past m), in tiles
// of kConvTileChannels; tile t holds channels [64 t, min(64 t + 64, m16)) as [K][width] floats
// at offset 64 t K. Returns m16 * K (0 when the product overflows). For the depthwise
// channel-block path (ConvParams::channelBlocks; K = 9 taps), tiles of 16: block b's 9 tap
// vectors at 144 b. For the Winograd path (ConvParams::winograd), 16 m c: the 16 transformed
// components of every 3 x 3 kernel, each an [m, c] matrix.
int64_t convPackedWeightFloats(const ConvParams& p);
// Packs w ([m, K] row-major, K = cg * kh * kw, one group) into out (convPackedWeightFloats).
void packConvWeights(const ConvParams& p, const float* w, float* out);

// MatMul's constant B ([k, n] f32, row-major) for the direct GEMM path (MatMulParams::bPacked):
// in strips of `width` columns (a direct tile's width, 48 or 64), strip s holding columns
// [width s, width s + width) as [k][width] floats at s * k * width, columns past n zero. So each
// tile reads its k x width block of B contiguously rather than rows n floats apart. ONNX Runtime
// (MLAS's packed B) and oneDNN's pre-packed weights do the same at session build.
// matMulPackedBFloats: the floats of that layout (0 when they overflow).
int64_t matMulPackedBFloats(int64_t k, int64_t n, int64_t width);
// The MatMul spec a static plan runs where it packs B in strips: `spec` itself, or for a spec on
// AVX-512's skinny path (M <= 2, chosen for a B read in place) a copy on the direct path, with
// that path's blocking and split (compiler/ops/matmul.cpp, chooseGemmBlocking's bPacked). Any
// other spec is returned as it is.
std::shared_ptr<const KernelSpec> matMulSpecForStrips(std::shared_ptr<const KernelSpec> spec);
// The strip width a static plan packs a constant B of `p` in (48 or 64: the width of the tile
// the compile chose for p.m), or 0 where it packs none (not AVX-512's direct path, more than one
// batch, N < 256, an empty product, or a column split that would start a task inside a strip).
// Where another plan already holds B in the other width's strips, the plan reads those instead
// if matMulStripsFit (compiler.cpp, bindPackedMatMulB).
int64_t matMulStripWidth(const MatMulParams& p);
// Whether `p` can read its B in strips `width` (48 or 64) columns wide: the preconditions above,
// and a column split that starts each task on a whole strip. The direct path runs any width's
// tile whatever its M (gemmDirectStrips), so a plan may read strips another plan packed.
bool matMulStripsFit(const MatMulParams& p, int64_t width);
void packMatMulB(const float* b, int64_t k, int64_t n, int64_t width, float* out);

// The packed weights of a constant, shared by every plan built from it: the 64 gears of a
// session are 64 plans over one graph, and packing each conv's weight per plan would multiply
// its memory by 64. The cache owns nothing: it maps (constant, layout) to the plans' packs by
// weak pointers, so a pack lives exactly as long as some plan uses it, and a constant freed and
// its address reused is told apart from the old one (the weak pointer to it has expired).
// Capacity: 4,096 entries, least recently used evicted first (an evicted entry's pack stays
// valid for the plans holding it; a later plan then packs its own). Thread-safe.
class WeightPackCache {
 public:
  explicit WeightPackCache(size_t capacity = 4096) : cache_(capacity) {}
  // The pack of `w` (a Conv2d weight constant, f32, [p.m, K]) for `p`'s layout; packs it on a
  // miss. Sets *packedNow when this call packed it.
  std::shared_ptr<const float> get(const std::shared_ptr<const Tensor>& w, const ConvParams& p,
                                   bool* packedNow = nullptr);
  // The strips of a MatMul's constant B ([k, n]) `width` columns wide (packMatMulB); packs them
  // on a miss.
  std::shared_ptr<const float> getMatMulB(const std::shared_ptr<const Tensor>& b, int64_t k,
                                          int64_t n, int64_t width, bool* packedNow = nullptr);
  // The same, for a plan that can also read strips `shareWidth` wide (0: none): strips of
  // `width` if a plan holds them, else strips of `shareWidth` if a plan holds them (a hit
  // either way), else strips of `width` packed now (none when `width` is 0: null, nothing
  // counted). *used: the width of the strips returned. One lock around all of it, so two gears
  // compiled at once never pack the same B in both widths.
  std::shared_ptr<const float> getMatMulB(const std::shared_ptr<const Tensor>& b, int64_t k,
                                          int64_t n, int64_t width, int64_t shareWidth,
                                          int64_t* used, bool* packedNow = nullptr);
  // hits: a plan got a pack another plan holds; misses: packed (absent, stale or expired);
  // evictions, size and capacity: the map's.
  CacheStats stats() const;

 private:
  struct Key {
    const Tensor* tensor;
    int64_t m, k;
    // 1: the channel-block layout (tiles of 16); 2: Winograd's components; -width: MatMul's B
    // in strips (m is then n)
    int64_t depthwise;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct Entry {
    std::weak_ptr<const Tensor> tensor;
    std::weak_ptr<const float> packed;
  };
  // The pack under `key` of constant w, made by pack(data) into `floats` floats on a miss; or,
  // where `key`'s pack is not live and `alt` is given, the live pack under *alt (*usedAlt set).
  // floats <= 0: never packs (null on a miss, which is then not counted).
  std::shared_ptr<const float> lookup(const std::shared_ptr<const Tensor>& w, const Key& key,
                                      int64_t floats, const std::function<void(float*)>& pack,
                                      bool* packedNow, const Key* alt = nullptr,
                                      bool* usedAlt = nullptr);
  // The pack under `key` if it is w's and a plan still holds it; mu_ held.
  std::shared_ptr<const float> liveLocked(const std::shared_ptr<const Tensor>& w, const Key& key);
  // Held across a pack: two gears' plans never pack one weight twice (in one layout, or, for
  // MatMul's B, in two strip widths).
  mutable std::mutex mu_;
  LruCache<Key, Entry, KeyHash> cache_;
  int64_t hits_ = 0, misses_ = 0;
};

// The process's cache, which every plan compile uses.
WeightPackCache& weightPackCache();

}  // namespace gearbox
