// The per-shape "compile" of one kernel: every decision that depends on the static shapes is
// taken here once (code path, loop bounds, strides, thread split), so the executor's run path
// does no shape work and allocates nothing.
#include "compiler/kernel_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "compiler/kernel_name.h"
#include "compiler/kernel_params_text.h"
#include "compiler/ops/op_hooks.h"
#include "graph/error.h"

namespace gearbox {

// ---- KernelKey ------------------------------------------------------------------------------

bool KernelKey::operator==(const KernelKey& o) const {
  return kind == o.kind && dtype == o.dtype && format == o.format && inputs == o.inputs &&
         attrs == o.attrs && threads == o.threads;
}

size_t KernelKey::hash() const {
  // boost::hash_combine-style mixing: every field contributes, and the order of inputs matters.
  uint64_t h = 0x243F6A8885A308D3ull;
  auto mix = [&h](uint64_t v) { h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2); };
  mix(static_cast<uint64_t>(kind));
  mix(static_cast<uint64_t>(dtype));
  mix(std::hash<std::string>{}(format));
  mix(inputs.size());
  for (const TensorType& t : inputs) {
    mix(static_cast<uint64_t>(t.dtype));
    mix(t.shape.hash());
  }
  mix(attrs.hash());
  mix(static_cast<uint64_t>(threads));
  return static_cast<size_t>(h);
}

bool KernelKey::isStatic() const {
  // An expand's output is its target, which may name graph symbols its input does not have (a
  // [S, S] mask from a scalar): the key is static only once the target is.
  if (kind == OpKind::kExpand && attrs.shape && !attrs.shape->isStatic()) return false;
  return std::all_of(inputs.begin(), inputs.end(),
                     [](const TensorType& t) { return t.shape.isStatic(); });
}

std::string KernelKey::name() const {
  // One reserved string: one allocation per kernel compiled (this runs on every compile).
  std::string s;
  s.reserve(96);
  appendKernelName(s, kind, dtype, format, inputs, attrs, threads);
  return s;
}

namespace {

// Completes a key whose inputs are already set. `where` describes the op for the one error
// this can raise; it is only called then, because keys are built on every compile and every
// eager dispatch.
template <typename Where>
void finishKey(KernelKey& key, OpKind kind, const Attrs& attrs, const Where& where) {
  key.kind = kind;
  key.format = "ND";
  key.attrs = attrs;
  key.dtype = key.inputs.empty() ? DType::kF32 : key.inputs[0].dtype;
  if (attrs.shape && !key.inputs.empty() && kind == OpKind::kReshape) {
    // A named dim of a reshape target means "the input's dim here": the key records the size
    // when it is static, else kCopyInputDim, so the key (and its name) never holds a symbol.
    Shape& target = *key.attrs.shape;
    const Shape& in = key.inputs[0].shape;
    for (int i = 0; i < target.rank(); ++i)
      if (isSymbolDim(target[i]))
        target[i] = (i < in.rank() && in[i] >= 0) ? in[i] : i < in.rank() ? kCopyInputDim : kAnyDim;
  } else if (attrs.shape) {
    // An expand target's names are symbols of the graph: unknown to a key until its output is
    // (resolveReshapeTarget then makes the output the target).
    Shape& target = *key.attrs.shape;
    for (int i = 0; i < target.rank(); ++i)
      if (isSymbolDim(target[i])) target[i] = kAnyDim;
  }
  if (attrs.dim && !key.inputs.empty()) {
    const Shape& s = key.inputs[0].shape;
    const int64_t r = s.rank(), d = *attrs.dim;
    if (r == 0 || d < -r || d >= r)
      s.wrapDim(d, fmt::format("{}: attribute dim", where()));  // throws the usual message
    key.attrs.dim = d < 0 ? d + r : d;
  }
}

template <typename Where>
KernelKey buildKey(OpKind kind, std::vector<TensorType> inputs, const Attrs& attrs,
                   const Where& where) {
  KernelKey key;
  key.inputs = std::move(inputs);
  finishKey(key, kind, attrs, where);
  return key;
}

}  // namespace

void resolveReshapeTarget(KernelKey& key, const Shape& out) {
  if (!key.attrs.shape || !out.isStatic()) return;
  if (key.kind == OpKind::kExpand) {
    // Broadcasting the input to its output is the whole expand.
    for (const TensorType& t : key.inputs)
      if (!t.shape.isStatic()) return;
    key.attrs.shape = out;
    return;
  }
  if (!key.isStatic()) return;
  // Targets whose names resolved positionally keep their spelling (-1 stays -1 in the name).
  const Shape& target = *key.attrs.shape;
  bool positional = target.rank() == out.rank();
  for (int i = 0; positional && i < target.rank(); ++i)
    positional = target[i] == kAnyDim || target[i] == out[i];
  if (!positional) key.attrs.shape = out;
}

void makeKernelKeyInto(KernelKey& key, const Graph& g, std::span<const TensorType> types,
                       NodeId node) {
  const Node& n = g.node(node);
  key.inputs.clear();
  for (ValueId v : n.inputs) key.inputs.push_back(types[v]);
  finishKey(key, n.kind, n.attrs, [&] { return g.describeNode(node); });
  // A reshape target may name dims anywhere in its input (or expressions of them); once the
  // output is known its sizes are the target, so the key never depends on how it was spelled.
  if (n.attrs.shape && static_cast<size_t>(n.output) < types.size())
    resolveReshapeTarget(key, types[n.output].shape);
  // A Const has no inputs; its dtype is its data's.
  if (n.kind == OpKind::kConst && n.constant) key.dtype = n.constant->dtype();
}

KernelKey makeKernelKey(OpKind kind, const std::vector<TensorType>& inputs, const Attrs& attrs,
                        int threads) {
  // Keys built from graph nodes hold normalized attributes already (GraphBuilder::op); keys
  // built from loose attributes get their defaults here, so both name the same kernel.
  Attrs full = attrs;
  normalizeAttrs(kind, full, opKernelName(kind));
  KernelKey key = buildKey(kind, inputs, full, [kind] { return std::string(opKernelName(kind)); });
  key.threads = threads;
  return key;
}

// ---- compile --------------------------------------------------------------------------------

namespace {

TensorType inferOutput(const KernelKey& key, const std::string& name) {
  InferContext ctx{key.kind, key.inputs, key.attrs, nullptr, -1, name};
  return inferNode(ctx);
}

KernelSpec compileSpec(const KernelKey& key) {
  KernelSpec spec;
  spec.key = key;
  spec.name = key.name();
  if (key.kind == OpKind::kConst)
    fail(ErrorKind::kShape, "kernel {}: const is data, not a kernel", spec.name);
  spec.output = inferOutput(key, spec.name);
  if (!key.isStatic()) {
    // Shape-generic: nothing can be decided until the runtime shapes are known.
    spec.generic = true;
    return spec;
  }
  // Every thread split the op's file decides (ops::decideTasks) is capped by the key's threads.
  const ops::TaskCapScope cap(key.threads);
  ops::compileStatic(spec);  // the op's own file: compiler/ops/<op>.cpp
  return spec;
}

}  // namespace

std::string kernelParamsJson(const KernelSpec& spec) {
  return ops::paramsToJson(spec).dump();
}

std::shared_ptr<const KernelSpec> compileKernelSpec(const KernelKey& key) {
  return std::make_shared<const KernelSpec>(compileSpec(key));
}

KernelSpec specializeKernelSpec(const KernelSpec& generic, const std::vector<TensorType>& inputs,
                                const Shape* output) {
  KernelKey key = generic.key;
  // A generic reshape key cannot resolve its target alone (it may name dims by symbol); the
  // caller's output shape, inferred against the graph, is the target.
  if (key.attrs.shape && output) {
    // The key's inputs become concrete below; resolve against them.
    for (size_t i = 0; i < inputs.size() && i < key.inputs.size(); ++i) key.inputs[i] = inputs[i];
    resolveReshapeTarget(key, *output);
  }
  if (inputs.size() != key.inputs.size())
    fail(ErrorKind::kShape, "kernel {}: expects {} inputs, got {}", generic.name, key.inputs.size(),
         inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].shape.isStatic())
      fail(ErrorKind::kShape, "kernel {}: input {} has non-static shape {} at run time",
           generic.name, i, inputs[i].shape.toString());
    if (inputs[i].dtype != key.inputs[i].dtype ||
        inputs[i].shape.rank() != key.inputs[i].shape.rank())
      fail(ErrorKind::kShape, "kernel {}: input {} is {} but the kernel was built for {}",
           generic.name, i, inputs[i].toString(), key.inputs[i].toString());
    // The static dims of a generic kernel are promises the runtime shapes must keep.
    for (int d = 0; d < inputs[i].shape.rank(); ++d)
      if (key.inputs[i].shape[d] >= 0 && key.inputs[i].shape[d] != inputs[i].shape[d])
        fail(ErrorKind::kShape, "kernel {}: input {} dim {} is {} but the kernel was built for {}",
             generic.name, i, d, inputs[i].shape[d], key.inputs[i].shape[d]);
    key.inputs[i] = inputs[i];
  }
  KernelSpec spec = compileSpec(key);
  // Keep the generic kernel's name: this is that kernel running on concrete shapes, not a new
  // compiled kernel.
  spec.name = generic.name;
  return spec;
}

}  // namespace gearbox
