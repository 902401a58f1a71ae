// Dispatch from an OpKind to its compiler hooks, generated from graph/ops.def: adding an op adds
// its cases here without editing this file.
#include "compiler/ops/op_hooks.h"

namespace gearbox {
namespace ops {

#define GEARBOX_OP_CASE(e, call) \
  case OpKind::k##e: return call;

void compileStatic(KernelSpec& spec) {
  switch (spec.key.kind) {
#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index) \
  GEARBOX_OP_CASE(e, compile##e(spec))
#include "graph/ops.def"
#undef GEARBOX_OP
  }
}

Json paramsToJson(const KernelSpec& spec) {
  Json p = Json::object();
  if (std::holds_alternative<std::monostate>(spec.params)) {
    p["kind"] = "none";
    return p;
  }
  p["kind"] = opKernelName(spec.key.kind);
  switch (spec.key.kind) {
#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index) \
  GEARBOX_OP_CASE(e, (paramsToJson##e(spec, p), p))
#include "graph/ops.def"
#undef GEARBOX_OP
  }
  return p;
}

void paramsFromJson(const Json& p, KernelSpec& spec) {
  const std::string kind = getString(p, "kind", "kernel.params", ErrorKind::kIo);
  if (kind == "none") {
    spec.params = std::monostate{};
    return;
  }
  if (kind != opKernelName(spec.key.kind)) {
    if (!parseOpKernelName(kind) || kind == "Const")
      fail(ErrorKind::kIo, "field 'kernel.params.kind': unknown params kind '{}'", kind);
    fail(ErrorKind::kIo, "params kind does not match op {}", opKernelName(spec.key.kind));
  }
  switch (spec.key.kind) {
#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index) \
  GEARBOX_OP_CASE(e, paramsFromJson##e(p, spec))
#include "graph/ops.def"
#undef GEARBOX_OP
  }
}

void checkParams(const KernelSpec& spec) {
  switch (spec.key.kind) {
#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index) \
  GEARBOX_OP_CASE(e, checkParams##e(spec))
#include "graph/ops.def"
#undef GEARBOX_OP
  }
}

std::string opInfoInputName(OpKind kind, size_t i, size_t n) {
  switch (kind) {
#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index) \
  GEARBOX_OP_CASE(e, opInfoInputName##e(i, n))
#include "graph/ops.def"
#undef GEARBOX_OP
  }
  return "input";
}

}  // namespace ops

KernelCost kernelCost(const KernelKey& key) {
  switch (key.kind) {
#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index) \
  GEARBOX_OP_CASE(e, ops::kernelCost##e(key))
#include "graph/ops.def"
#undef GEARBOX_OP
  }
  return {};
}

CompileCostTerms compileCostTerms(OpKind kind) {
  switch (kind) {
#define GEARBOX_OP(e, text, kernel, minIn, maxIn, attrList, index) \
  GEARBOX_OP_CASE(e, ops::compileCost##e())
#include "graph/ops.def"
#undef GEARBOX_OP
  }
  return {};
}

}  // namespace gearbox
