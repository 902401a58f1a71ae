// BatchNorm: the compiler's hooks (compiler/ops/op_hooks.h). x is viewed as [outer, channels,
// inner]; the kernel folds each channel's statistics into one multiply-add.
#include "compiler/ops/op_hooks.h"

namespace gearbox::ops {
namespace {

BatchNormParams batchNormParams(const KernelKey& key) {
  const Shape& x = key.inputs[0].shape;
  return BatchNormParams{x[0], x[1], product(x, 2, x.rank())};
}

}  // namespace

void compileBatchNorm(KernelSpec& spec) {
  const BatchNormParams p = batchNormParams(spec.key);
  // Bytes moved: x read and y written (the [C] statistics are noise next to them).
  spec.work = 2 * elementBytes(spec.key.inputs[0]);
  spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
  spec.params = p;
}

KernelCost kernelCostBatchNorm(const KernelKey& key) {
  // A multiply-add per element once the per-channel factors are folded (a sqrt and a division
  // per channel on top); x read and y written, plus the four [C] statistics.
  const double x = elementBytes(key.inputs[0]);
  double stats = 0;
  for (size_t i = 1; i < key.inputs.size(); ++i) stats += elementBytes(key.inputs[i]);
  return KernelCost{2 * x / static_cast<double>(dtypeSize(key.dtype)), 2 * x + stats};
}
CompileCostTerms compileCostBatchNorm() {
  return {25,
          "assumption: an elementwise kernel with per-channel operands, like Mul's row broadcast"};
}

void paramsToJsonBatchNorm(const KernelSpec& spec, Json& p) {
  const BatchNormParams& v = paramsAs<BatchNormParams>(spec);
  p["outer"] = v.outer;
  p["channels"] = v.channels;
  p["inner"] = v.inner;
}

void paramsFromJsonBatchNorm(const Json& p, KernelSpec& spec) {
  const std::string where = "kernel.params";
  const ErrorKind io = ErrorKind::kIo;
  BatchNormParams v;
  v.outer = getInt(p, "outer", where, io);
  v.channels = getInt(p, "channels", where, io);
  v.inner = getInt(p, "inner", where, io);
  spec.params = v;
}

void checkParamsBatchNorm(const KernelSpec& s) {
  // The kernel reads x and y as outer * channels * inner elements and each statistic as
  // `channels`: all must be what the key's shapes give.
  if (!(paramsAs<BatchNormParams>(s) == batchNormParams(s.key)))
    paramsMismatch(s, "outer, channels or inner differ from the key's shapes");
}

std::string opInfoInputNameBatchNorm(size_t i, size_t) {
  // aclnnBatchNorm's names.
  static constexpr const char* kNames[] = {"input", "weight", "bias", "runningMean", "runningVar"};
  return i < 5 ? kNames[i] : "input";
}

}  // namespace gearbox::ops
