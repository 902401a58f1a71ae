#pragma once
// Helpers of the window ops' compiler files (conv2d, max_pool2d, avg_pool2d, mean): their
// params are flat integer records, written to and read from a kernel descriptor field by field
// and checked by re-deriving them from the key (a loaded spec must equal a fresh compile).

#include <utility>

#include "compiler/ops/op_hooks.h"
#include "graph/ops/window.h"

namespace gearbox::ops {

// The context shape inference runs with on a key (its attributes were validated when the key's
// output was inferred, so the readers below do not fail on it).
inline InferContext keyContext(const KernelKey& key) {
  return InferContext{key.kind, key.inputs, key.attrs, nullptr, -1, opKernelName(key.kind)};
}

// Each field of a flat params struct: {name, pointer}.
template <typename P, size_t N>
using FieldList = std::array<std::pair<const char*, int64_t P::*>, N>;

template <typename P, size_t N>
void flatToJson(const P& p, const FieldList<P, N>& fields, Json& j) {
  for (const auto& [name, member] : fields) j[name] = p.*member;
}

template <typename P, size_t N>
P flatFromJson(const Json& j, const FieldList<P, N>& fields) {
  P p;
  for (const auto& [name, member] : fields)
    p.*member = getInt(j, name, "kernel.params", ErrorKind::kIo);
  return p;
}

// A loaded spec's params must be exactly what compiling its key gives: every loop bound and
// offset the kernel uses comes from them.
template <typename P>
void checkByRecompile(const KernelSpec& loaded, void (*compile)(KernelSpec&)) {
  const P& got = paramsAs<P>(loaded);
  KernelSpec fresh;
  fresh.key = loaded.key;
  fresh.output = loaded.output;
  compile(fresh);
  if (!(std::get<P>(fresh.params) == got)) paramsMismatch(loaded, "differs from its key");
}

}  // namespace gearbox::ops
