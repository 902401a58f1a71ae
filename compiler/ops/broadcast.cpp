// The broadcast machinery of binary elementwise ops (compiler/ops/broadcast.h).
#include "compiler/ops/broadcast.h"

namespace gearbox::ops {
namespace {

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

constexpr std::pair<AddParams::Path, const char*> kPaths[] = {
    {AddParams::Path::kSameShape, "same_shape"}, {AddParams::Path::kScalarB, "scalar_b"},
    {AddParams::Path::kScalarA, "scalar_a"},     {AddParams::Path::kRowB, "row_b"},
    {AddParams::Path::kRowA, "row_a"},           {AddParams::Path::kGeneral, "general"},
};

// Largest element offset an operand is read at in the general path, or -1 on overflow.
int64_t maxGeneralOffset(const AddParams& a, const int64_t* strides) {
  int64_t off = 0;
  for (int i = 0; i < a.rank; ++i) {
    const int64_t step = checkedProduct({a.outDims[i] - 1, strides[i]});
    if (step < 0 || __builtin_add_overflow(off, step, &off)) return -1;
  }
  return off;
}

}  // namespace

BinaryParams compileBroadcast(const Shape& a, const Shape& b, const Shape& out) {
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

void compileBinary(KernelSpec& spec) {
  const KernelKey& key = spec.key;
  const Shape& out = spec.output.shape;
  const double esize = static_cast<double>(dtypeSize(key.dtype));
  const double outBytes = static_cast<double>(out.numel()) * esize;
  const Shape& a = key.inputs[0].shape;
  const Shape& b = key.inputs[1].shape;
  AddParams p = compileBroadcast(a, b, out);
  using Path = AddParams::Path;
  const bool rows = p.path == Path::kRowA || p.path == Path::kRowB;
  if (p.path != Path::kGeneral)
    p.streamingStores =
        useStreamingStores(outBytes, rows ? static_cast<double>(p.cols) * esize : outBytes);
  spec.params = p;
  spec.work = static_cast<double>(a.numel() + b.numel()) * esize + outBytes;
  spec.tasks = decideTasks(spec.work, kParallelByteThreshold);
}

KernelCost binaryCost(const KernelKey& key) {
  // One operation per output element; both operands read once, the output written once.
  TensorType out{key.dtype, {}};
  const int ra = key.inputs[0].shape.rank(), rb = key.inputs[1].shape.rank();
  const int r = std::max(ra, rb);
  for (int i = 0; i < r; ++i) {
    const int ka = i - (r - ra), kb = i - (r - rb);
    const int64_t da = ka >= 0 ? key.inputs[0].shape[ka] : 1;
    const int64_t db = kb >= 0 ? key.inputs[1].shape[kb] : 1;
    out.shape.push(da == 1 ? db : da);
  }
  const double outBytes = elementBytes(out);
  return KernelCost{outBytes / static_cast<double>(dtypeSize(key.dtype)),
                    elementBytes(key.inputs[0]) + elementBytes(key.inputs[1]) + outBytes};
}

void binaryParamsToJson(const KernelSpec& spec, Json& p) {
  const AddParams& v = paramsAs<AddParams>(spec);
  for (const auto& [path, name] : kPaths)
    if (path == v.path) p["path"] = name;
  p["numel"] = v.numel;
  p["rows"] = v.rows;
  p["cols"] = v.cols;
  p["rank"] = v.rank;
  p["out_dims"] = intArray(v.outDims);
  p["a_strides"] = intArray(v.aStrides);
  p["b_strides"] = intArray(v.bStrides);
}

void binaryParamsFromJson(const Json& p, KernelSpec& spec) {
  const std::string where = "kernel.params";
  const ErrorKind io = ErrorKind::kIo;
  AddParams a;
  const std::string path = getString(p, "path", where, io);
  bool known = false;
  for (const auto& [value, name] : kPaths) {
    if (path == name) {
      a.path = value;
      known = true;
    }
  }
  if (!known)
    fail(io, "field 'kernel.params.path': unknown {} path '{}'", opKernelName(spec.key.kind), path);
  a.numel = getInt(p, "numel", where, io);
  a.rows = getInt(p, "rows", where, io);
  a.cols = getInt(p, "cols", where, io);
  const int64_t rank = getInt(p, "rank", where, io);
  if (rank < 0 || rank > kMaxRank) fail(io, "field 'kernel.params.rank' out of range: {}", rank);
  a.rank = static_cast<int>(rank);
  fixedIntArray(p, "out_dims", a.outDims);
  fixedIntArray(p, "a_strides", a.aStrides);
  fixedIntArray(p, "b_strides", a.bStrides);
  spec.params = a;
}

void checkBinaryParams(const KernelSpec& s) {
  const AddParams& a = paramsAs<AddParams>(s);
  const int64_t na = s.key.inputs[0].shape.numel(), nb = s.key.inputs[1].shape.numel();
  const int64_t numel = s.output.shape.numel();
  auto bad = [&](const char* what) { paramsMismatch(s, what); };
  if (a.numel != numel) bad("numel differs from the output's element count");
  switch (a.path) {
    case AddParams::Path::kSameShape:
      if (numel != 0 && (na != numel || nb != numel)) bad("same_shape with different sizes");
      return;
    case AddParams::Path::kScalarB:
      if (nb != 1 || na != numel) bad("scalar_b sizes");
      return;
    case AddParams::Path::kScalarA:
      if (na != 1 || nb != numel) bad("scalar_a sizes");
      return;
    case AddParams::Path::kRowB:
    case AddParams::Path::kRowA: {
      const bool rowB = a.path == AddParams::Path::kRowB;
      const int64_t full = rowB ? na : nb, row = rowB ? nb : na;
      if (a.cols <= 0 || checkedProduct({a.rows, a.cols}) != numel || full != numel ||
          row != a.cols)
        bad("row broadcast sizes");
      return;
    }
    case AddParams::Path::kGeneral: {
      int64_t p = 1;
      for (int i = 0; i < a.rank; ++i) {
        if (a.outDims[i] < 1 || a.aStrides[i] < 0 || a.bStrides[i] < 0) bad("general dims");
        p = checkedProduct({p, a.outDims[i]});
      }
      if (p != numel) bad("general dims do not multiply to the output size");
      const int64_t ma = maxGeneralOffset(a, a.aStrides), mb = maxGeneralOffset(a, a.bStrides);
      if (numel > 0 && (ma < 0 || mb < 0 || ma >= na || mb >= nb)) bad("general strides");
      return;
    }
  }
  bad("unknown path");
}

}  // namespace gearbox::ops
