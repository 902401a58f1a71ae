// Pad: the compiler's hooks (compiler/ops/op_hooks.h). The compile step merges every dim without
// pads into the dim before it, so a pad of H and W on [N, C, H, W] is walked as [N*C, H, W] and
// the kernel's innermost dim is the longest run it can copy as one block.
#include "compiler/ops/op_hooks.h"

namespace gearbox::ops {
namespace {

// Everything is derived from the key alone, so checkParamsPad can re-derive and compare.
PadParams padParams(const KernelKey& key) {
  const Shape& in = key.inputs[0].shape;
  const int r = in.rank();
  const auto pads = key.attrs.ints(attr::Pad::pads);
  PadParams p;
  p.numel = 1;
  int m = 0;
  for (int d = 0; d < r; ++d) {
    const int64_t begin = pads[d], end = pads[r + d], size = in[d];
    p.numel *= size + begin + end;
    if (begin == 0 && end == 0 && m > 0) {
      p.inDims[m - 1] *= size;
      p.outDims[m - 1] *= size;
      p.begins[m - 1] *= size;
      continue;
    }
    p.inDims[m] = size;
    p.outDims[m] = size + begin + end;
    p.begins[m] = begin;
    ++m;
  }
  if (m == 0) {  // a scalar: one element copied
    p.inDims[0] = p.outDims[0] = 1;
    m = 1;
  }
  p.rank = m;
  return p;
}

}  // namespace

void compilePad(KernelSpec& spec) {
  const PadParams p = padParams(spec.key);
  spec.work = static_cast<double>(dtypeSize(spec.key.dtype)) *
              static_cast<double>(p.numel + spec.key.inputs[0].shape.numel());
  spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
  spec.params = p;
}

KernelCost kernelCostPad(const KernelKey& key) {
  // The input read once (at most: a crop reads less, modeled as the whole input) and the output
  // written once.
  double outBytes = static_cast<double>(dtypeSize(key.dtype));
  const auto pads = key.attrs.ints(attr::Pad::pads);
  const Shape& in = key.inputs[0].shape;
  for (int d = 0; d < in.rank(); ++d)
    outBytes *=
        isStaticDim(in[d]) ? static_cast<double>(in[d] + pads[d] + pads[in.rank() + d]) : 1.0;
  return KernelCost{0, elementBytes(key.inputs[0]) + outBytes};
}
CompileCostTerms compileCostPad() {
  return {40, "assumption: a row copy with fills specialised to its pads, like Transpose"};
}

void paramsToJsonPad(const KernelSpec& spec, Json& p) {
  const PadParams& v = paramsAs<PadParams>(spec);
  p["rank"] = v.rank;
  p["numel"] = v.numel;
  p["in_dims"] = intArray(v.inDims);
  p["out_dims"] = intArray(v.outDims);
  p["begins"] = intArray(v.begins);
}

void paramsFromJsonPad(const Json& p, KernelSpec& spec) {
  const std::string where = "kernel.params";
  const ErrorKind io = ErrorKind::kIo;
  PadParams v;
  const int64_t rank = getInt(p, "rank", where, io);
  if (rank < 1 || rank > kMaxRank) fail(io, "field 'kernel.params.rank' out of range: {}", rank);
  v.rank = static_cast<int>(rank);
  v.numel = getInt(p, "numel", where, io);
  fixedIntArray(p, "in_dims", v.inDims);
  fixedIntArray(p, "out_dims", v.outDims);
  fixedIntArray(p, "begins", v.begins);
  spec.params = v;
}

void checkParamsPad(const KernelSpec& s) {
  // The params are a pure function of the key: anything else could read or write out of bounds.
  if (!(paramsAs<PadParams>(s) == padParams(s.key)))
    paramsMismatch(s, "dims or begins differ from the ones the key gives");
  if (paramsAs<PadParams>(s).numel != s.output.shape.numel())
    paramsMismatch(s, "numel differs from the output's element count");
}

std::string opInfoInputNamePad(size_t, size_t) {
  return "self";
}

}  // namespace gearbox::ops
