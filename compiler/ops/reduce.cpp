// The reductions' shared compile step and serialisation (compiler/ops/reduce.h).
#include "compiler/ops/reduce.h"

#include "compiler/ops/window_params.h"

namespace gearbox::ops {
namespace {

constexpr FieldList<ReduceParams, 5> kReduceFields{{
    {"outer", &ReduceParams::outer},
    {"reduce", &ReduceParams::reduce},
    {"inner", &ReduceParams::inner},
    {"general", &ReduceParams::general},
    {"mask", &ReduceParams::mask},
}};

}  // namespace

void compileReduce(KernelSpec& spec, int axesSlot) {
  const Shape& x = spec.key.inputs[0].shape;
  const int r = x.rank();
  ReduceParams p;
  p.rank = r;
  for (int64_t a : spec.key.attrs.ints(axesSlot)) p.mask |= int64_t{1} << (a < 0 ? a + r : a);
  int first = r, last = -1;
  for (int d = 0; d < r; ++d) {
    p.dims[d] = x[d];
    if (p.mask >> d & 1) {
      first = std::min(first, d);
      last = d;
    }
  }
  bool run = true;
  for (int d = first; d <= last; ++d) run = run && (p.mask >> d & 1);
  p.general = run ? 0 : 1;
  if (run) {
    p.outer = product(x, 0, first);
    p.reduce = product(x, first, last + 1);
    p.inner = product(x, last + 1, r);
  }
  spec.work = elementBytes(spec.key.inputs[0]);
  spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
  spec.params = p;
}

KernelCost reduceCost(const KernelKey& key) {
  // Bandwidth-bound: one add per input element, the input read once.
  const double in = elementBytes(key.inputs[0]);
  return KernelCost{in / 4.0, in + elementBytes(inferNode(keyContext(key)))};
}

void reduceParamsToJson(const KernelSpec& spec, Json& j) {
  const ReduceParams& p = paramsAs<ReduceParams>(spec);
  flatToJson(p, kReduceFields, j);
  j["rank"] = p.rank;
  j["dims"] = intArray(p.dims);
}

void reduceParamsFromJson(const Json& j, KernelSpec& spec) {
  ReduceParams p = flatFromJson(j, kReduceFields);
  p.rank = getInt(j, "rank", "kernel.params", ErrorKind::kIo);
  fixedIntArray(j, "dims", p.dims);
  spec.params = p;
}

}  // namespace gearbox::ops
