// Conv2d: the compiler's hooks (compiler/ops/op_hooks.h). The compile step picks the code path
// for the static shape: a direct loop for depthwise convolutions (a GEMM with K = KH * KW would
// be too skinny to pay for packing), no gather at all for 1x1 stride-1 unpadded convolutions
// (the input is already the GEMM's right operand), im2col + GEMM otherwise. It also sizes the
// column blocks so the gathered block stays in L2 and there are enough items for the threads.
#include "compiler/cpu_isa.h"
#include "compiler/ops/window_params.h"
#include "compiler/weight_pack.h"

namespace gearbox::ops {
namespace {

constexpr FieldList<ConvParams, 25> kConvFields{{
    {"n", &ConvParams::n},
    {"c", &ConvParams::c},
    {"h", &ConvParams::h},
    {"w", &ConvParams::w},
    {"m", &ConvParams::m},
    {"oh", &ConvParams::oh},
    {"ow", &ConvParams::ow},
    {"kh", &ConvParams::kh},
    {"kw", &ConvParams::kw},
    {"sh", &ConvParams::sh},
    {"sw", &ConvParams::sw},
    {"dh", &ConvParams::dh},
    {"dw", &ConvParams::dw},
    {"pt", &ConvParams::pt},
    {"pl", &ConvParams::pl},
    {"group", &ConvParams::group},
    {"cg", &ConvParams::cg},
    {"mg", &ConvParams::mg},
    {"bias", &ConvParams::bias},
    {"col_block", &ConvParams::colBlock},
    {"m_split", &ConvParams::mSplit},
    {"kc", &ConvParams::kc},
    {"channel_tiles", &ConvParams::channelTiles},
    {"channel_blocks", &ConvParams::channelBlocks},
    {"winograd", &ConvParams::winograd},
}};

// The gathered block of one item, kc x colBlock floats, stays within this (256 KiB: half of a
// Zen 3 or Ice Lake core's L2) while the item's tiles read it once per MR output channels.
constexpr int64_t kColBlockFloats = 64 * 1024;
// K is gathered at most this deep at a time: the MR weight rows a tile reads (6 x 384 floats on
// AVX2, 12 x 384 on AVX-512: 9 and 18 KiB) stay in L1 while it sweeps the block's panels.
constexpr int64_t kMaxKc = 384;
// An item gathers its block whatever its channel count: an item of fewer channels than this
// would spend more on the gather than on the product.
constexpr int64_t kMinChannelsPerItem = 24;
// The thread split. Kernels split on the spinning fork-join pool (executor/fork_join.h), where a
// split costs microseconds, not a wake-up: the GEMM paths split from 4 MFLOP (~40 us at 100
// GFLOP/s; half of the generic threshold, which also covers ops on oneTBB). Depthwise runs at
// about a tenth of the GEMM paths' FLOP rate (4.5-23 GFLOP/s against 55-130 on ResNet-18's and
// MobileNetV2's layers, docs/performance.md), so its FLOPs count 8x: MobileNetV2's depthwise
// layers of 0.5-2.7 MFLOP took a quarter of its time at batch 1, all on one thread.
constexpr double kConvSplitFlops = 2.0e6;
constexpr double kDepthwiseWorkScale = 8.0;

// The channel-tile path (ConvParams::channelTiles) on AVX-512, for one group and a column
// stride of 1 or 2 (its tiles read a row's taps 1 or 2 floats apart). Its tap offsets are
// 32-bit: the input planes it reads (zero-padded when the conv pads) must span < 2^31 floats.
bool channelTilesFit(const ConvParams& p) {
  if (activeIsa() != Isa::kAvx512 || p.group != 1 || (p.sw != 1 && p.sw != 2)) return false;
  if (p.oh <= 0 || p.ow <= 0 || p.m <= 0 || p.c <= 0) return false;
  const int64_t rows = std::max((p.oh - 1) * p.sh + (p.kh - 1) * p.dh + 1, p.h + p.pt);
  const int64_t cols = std::max((p.ow - 1) * p.sw + (p.kw - 1) * p.dw + 1, p.w + p.pl);
  int64_t plane = 0, all = 0;
  return !__builtin_mul_overflow(rows, cols, &plane) && !__builtin_mul_overflow(plane, p.c, &all) &&
         all < (int64_t{1} << 31);
}

// Depthwise in channel blocks (ConvParams::channelBlocks) on AVX-512 and AVX2: its row walk is
// written for a 3 x 3 window without dilation, row and column strides of 1 or 2, and one output
// channel per input channel (every depthwise layer of MobileNetV2 and ShuffleNetV2). Where its
// input or output is in planes it transposes rows into and out of blocks; so measured (each side
// transposed), it still ran MobileNetV2's depthwise layers on AVX2 1.2-3.5x faster than the
// per-plane loops (conv_body.inc). A static plan keeps both sides in blocks where the 1x1 convs
// around it can write and read them (compiler.cpp's blockActivations).
//
// Except, on AVX2, a layer of stride 1 whose output rows are at least three vectors wide, or of
// stride 2 and at least six (kDepthwisePlaneMinCols): conv_body.inc's dw3x3Plane reads its
// planes in place, each input row's loads feeding every output row whose window holds it (up to
// three at stride 1, two at stride 2), with no transposes.
// kernels_bench, the Xeon forced to AVX2, one thread, us, channel blocks against planes: stride
// 1, 112 x 112 x 32 226 against 127, 56 x 56 x 144 253 / 147, 28 x 28 x 192 72 / 67, but
// 14 x 14 x 384 42 / 58 and 7 x 7 x 960 31 / 60 (there every vector is at an edge, and a
// part-vector wastes lanes); stride 2, 112 -> 56 x 96 300 / 240, but 56 -> 28 x 144 90 / 99
// (its in-lane shuffles split each row by parity: three per input row and vector).
// Those figures transposed the input into blocks; a static plan whose expanding 1x1 writes the
// input in blocks switches the wide layers to channel blocks after all (compiler.cpp's
// blockActivations, convDepthwiseBlocksFit).
constexpr int64_t kDepthwisePlaneMinCols[3] = {0, 24, 48};
bool channelBlocksFit(const ConvParams& p) {
  if (activeIsa() == Isa::kAvx2 && p.sh == p.sw && (p.sw == 1 || p.sw == 2) &&
      p.ow >= kDepthwisePlaneMinCols[p.sw])
    return false;
  return gearbox::convDepthwiseBlocksFit(p);
}

// The Winograd path (ConvParams::winograd): 3 x 3, stride 1, no dilation, padded by 1 on every
// side (the output as large as the input), one group, on AVX-512 (its transforms are written
// for 16-lane vectors), at least 16 input and output channels (fewer would spend more on the
// transforms than the 2.25x fewer multiply-adds save), and at least 64 tiles of 2 x 2 outputs
// per image: its GEMMs run over an image's tiles, so each of its 16 transformed weight floats
// per kernel tap feeds one FMA per tile, against the channel tiles' 9 floats feeding one per
// position. One 16-tile vector (ResNet-18's 7 x 7 stage: its 16 transformed weights 16 MB) ran
// 1.0-1.3x slower than the channel tiles. ResNet-18's 14 x 14 stage (49 tiles, 4.2 MB of
// transformed weights per conv) ran 10-20% faster on Winograd alone in kernels_bench, warm, but
// the whole model at batch 1, whose weights a call streams in cold, ran 5% faster with it on the
// channel tiles (one thread, 20.7-21.5 -> 19.8-20.4 ms; two, 10.5-10.9 -> 10.1-10.4; batch 32
// level; Xeon, interleaved), and slower again with the 28 x 28 stage (196 tiles) moved too.
bool winogradFits(const ConvParams& p) {
  return activeIsa() == Isa::kAvx512 && p.kh == 3 && p.kw == 3 && p.sh == 1 && p.sw == 1 &&
         p.dh == 1 && p.dw == 1 && p.pt == 1 && p.pl == 1 && p.oh == p.h && p.ow == p.w &&
         p.group == 1 && p.c >= 16 && p.m >= 16 && p.oh > 0 && p.ow > 0 &&
         (p.oh + 1) / 2 * ((p.ow + 1) / 2) >= 64;
}

}  // namespace

}  // namespace gearbox::ops

bool gearbox::convChannelTilesFit(const ConvParams& p) {
  return ops::channelTilesFit(p);
}

bool gearbox::convDepthwiseBlocksFit(const ConvParams& p) {
  return activeIsa() >= Isa::kAvx2 && p.path == ConvParams::Path::kDepthwise && p.kh == 3 &&
         p.kw == 3 && p.dh == 1 && p.dw == 1 && (p.sh == 1 || p.sh == 2) &&
         (p.sw == 1 || p.sw == 2) && p.cg == 1 && p.mg == 1 && p.oh > 0 && p.ow > 0 && p.pt >= 0 &&
         p.pl >= 0;
}

bool gearbox::convBlocksFromGemmFit(const ConvParams& p) {
  return activeIsa() == Isa::kAvx2 && p.path == ConvParams::Path::kPointwise && p.group == 1 &&
         p.m > 0 && p.m % 16 == 0 && p.c > 0 && p.oh > 0 && p.ow > 0;
}

bool gearbox::convPointwiseFromBlocksFit(const ConvParams& p) {
  return activeIsa() == Isa::kAvx2 && p.path == ConvParams::Path::kPointwise && p.group == 1 &&
         p.m > 0 && p.m % 8 == 0 && p.c > 0 && p.c % 16 == 0 && p.oh > 0 && p.ow > 0;
}

namespace gearbox::ops {

void compileConv2d(KernelSpec& spec) {
  const KernelKey& key = spec.key;
  namespace a = attr::Conv2d;
  const Shape& x = key.inputs[0].shape;
  const Shape& wt = key.inputs[1].shape;
  const auto strides = key.attrs.ints(a::strides), dil = key.attrs.ints(a::dilations),
             pads = key.attrs.ints(a::pads);
  ConvParams p;
  p.n = x[0];
  p.c = x[1];
  p.h = x[2];
  p.w = x[3];
  p.m = wt[0];
  p.kh = wt[2];
  p.kw = wt[3];
  p.oh = spec.output.shape[2];
  p.ow = spec.output.shape[3];
  p.sh = strides[0];
  p.sw = strides[1];
  p.dh = dil[0];
  p.dw = dil[1];
  p.pt = pads[0];
  p.pl = pads[1];
  p.group = key.attrs.i(a::group);
  p.cg = p.c / p.group;
  p.mg = p.m / p.group;
  p.bias = key.inputs.size() >= 3 ? 1 : 0;
  const int64_t positions = p.oh * p.ow, depth = p.cg * p.kh * p.kw;
  const double flops = 2.0 * static_cast<double>(p.n * p.m) * static_cast<double>(positions) *
                       static_cast<double>(depth);
  spec.work = flops;
  const bool depthwise = p.cg == 1 && p.group > 1;
  spec.tasks = decideTasks(depthwise ? kDepthwiseWorkScale * flops : flops, kConvSplitFlops);
  if (depthwise) {
    p.path = ConvParams::Path::kDepthwise;
    p.colBlock = 0;
    p.kc = 0;
    p.channelBlocks = channelBlocksFit(p) ? 1 : 0;
  } else {
    const bool pointwise = p.kh == 1 && p.kw == 1 && p.sh == 1 && p.sw == 1 && p.pt == 0 &&
                           p.pl == 0 && pads[2] == 0 && pads[3] == 0;
    p.path = pointwise ? ConvParams::Path::kPointwise : ConvParams::Path::kIm2col;
    const int64_t kSlices = (depth + kMaxKc - 1) / kMaxKc;
    p.kc = std::max<int64_t>((depth + kSlices - 1) / kSlices, 1);
    // Even blocks of output positions, each within the budget, rounded up to whole 16-column
    // panels (the last one takes what remains).
    const int64_t maxBlock = std::max<int64_t>(kColBlockFloats / p.kc / 16 * 16, 16);
    const int64_t blocks = (std::max<int64_t>(positions, 1) + maxBlock - 1) / maxBlock;
    p.colBlock = std::min<int64_t>((positions + blocks - 1) / blocks + 15, positions);
    if (p.colBlock < positions) p.colBlock = p.colBlock / 16 * 16;
    // On AVX-512 a block's positions run in 64-column tiles (kConvNrAvx512, and the 1x1 path's
    // in-place tiles): whole tiles per block (rounded down, within the budget), or every block
    // would end in a part-tile.
    if (activeIsa() == Isa::kAvx512 && p.colBlock < positions && p.colBlock >= 64)
      p.colBlock = p.colBlock / 64 * 64;
    p.colBlock = std::max<int64_t>(p.colBlock, 1);
    // Few positions (deep layers, batch 1): split the output channels too, so every task has
    // work (four items per task evens out the last ones).
    const int64_t outer = p.n * p.group * ((positions + p.colBlock - 1) / p.colBlock);
    p.mSplit = 1;
    // On AVX2, where the tasks can share out (image, group) units evenly by splitting their
    // positions and the weight rows are no more than the positions (mg <= positions: each task
    // then reads all of a weight no larger than the half of B it packs itself), split the
    // positions instead of the channels. Split by channels, every task read the one packed B
    // (runSharedPack), half of it from the other core's L2. Intel Xeon (2 MiB L2) forced to AVX2,
    // batch 1, kernels_bench, two threads, ratio to oneDNN's two: ResNet-18's 1x1 stride-2
    // shortcut 0.64 -> 0.90-0.99, MobileNetV2's 14 x 14 project (576 -> 96) 0.65-0.68 -> 0.88-0.89,
    // its 28 x 28 expand on planes 0.61 -> 0.73-0.83 (one thread: 0.88-0.95 either way). AVX-512
    // keeps the channel split: its 1x1s read B in place and its deep layers take channel tiles.
    const int64_t units = p.n * p.group;
    if (activeIsa() == Isa::kAvx2 && spec.tasks > 1 && outer < spec.tasks && units < spec.tasks &&
        spec.tasks % units == 0 && p.mg <= positions && positions >= 2 * spec.tasks) {
      const int64_t per = spec.tasks / units;
      p.colBlock = (positions + per - 1) / per;
    } else if (spec.tasks > 1 && outer < 4 * spec.tasks) {
      p.mSplit = std::clamp<int64_t>((4 * spec.tasks + outer - 1) / outer, 1,
                                     std::max<int64_t>(p.mg / kMinChannelsPerItem, 1));
    }
    // Where the channel-tile path wins (kernels_bench on Zen 4, one thread, against the paths
    // above: 0.84-0.95 of oneDNN on ResNet-18's 3x3 and 1x1-stride-2 layers, from 0.52-0.83):
    // its per-tile cost is the transposed store of 7 x 64 outputs, which a shallow K does not
    // pay back (MobileNetV2's 3 x 3 x 3 stem and 24-deep 1x1 ran at 0.72 of the im2col and
    // in-place paths), and 1x1 convs over planes of 256+ positions already run in place.
    const bool deepEnough = pointwise ? depth >= 256 || positions < 256 : depth >= 64;
    p.channelTiles = deepEnough && channelTilesFit(p) ? 1 : 0;
    p.winograd = p.channelTiles && winogradFits(p) ? 1 : 0;
  }
  spec.params = p;
}

KernelCost kernelCostConv2d(const KernelKey& key) {
  const Shape& w = key.inputs[1].shape;
  const TensorType out = inferNode(keyContext(key));
  const double positions = elementBytes(out) / 4.0;  // N * M * OH * OW
  // A dynamic dim counts as 1 (compiler/kernel_cost.h), the weight's too in a generic key.
  auto dim = [](int64_t d) { return static_cast<double>(d < 0 ? 1 : d); };
  const double depth = dim(w[1]) * dim(w[2]) * dim(w[3]);
  double bytes = elementBytes(key.inputs[0]) + elementBytes(key.inputs[1]) + elementBytes(out);
  for (size_t i = 2; i < key.inputs.size(); ++i) bytes += elementBytes(key.inputs[i]);
  // A multiply-add per weight tap and output element, plus the bias add and the residual's
  // (fuse-conv-residual: it reads the residual once, where the Add read it and the conv's
  // output and wrote its own).
  return KernelCost{
      2.0 * positions * depth +
          static_cast<double>(key.inputs.size() > 2 ? key.inputs.size() - 2 : 0) * positions,
      bytes};
}
CompileCostTerms compileCostConv2d() {
  return {800,
          "assumption: a convolution primitive is created like oneDNN's matmul primitive (0.8 ms "
          "for 256x256, Sapphire Rapids), since it lowers to the same GEMM",
          10, "assumption: MatMul's tile search, 10 us per doubling of FLOPs"};
}

void paramsToJsonConv2d(const KernelSpec& spec, Json& j) {
  const ConvParams& p = paramsAs<ConvParams>(spec);
  flatToJson(p, kConvFields, j);
  j["path"] = static_cast<int>(p.path);
}

void paramsFromJsonConv2d(const Json& j, KernelSpec& spec) {
  ConvParams p = flatFromJson(j, kConvFields);
  const int64_t path = getInt(j, "path", "kernel.params", ErrorKind::kIo);
  if (p.winograd != 0 && p.winograd != 1)
    fail(ErrorKind::kIo, "field 'kernel.params.winograd' out of range: {}", p.winograd);
  if (path < 0 || path > 2)
    fail(ErrorKind::kIo, "field 'kernel.params.path' out of range: {}", path);
  p.path = static_cast<ConvParams::Path>(path);
  spec.params = p;
}

void checkParamsConv2d(const KernelSpec& spec) {
  checkByRecompile<ConvParams>(spec, compileConv2d);
}

std::string opInfoInputNameConv2d(size_t i, size_t) {
  return i == 0 ? "input" : i == 1 ? "weight" : i == 2 ? "bias" : "residual";
}

}  // namespace gearbox::ops
