// Shared hooks of flat elementwise kernels (compiler/ops/elementwise.h).
#include "compiler/ops/elementwise.h"

namespace gearbox::ops {

void compileElementwise(KernelSpec& spec) {
  const double esize = static_cast<double>(dtypeSize(spec.key.dtype));
  ElementwiseParams p;
  p.numel = spec.output.shape.numel();
  const double outBytes = static_cast<double>(p.numel) * esize;
  p.streamingStores = useStreamingStores(outBytes, outBytes);
  spec.params = p;
  spec.work = 2 * outBytes;
  spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
}

void elementwiseParamsToJson(const KernelSpec& spec, Json& p) {
  p["numel"] = paramsAs<ElementwiseParams>(spec).numel;
}

void elementwiseParamsFromJson(const Json& p, KernelSpec& spec) {
  ElementwiseParams e;
  e.numel = getInt(p, "numel", "kernel.params", ErrorKind::kIo);
  spec.params = e;
}

void checkElementwiseParams(const KernelSpec& s) {
  const ElementwiseParams& e = paramsAs<ElementwiseParams>(s);
  if (s.key.inputs.size() != 1 || e.numel != s.output.shape.numel() ||
      e.numel != s.key.inputs[0].shape.numel())
    paramsMismatch(s, "numel differs from the tensors' element count");
}

}  // namespace gearbox::ops
