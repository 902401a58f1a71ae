// Shared hooks of max_pool2d and avg_pool2d: planes of N * C, pooled one plane per work item.
#include "compiler/ops/pool2d.h"

namespace gearbox::ops {
namespace {

constexpr FieldList<PoolParams, 15> kPoolFields{{
    {"planes", &PoolParams::planes},
    {"h", &PoolParams::h},
    {"w", &PoolParams::w},
    {"oh", &PoolParams::oh},
    {"ow", &PoolParams::ow},
    {"kh", &PoolParams::kh},
    {"kw", &PoolParams::kw},
    {"sh", &PoolParams::sh},
    {"sw", &PoolParams::sw},
    {"dh", &PoolParams::dh},
    {"dw", &PoolParams::dw},
    {"pt", &PoolParams::pt},
    {"pl", &PoolParams::pl},
    {"pb", &PoolParams::pb},
    {"pr", &PoolParams::pr},
}};

}  // namespace

void compilePool2d(KernelSpec& spec, int kernelSlot, int stridesSlot, int padsSlot,
                   int dilationsSlot, int countIncludePadSlot) {
  const KernelKey& key = spec.key;
  const Shape& x = key.inputs[0].shape;
  const auto k = key.attrs.ints(kernelSlot), s = key.attrs.ints(stridesSlot),
             pads = key.attrs.ints(padsSlot);
  PoolParams p;
  p.planes = x[0] * x[1];
  p.h = x[2];
  p.w = x[3];
  p.oh = spec.output.shape[2];
  p.ow = spec.output.shape[3];
  p.kh = k[0];
  p.kw = k[1];
  p.sh = s[0];
  p.sw = s[1];
  if (dilationsSlot >= 0) {
    p.dh = key.attrs.ints(dilationsSlot)[0];
    p.dw = key.attrs.ints(dilationsSlot)[1];
  }
  p.pt = pads[0];
  p.pl = pads[1];
  p.pb = pads[2];
  p.pr = pads[3];
  if (countIncludePadSlot >= 0) p.countIncludePad = key.attrs.i(countIncludePadSlot);
  spec.work = static_cast<double>(p.planes * p.oh * p.ow) * static_cast<double>(p.kh * p.kw);
  // A pool is a pass over memory as much as arithmetic (a compare or add per tap): it splits by
  // the bytes it moves too. ResNet-18's stem pool (64 x 112 x 112, 1.8 M taps) ran on one
  // thread of two, at 239 us of the network's 9.9 ms (batch 1, an Intel Xeon); its 4 MB in and
  // out make three tasks where there are threads for them.
  spec.tasks = std::max(
      decideTasks(spec.work, kParallelFlopThreshold),
      decideTasks(elementBytes(key.inputs[0]) + elementBytes(spec.output), kParallelByteThreshold));
  spec.params = p;
}

void pool2dParamsToJson(const KernelSpec& spec, Json& j) {
  const PoolParams& p = paramsAs<PoolParams>(spec);
  flatToJson(p, kPoolFields, j);
  j["count_include_pad"] = p.countIncludePad;
}

void pool2dParamsFromJson(const Json& j, KernelSpec& spec) {
  PoolParams p = flatFromJson(j, kPoolFields);
  p.countIncludePad = getInt(j, "count_include_pad", "kernel.params", ErrorKind::kIo);
  spec.params = p;
}

KernelCost pool2dCost(const KernelKey& key, double flopsPerTap) {
  const auto k = key.attrs.ints(0);  // kernel is slot 0 of both pools
  const TensorType out = inferNode(keyContext(key));
  const double outs = elementBytes(out) / 4.0;
  return KernelCost{outs * static_cast<double>(k[0] * k[1]) * flopsPerTap,
                    elementBytes(key.inputs[0]) + elementBytes(out)};
}

}  // namespace gearbox::ops
