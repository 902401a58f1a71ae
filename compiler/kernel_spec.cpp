// The per-shape "compile" of one kernel: every decision that depends on the static shapes is
// taken here once (code path, loop bounds, strides, thread split), so the executor's run path
// does no shape work and allocates nothing.
#include "compiler/kernel_spec.h"

#include <fmt/format.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>

#include "graph/error.h"

namespace gearbox {

// ---- KernelKey ------------------------------------------------------------------------------

bool KernelKey::operator==(const KernelKey& o) const {
  return kind == o.kind && dtype == o.dtype && format == o.format && inputs == o.inputs &&
         attrs == o.attrs;
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
  mix(attrs.dim.has_value());
  mix(static_cast<uint64_t>(attrs.dim.value_or(0)));
  return static_cast<size_t>(h);
}

bool KernelKey::isStatic() const {
  return std::all_of(inputs.begin(), inputs.end(),
                     [](const TensorType& t) { return t.shape.isStatic(); });
}

std::string KernelKey::name() const {
  // Appended by hand into one reserved string: one allocation per kernel compiled, and no
  // format-string parsing (this runs on every compile).
  std::string s;
  s.reserve(96);
  auto number = [&s](int64_t v) {
    const fmt::format_int f(v);
    s.append(f.data(), f.size());
  };
  s += opKernelName(kind);
  s += '_';
  s += dtypeKernelName(dtype);
  s += '_';
  s += format;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape& shape = inputs[i].shape;
    s += i == 0 ? "_" : "__";
    if (shape.rank() == 0) s += 's';
    for (int d = 0; d < shape.rank(); ++d) {
      if (d) s += '_';
      // Dynamic dims appear in shape-generic kernel names as "-1" like GE's unknown dims.
      number(shape[d] >= 0 ? shape[d] : -1);
    }
    // Index inputs (i32 or i64) differ from the data dtype; naming their dtype keeps the name
    // unique per key, since an i32 and an i64 index compile to different kernels.
    if (inputs[i].dtype != dtype) {
      s += '_';
      s += dtypeKernelName(inputs[i].dtype);
    }
  }
  if (attrs.dim) {
    s += "__dim";
    number(*attrs.dim);
  }
  return s;
}

namespace {

bool usesDim(OpKind kind) {
  return kind == OpKind::kIndexSelect || kind == OpKind::kCat || kind == OpKind::kCatGather;
}

// Completes a key whose inputs are already set. `where` describes the op for the one error
// this can raise; it is only called then, because keys are built on every compile and every
// eager dispatch.
template <typename Where>
void finishKey(KernelKey& key, OpKind kind, const Attrs& attrs, const Where& where) {
  key.kind = kind;
  key.format = "ND";
  key.attrs = attrs;
  key.dtype = key.inputs.empty() ? DType::kF32 : key.inputs[0].dtype;
  if (usesDim(kind) && attrs.dim && !key.inputs.empty()) {
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

void makeKernelKeyInto(KernelKey& key, const Graph& g, std::span<const TensorType> types,
                       NodeId node) {
  const Node& n = g.node(node);
  key.inputs.clear();
  for (ValueId v : n.inputs) key.inputs.push_back(types[v]);
  finishKey(key, n.kind, n.attrs, [&] { return g.describeNode(node); });
  // A Const has no inputs; its dtype is its data's.
  if (n.kind == OpKind::kConst && n.constant) key.dtype = n.constant->dtype();
}

KernelKey makeKernelKey(OpKind kind, const std::vector<TensorType>& inputs, const Attrs& attrs) {
  return buildKey(kind, inputs, attrs, [kind] { return std::string(opKernelName(kind)); });
}

// ---- compile --------------------------------------------------------------------------------

namespace {

int64_t product(const Shape& s, int begin, int end) {
  int64_t p = 1;
  for (int i = begin; i < end; ++i) p *= s[i];
  return p;
}

// The thread split is a policy over the work estimate, not part of the kernels' math: one task
// below the threshold (thread start-up would cost more than it saves), then one task per
// threshold's worth of work, never more than the arena can run at once.
int decideTasks(double work, double threshold) {
  if (!(work >= 2 * threshold)) return 1;
  const int maxTasks = std::max(1, tbb::this_task_arena::max_concurrency());
  return static_cast<int>(std::min<double>(maxTasks, std::floor(work / threshold)));
}

TensorType inferOutput(const KernelKey& key, const std::string& name) {
  InferContext ctx{key.kind, key.inputs, key.attrs, nullptr, -1, name};
  return inferNode(ctx);
}

// True when `small`, after dropping its leading 1s, equals the trailing dims of `out` (at least
// one dim): then it is one contiguous row of `cols` elements repeated along the leading dims.
bool isRowOf(const Shape& small, const Shape& out, int64_t* cols) {
  int first = 0;
  while (first < small.rank() && small[first] == 1) ++first;
  const int k = small.rank() - first;
  if (k < 1 || k > out.rank()) return false;
  for (int i = 0; i < k; ++i)
    if (small[first + i] != out[out.rank() - k + i]) return false;
  *cols = product(small, first, small.rank());
  return true;
}

AddParams compileAdd(const Shape& a, const Shape& b, const Shape& out) {
  AddParams p;
  p.numel = out.numel();
  const int64_t na = a.numel(), nb = b.numel();
  int64_t cols = 0;
  // Equal element counts imply identical layouts: broadcasting can only add size-1 dims then.
  if (p.numel == 0 || (na == p.numel && nb == p.numel)) {
    p.path = AddParams::Path::kSameShape;
  } else if (nb == 1 && na == p.numel) {
    p.path = AddParams::Path::kScalarB;
  } else if (na == 1 && nb == p.numel) {
    p.path = AddParams::Path::kScalarA;
  } else if (na == p.numel && isRowOf(b, out, &cols)) {
    p.path = AddParams::Path::kRowB;
    p.cols = cols;
    p.rows = p.numel / cols;
  } else if (nb == p.numel && isRowOf(a, out, &cols)) {
    p.path = AddParams::Path::kRowA;
    p.cols = cols;
    p.rows = p.numel / cols;
  } else {
    p.path = AddParams::Path::kGeneral;
    // Right-align both operands with the output; a broadcast dim gets stride 0.
    const auto aStr = contiguousStrides(a), bStr = contiguousStrides(b);
    int64_t dims[kMaxRank], as[kMaxRank], bs[kMaxRank];
    int r = 0;
    for (int i = 0; i < out.rank(); ++i) {
      if (out[i] == 1) continue;  // size-1 dims never move an index
      const int ka = i - (out.rank() - a.rank()), kb = i - (out.rank() - b.rank());
      dims[r] = out[i];
      as[r] = (ka >= 0 && a[ka] != 1) ? aStr[ka] : 0;
      bs[r] = (kb >= 0 && b[kb] != 1) ? bStr[kb] : 0;
      // Coalesce with the previous dim when both operands step through them as one dim; fewer
      // dims mean longer inner loops.
      if (r > 0 && as[r - 1] == as[r] * dims[r] && bs[r - 1] == bs[r] * dims[r]) {
        dims[r - 1] *= dims[r];
        as[r - 1] = as[r];
        bs[r - 1] = bs[r];
      } else {
        ++r;
      }
    }
    p.rank = r;
    for (int i = 0; i < r; ++i) {
      p.outDims[i] = dims[i];
      p.aStrides[i] = as[i];
      p.bStrides[i] = bs[i];
    }
  }
  return p;
}

MatMulParams compileMatMul(const Shape& a, const Shape& b, const Shape& out) {
  MatMulParams p;
  const int ra = a.rank(), rb = b.rank(), ro = out.rank();
  p.m = a[ra - 2];
  p.k = a[ra - 1];
  p.n = b[rb - 1];
  p.batch = product(out, 0, ro - 2);
  p.aOffsets.resize(p.batch);
  p.bOffsets.resize(p.batch);
  // Each operand's batch offset: walk the output's batch index and map it right-aligned onto
  // the operand's batch dims, where a size-1 dim always reads batch 0.
  int64_t idx[kMaxRank] = {};
  for (int64_t bi = 0; bi < p.batch; ++bi) {
    int64_t rem = bi;
    for (int d = ro - 3; d >= 0; --d) {
      idx[d] = rem % out[d];
      rem /= out[d];
    }
    auto offset = [&](const Shape& s, int rs, int64_t matrixElems) {
      int64_t lin = 0;
      for (int d = 0; d < rs - 2; ++d) {
        const int od = d + (ro - rs);
        lin = lin * s[d] + (s[d] == 1 ? 0 : idx[od]);
      }
      return lin * matrixElems;
    };
    p.aOffsets[bi] = offset(a, ra, p.m * p.k);
    p.bOffsets[bi] = offset(b, rb, p.k * p.n);
  }
  // When every batch uses the same B and A's batches are contiguous ([B, M, K] x [K, N]), the
  // batch folds into M: one tall GEMM instead of many short ones.
  if (p.batch > 1) {
    bool fold = true;
    for (int64_t bi = 0; bi < p.batch && fold; ++bi)
      fold = p.bOffsets[bi] == p.bOffsets[0] && p.aOffsets[bi] == bi * p.m * p.k;
    if (fold) {
      p.m *= p.batch;
      p.batch = 1;
      p.aOffsets.resize(1);
      p.bOffsets.resize(1);
    }
  }
  return p;
}

// Chooses MatMul's split: whole batches per task when there are enough of them, else blocks of
// M rows (each task runs one GEMM on its rows). Returns the task count actually usable.
int splitMatMul(MatMulParams& p, int tasks) {
  p.rowsPerTask = 0;
  if (tasks <= 1 || p.batch >= tasks) return tasks;
  const int64_t blocksPerBatch = (tasks + p.batch - 1) / p.batch;
  int64_t rows = (p.m + blocksPerBatch - 1) / blocksPerBatch;
  // Multiples of 8 rows keep Eigen's register blocks whole in every task but the last.
  if (p.m >= 16) rows = (rows + 7) / 8 * 8;
  if (rows >= p.m) return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(tasks, p.batch)));
  p.rowsPerTask = rows;
  const int64_t items = p.batch * ((p.m + rows - 1) / rows);
  return static_cast<int>(std::min<int64_t>(tasks, items));
}

bool useStreamingStores(double outBytes, double rowBytes) {
  return outBytes >= kStreamingStoreBytes && rowBytes >= kStreamingRowBytes;
}

void compileStatic(KernelSpec& spec) {
  const KernelKey& key = spec.key;
  const Shape& out = spec.output.shape;
  const double esize = static_cast<double>(dtypeSize(key.dtype));
  const double outBytes = static_cast<double>(out.numel()) * esize;
  const int d = static_cast<int>(key.attrs.dim.value_or(0));
  switch (key.kind) {
    case OpKind::kConst: break;
    case OpKind::kAdd: {
      const Shape& a = key.inputs[0].shape;
      const Shape& b = key.inputs[1].shape;
      AddParams p = compileAdd(a, b, out);
      using Path = AddParams::Path;
      const bool rows = p.path == Path::kRowA || p.path == Path::kRowB;
      if (p.path != Path::kGeneral)
        p.streamingStores =
            useStreamingStores(outBytes, rows ? static_cast<double>(p.cols) * esize : outBytes);
      spec.params = p;
      spec.work = static_cast<double>(a.numel() + b.numel()) * esize + outBytes;
      spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
      return;
    }
    case OpKind::kMatMul: {
      MatMulParams p = compileMatMul(key.inputs[0].shape, key.inputs[1].shape, out);
      spec.work = 2.0 * static_cast<double>(p.batch) * static_cast<double>(p.m) *
                  static_cast<double>(p.n) * static_cast<double>(p.k);
      spec.tasks = splitMatMul(p, decideTasks(spec.work, kParallelFlopThreshold));
      spec.params = std::move(p);
      return;
    }
    case OpKind::kIndexSelect: {
      const Shape& in = key.inputs[0].shape;
      GatherParams p;
      p.outer = product(in, 0, d);
      p.dimSize = in[d];
      p.count = key.inputs[1].shape[0];
      p.inner = product(in, d + 1, in.rank());
      p.indexType = key.inputs[1].dtype;
      p.streamingStores = useStreamingStores(outBytes, p.inner * esize);
      spec.params = p;
      spec.work = 2 * outBytes + static_cast<double>(p.count * dtypeSize(p.indexType));
      spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
      return;
    }
    case OpKind::kCat: {
      CatParams p;
      const int64_t inner = product(out, d + 1, out.rank());
      p.outer = product(out, 0, d);
      for (const TensorType& t : key.inputs) p.rowElems.push_back(t.shape[d] * inner);
      p.outRowElems = out[d] * inner;
      // Every segment must be long enough to stream; one short input would mix store kinds.
      const int64_t shortest = *std::min_element(p.rowElems.begin(), p.rowElems.end());
      p.streamingStores = useStreamingStores(outBytes, static_cast<double>(shortest) * esize);
      spec.params = std::move(p);
      spec.work = 2 * outBytes;
      spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
      return;
    }
    case OpKind::kCatGather: {
      CatGatherParams p;
      const size_t n = key.inputs.size() - 1;
      p.outer = product(out, 0, d);
      p.inner = product(out, d + 1, out.rank());
      p.count = key.inputs[n].shape[0];
      p.indexType = key.inputs[n].dtype;
      for (size_t i = 0; i < n; ++i) p.dimSizes.push_back(key.inputs[i].shape[d]);
      p.streamingStores = useStreamingStores(outBytes, static_cast<double>(p.inner) * esize);
      spec.params = std::move(p);
      spec.work = 2 * outBytes + static_cast<double>(p.count * dtypeSize(p.indexType));
      spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
      return;
    }
  }
  fail(ErrorKind::kShape, "kernel {}: {} is not a kernel", spec.name, opTextName(key.kind));
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
  compileStatic(spec);
  return spec;
}

}  // namespace

std::shared_ptr<const KernelSpec> compileKernelSpec(const KernelKey& key) {
  return std::make_shared<const KernelSpec>(compileSpec(key));
}

KernelSpec specializeKernelSpec(const KernelSpec& generic, const std::vector<TensorType>& inputs) {
  KernelKey key = generic.key;
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
