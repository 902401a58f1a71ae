// Conv2d's channel-tile path (channel_tile_body.inc) compiled per ISA, and its entry points
// (gemm.h: convChannelTileItemF32 and the AVX-512 logic on AVX2 registers the tests also run).
// Apart from gemm.cpp so that the two, the library's largest translation units, compile side by
// side (channel_tile_body.inc says why).
#include <algorithm>
#include <cstdint>
#include <vector>

#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "executor/kernels/gemm.h"
#include "executor/simd/simd.h"

namespace gearbox::kernels {

#if GEARBOX_HAVE_ISA_REGIONS

GEARBOX_ISA_BEGIN_AVX2
namespace isa_avx2 {
#include "executor/simd/channel_tile_body.inc"

void channelTileItemAvx512Logic(const ConvParams& p, const float* src, int64_t pw,
                                const ConvTapSets& sets, const float* wp, const float* bias,
                                float lo, float hi, float* out, const float* res, int64_t tile,
                                int64_t oy0, int64_t oy1) {
  channelTileItem<F32x16OnAvx2>(p, src, pw, sets, wp, bias, lo, hi, out, res, tile, oy0, oy1);
}
}  // namespace isa_avx2
GEARBOX_ISA_END

GEARBOX_ISA_BEGIN_AVX512
namespace isa_avx512 {
#include "executor/simd/channel_tile_body.inc"

void channelTileItem(const ConvParams& p, const float* src, int64_t pw, const ConvTapSets& sets,
                     const float* wp, const float* bias, float lo, float hi, float* out,
                     const float* res, int64_t tile, int64_t oy0, int64_t oy1) {
  channelTileItem<F32x16>(p, src, pw, sets, wp, bias, lo, hi, out, res, tile, oy0, oy1);
}
}  // namespace isa_avx512
GEARBOX_ISA_END

#endif  // GEARBOX_HAVE_ISA_REGIONS

bool convChannelTileItemF32(const ConvParams& p, const float* src, int64_t pw,
                            const ConvTapSets& sets, const float* wp, const float* bias, float lo,
                            float hi, float* out, const float* res, int64_t tile, int64_t oy0,
                            int64_t oy1) {
#if GEARBOX_HAVE_ISA_REGIONS
  if (activeIsa() == Isa::kAvx512) {
    isa_avx512::channelTileItem(p, src, pw, sets, wp, bias, lo, hi, out, res, tile, oy0, oy1);
    return true;
  }
#endif
  return false;
}

bool convChannelTileItemF32Avx512LogicOnAvx2(const ConvParams& p, const float* src, int64_t pw,
                                             const ConvTapSets& sets, const float* wp,
                                             const float* bias, float lo, float hi, float* out,
                                             const float* res, int64_t tile, int64_t oy0,
                                             int64_t oy1) {
#if GEARBOX_HAVE_ISA_REGIONS
  if (activeIsa() < Isa::kAvx2) return false;
  isa_avx2::channelTileItemAvx512Logic(p, src, pw, sets, wp, bias, lo, hi, out, res, tile, oy0,
                                       oy1);
  return true;
#else
  return false;
#endif
}

}  // namespace gearbox::kernels
