#include "compiler/weight_pack.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <new>

#include "compiler/cpu_isa.h"
#include "graph/error.h"
#include "graph/large_buffer.h"

namespace gearbox {

int64_t convPackedWeightFloats(const ConvParams& p) {
  if (p.winograd) {
    int64_t mc = 0, floats = 0;
    if (p.m <= 0 || p.c <= 0 || __builtin_mul_overflow(p.m, p.c, &mc) ||
        __builtin_mul_overflow(mc, int64_t{16}, &floats))
      return 0;
    return floats;
  }
  const int64_t k = p.cg * p.kh * p.kw;
  const int64_t m16 = (p.m + 15) / 16 * 16;
  int64_t floats = 0;
  if (k <= 0 || m16 <= 0 || __builtin_mul_overflow(m16, k, &floats)) return 0;
  return floats;
}

namespace {

// The Winograd path's weight (executor/kernels/winograd.cpp): U = G g G^T of every 3 x 3 kernel
// g, G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1], stored as 16 [m, c] matrices, component
// xi = 4 i + j at out[(xi * m + oc) * c + ic]. In double, rounded once.
void packWinogradWeights(const ConvParams& p, const float* w, float* out) {
  for (int64_t oc = 0; oc < p.m; ++oc)
    for (int64_t ic = 0; ic < p.c; ++ic) {
      const float* g = w + (oc * p.c + ic) * 9;
      double gg[4][3];  // G g
      for (int j = 0; j < 3; ++j) {
        const double a = g[j], b = g[3 + j], c = g[6 + j];
        gg[0][j] = a;
        gg[1][j] = 0.5 * (a + b + c);
        gg[2][j] = 0.5 * (a - b + c);
        gg[3][j] = c;
      }
      for (int i = 0; i < 4; ++i) {
        const double a = gg[i][0], b = gg[i][1], c = gg[i][2];
        const double u[4] = {a, 0.5 * (a + b + c), 0.5 * (a - b + c), c};
        for (int j = 0; j < 4; ++j)
          out[((4 * i + j) * p.m + oc) * p.c + ic] = static_cast<float>(u[j]);
      }
    }
}

}  // namespace

void packConvWeights(const ConvParams& p, const float* w, float* out) {
  if (p.winograd) {
    packWinogradWeights(p, w, out);
    return;
  }
  const int64_t k = p.cg * p.kh * p.kw;
  const int64_t m16 = (p.m + 15) / 16 * 16;
  // The depthwise channel-block path reads its 16 channels' 9 taps as 9 vectors: tiles of 16.
  const int64_t tileChannels = p.channelBlocks ? 16 : kConvTileChannels;
  for (int64_t t0 = 0; t0 < m16; t0 += tileChannels) {
    const int64_t width = std::min<int64_t>(tileChannels, m16 - t0);
    float* tile = out + t0 * k;
    // Channel by channel: each reads one weight row in order and writes a strided column.
    for (int64_t c = 0; c < width; ++c) {
      const int64_t oc = t0 + c;
      if (oc < p.m) {
        const float* row = w + oc * k;
        for (int64_t i = 0; i < k; ++i) tile[i * width + c] = row[i];
      } else {
        for (int64_t i = 0; i < k; ++i) tile[i * width + c] = 0.0f;
      }
    }
  }
}

size_t WeightPackCache::KeyHash::operator()(const Key& k) const {
  size_t h = std::hash<const void*>{}(k.tensor);
  h ^= std::hash<int64_t>{}(k.m) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= std::hash<int64_t>{}(k.k) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= std::hash<int64_t>{}(k.depthwise) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

// MatMul's B is packed in strips (packMatMulB) where it is a 2-D f32 constant (the plan checks
// that) of at least this many columns, one batch, on the AVX-512 direct path: in place each of a
// tile's rows of B is ldb floats from the last (from N = 1024 a page apart: a TLB entry and the
// same L1 sets per row, and no prefetcher runs ahead), where packed strips are read
// contiguously. Measured on an Intel Xeon (2026-12-04, kernels_bench's BM_MatMul_GearboxPackedB
// against BM_MatMul_Gearbox, five repetitions interleaved, one thread | two): K = N = 1024 at
// M = 8 1.18 | 1.57x, M = 32 1.16 | 1.23x, M = 64 1.12 | 1.13x, M = 1024 1.09 | 1.09x; n = 256
// 1.05 | 1.07x; M = 32, N = 256 1.02 | 1.11x; n = 64 level (seven repetitions, a build that
// packed from N = 64), so narrower B stays in place.
constexpr int64_t kMatMulPackMinN = 256;

bool matMulStripsFit(const MatMulParams& p, int64_t width) {
  if (p.isa != Isa::kAvx512 || activeIsa() != Isa::kAvx512 || p.gemm.path != GemmPath::kDirect ||
      p.batch != 1 || p.bOffsets.size() != 1 || p.bOffsets[0] != 0 || p.n < kMatMulPackMinN ||
      p.k <= 0 || p.m <= 0)
    return false;
  return (width == 48 || width == 64) && p.colsPerTask % width == 0;
}

std::shared_ptr<const KernelSpec> matMulSpecForStrips(std::shared_ptr<const KernelSpec> spec) {
  const auto* p = std::get_if<MatMulParams>(&spec->params);
  // matMulStripsFit's cheap conditions first: most few-row products of a plan (batched decode
  // steps, narrow weights) never pack, and the copy holds the per-batch offsets.
  if (!p || p->gemm.path != GemmPath::kSkinny || p->isa != Isa::kAvx512 || p->batch != 1 ||
      p->n < kMatMulPackMinN)
    return spec;
  auto out = std::make_shared<KernelSpec>(*spec);
  auto& d = std::get<MatMulParams>(out->params);
  d.gemm = chooseGemmBlocking(Isa::kAvx512, DType::kF32, d.m, d.n, d.k, false, true);
  out->tasks = splitMatMul(d, spec->tasks);
  return out;
}

int64_t matMulStripWidth(const MatMulParams& p) {
  // The strips of the tile the compile chose for m (gemmDirectTile).
  const int64_t width = gemmDirectTile(p.m).vectors * 16;
  return matMulStripsFit(p, width) ? width : 0;
}

int64_t matMulPackedBFloats(int64_t k, int64_t n, int64_t width) {
  int64_t floats = 0;
  if (k <= 0 || n <= 0 || width <= 0 || n > std::numeric_limits<int64_t>::max() - width) return 0;
  const int64_t padded = (n + width - 1) / width * width;
  if (__builtin_mul_overflow(padded, k, &floats)) return 0;
  return floats;
}

void packMatMulB(const float* b, int64_t k, int64_t n, int64_t width, float* out) {
  // Row by row within a strip: each row of B is read as one short contiguous run.
  for (int64_t j0 = 0; j0 < n; j0 += width) {
    const int64_t cols = std::min(width, n - j0);
    float* strip = out + j0 * k;
    for (int64_t p = 0; p < k; ++p) {
      float* dst = strip + p * width;
      std::memcpy(dst, b + p * n + j0, static_cast<size_t>(cols) * sizeof(float));
      std::fill(dst + cols, dst + width, 0.0f);
    }
  }
}

std::shared_ptr<const float> WeightPackCache::get(const std::shared_ptr<const Tensor>& w,
                                                  const ConvParams& p, bool* packedNow) {
  const int64_t k = p.cg * p.kh * p.kw;
  const bool depthwise = p.channelBlocks != 0;
  if (!w || w->dtype() != DType::kF32 || (depthwise ? p.cg != 1 : p.group != 1) ||
      w->numel() != p.m * k)
    fail(ErrorKind::kShape, "conv2d weight pack: the constant is not an f32 [{}, {}] weight", p.m,
         k);
  const int64_t floats = convPackedWeightFloats(p);
  if (floats <= 0) fail(ErrorKind::kShape, "conv2d weight pack: {} x {} floats overflow", p.m, k);
  if (p.winograd && (p.kh != 3 || p.kw != 3 || p.group != 1))
    fail(ErrorKind::kShape, "conv2d weight pack: Winograd needs a 3 x 3 weight of one group");
  return lookup(
      w,
      Key{w.get(), p.m, k,
          depthwise    ? 1
          : p.winograd ? 2
                       : 0},
      floats, [&](float* data) { packConvWeights(p, w->as<const float>(), data); }, packedNow);
}

std::shared_ptr<const float> WeightPackCache::getMatMulB(const std::shared_ptr<const Tensor>& b,
                                                         int64_t k, int64_t n, int64_t width,
                                                         bool* packedNow) {
  int64_t used = 0;
  return getMatMulB(b, k, n, width, 0, &used, packedNow);
}

std::shared_ptr<const float> WeightPackCache::getMatMulB(const std::shared_ptr<const Tensor>& b,
                                                         int64_t k, int64_t n, int64_t width,
                                                         int64_t shareWidth, int64_t* used,
                                                         bool* packedNow) {
  if (!b || b->dtype() != DType::kF32 || b->shape().rank() != 2 || b->shape()[0] != k ||
      b->shape()[1] != n)
    fail(ErrorKind::kShape, "matmul weight pack: the constant is not an f32 [{}, {}] matrix", k, n);
  int64_t floats = 0;
  if (width != 0) {
    floats = matMulPackedBFloats(k, n, width);
    if (floats <= 0)
      fail(ErrorKind::kShape, "matmul weight pack: {} x {} in strips of {} overflows", k, n, width);
  }
  const Key own{b.get(), n, k, -width}, share{b.get(), n, k, -shareWidth};
  bool usedShare = false;
  auto packed = lookup(
      b, own, floats, [&](float* data) { packMatMulB(b->as<const float>(), k, n, width, data); },
      packedNow, shareWidth != 0 ? &share : nullptr, &usedShare);
  *used = !packed ? 0 : usedShare ? shareWidth : width;
  return packed;
}

std::shared_ptr<const float> WeightPackCache::liveLocked(const std::shared_ptr<const Tensor>& w,
                                                         const Key& key) {
  if (auto e = cache_.get(key)) {
    // The same constant (not a new one at a freed one's address), and a plan still holds it.
    const bool same = !e->tensor.owner_before(w) && !w.owner_before(e->tensor);
    if (same && !e->tensor.expired()) return e->packed.lock();
  }
  return nullptr;
}

std::shared_ptr<const float> WeightPackCache::lookup(const std::shared_ptr<const Tensor>& w,
                                                     const Key& key, int64_t floats,
                                                     const std::function<void(float*)>& pack,
                                                     bool* packedNow, const Key* alt,
                                                     bool* usedAlt) {
  if (packedNow) *packedNow = false;
  if (usedAlt) *usedAlt = false;
  std::lock_guard<std::mutex> lock(mu_);
  auto packed = floats > 0 ? liveLocked(w, key) : nullptr;
  if (!packed && alt) {
    packed = liveLocked(w, *alt);
    if (packed && usedAlt) *usedAlt = true;
  }
  if (packed) {
    ++hits_;
    return packed;
  }
  if (floats <= 0) return nullptr;
  ++misses_;
  const size_t bytes = (static_cast<size_t>(floats) * sizeof(float) + 63) / 64 * 64;
  // Streamed through on every call: in huge pages where large (graph/large_buffer.h).
  auto* data = static_cast<float*>(allocateLargeBuffer(bytes));
  packed =
      std::shared_ptr<const float>(data, [](const float* q) { std::free(const_cast<float*>(q)); });
  pack(data);
  cache_.put(key, Entry{w, packed});
  if (packedNow) *packedNow = true;
  return packed;
}

CacheStats WeightPackCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  CacheStats s = cache_.stats();
  s.hits = hits_;
  s.misses = misses_;
  return s;
}

WeightPackCache& weightPackCache() {
  static WeightPackCache* cache = new WeightPackCache();  // never destroyed: plans outlive main's
  return *cache;
}

}  // namespace gearbox
