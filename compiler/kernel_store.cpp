// Kernel descriptors, the kernel_meta directory, bundles, op-info records and precompile.
// See compiler/kernel_store.h for the formats and docs/kernel-meta.md for the workflows.
#include "compiler/kernel_store.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <thread>
#include <unordered_set>

#include "compiler/compile_log.h"
#include "compiler/kernel_validate.h"
#include "graph/error.h"
#include "graph/json_limits.h"
#include "graph/npy.h"

namespace gearbox {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// ---- small helpers ---------------------------------------------------------------------------

std::string fnv1a64Hex(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", h);
}

namespace {

// Formats a system-clock time; `utc` selects gmtime over localtime. Returns the seconds part
// via strftime and the microseconds separately so callers choose how to join them.
std::tm toTm(std::chrono::system_clock::time_point t, bool utc) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  if (utc) {
    gmtime_r(&secs, &tm);
  } else {
    localtime_r(&secs, &tm);
  }
  return tm;
}

int64_t microsOf(std::chrono::system_clock::time_point t) {
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  return ((us % 1000000) + 1000000) % 1000000;
}

std::string strftimeString(const std::tm& tm, const char* format) {
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, format, &tm);
  return std::string(buf, n);
}

// The timestamps of seed 003's layout are local time like the rest of a user's files.
std::string compactTimestamp(std::chrono::system_clock::time_point t, bool withMicros) {
  std::string s = strftimeString(toTm(t, false), "%Y%m%d%H%M%S");
  if (withMicros) s += fmt::format("{:06d}", microsOf(t));
  return s;
}

std::optional<OpKind> parseKernelOp(std::string_view name) {
  for (int i = 0; i < kOpCount; ++i) {
    const auto k = static_cast<OpKind>(i);
    if (opKernelName(k) == name) return k;
  }
  return std::nullopt;
}

std::optional<DType> parseKernelDType(std::string_view name) {
  for (DType t : {DType::kF32, DType::kI32, DType::kI64})
    if (dtypeKernelName(t) == name) return t;
  return std::nullopt;
}

// Field access with errors that name the field; `kind` is kIo for descriptors and bundles
// and kParse for op-info files.
const Json& field(const Json& j, const char* name, const std::string& where, ErrorKind kind) {
  if (!j.is_object())
    fail(kind, "{} is not a JSON object", where.empty() ? "the document" : "field '" + where + "'");
  auto it = j.find(name);
  if (it == j.end()) fail(kind, "missing field '{}{}{}'", where, where.empty() ? "" : ".", name);
  return *it;
}

std::string joinField(const std::string& where, const char* name) {
  return where.empty() ? std::string(name) : where + "." + name;
}

int64_t getInt(const Json& j, const char* name, const std::string& where, ErrorKind kind) {
  const Json& v = field(j, name, where, kind);
  if (!v.is_number_integer())
    fail(kind, "field '{}' must be an integer, got {}", joinField(where, name), v.dump());
  return v.get<int64_t>();
}

std::string getString(const Json& j, const char* name, const std::string& where, ErrorKind kind) {
  const Json& v = field(j, name, where, kind);
  if (!v.is_string())
    fail(kind, "field '{}' must be a string, got {}", joinField(where, name), v.dump());
  return v.get<std::string>();
}

const Json& getArray(const Json& j, const char* name, const std::string& where, ErrorKind kind) {
  const Json& v = field(j, name, where, kind);
  if (!v.is_array()) fail(kind, "field '{}' must be an array", joinField(where, name));
  return v;
}

std::vector<int64_t> getIntArray(const Json& j, const char* name, const std::string& where,
                                 ErrorKind kind) {
  const Json& a = getArray(j, name, where, kind);
  std::vector<int64_t> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_number_integer())
      fail(kind, "field '{}[{}]' must be an integer, got {}", joinField(where, name), i,
           a[i].dump());
    out.push_back(a[i].get<int64_t>());
  }
  return out;
}

Json shapeToJson(const Shape& s, bool symbolsByName) {
  Json a = Json::array();
  for (int64_t d : s) {
    if (symbolsByName && isSymbolDim(d)) {
      a.push_back(symbolName(d));
    } else {
      a.push_back(d >= 0 ? d : kAnyDim);
    }
  }
  return a;
}

Shape shapeFromJson(const Json& a, const std::string& where, ErrorKind kind) {
  if (!a.is_array()) fail(kind, "field '{}' must be an array", where);
  if (a.size() > static_cast<size_t>(kMaxRank))
    fail(kind, "field '{}' has rank {}, above the maximum of {}", where, a.size(), kMaxRank);
  Shape s;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].is_string()) {
      const std::string name = a[i].get<std::string>();
      if (name.empty()) fail(kind, "field '{}[{}]' is an empty symbol name", where, i);
      s.push(symbolDim(name));
    } else if (a[i].is_number_integer() && a[i].get<int64_t>() >= kAnyDim) {
      s.push(a[i].get<int64_t>());
    } else {
      fail(kind, "field '{}[{}]' must be a dim (integer >= -1 or a symbol name), got {}", where, i,
           a[i].dump());
    }
  }
  return s;
}

DType dtypeField(const Json& j, const char* name, const std::string& where, ErrorKind kind) {
  const std::string s = getString(j, name, where, kind);
  auto t = parseKernelDType(s);
  if (!t) fail(kind, "field '{}': unknown dtype '{}'", joinField(where, name), s);
  return *t;
}

// Multiplies non-negative extents; -1 on a negative factor or overflow, so a damaged file
// can never turn into a wrapped-around size.
int64_t checkedProduct(std::initializer_list<int64_t> factors) {
  int64_t p = 1;
  for (int64_t f : factors) {
    if (f < 0 || __builtin_mul_overflow(p, f, &p)) return -1;
  }
  return p;
}

int64_t dimsProduct(const Shape& s, int begin, int end) {
  int64_t p = 1;
  for (int i = begin; i < end; ++i) p = checkedProduct({p, s[i]});
  return p;
}

// ---- params <-> JSON -------------------------------------------------------------------------

constexpr std::pair<AddParams::Path, const char*> kAddPaths[] = {
    {AddParams::Path::kSameShape, "same_shape"}, {AddParams::Path::kScalarB, "scalar_b"},
    {AddParams::Path::kScalarA, "scalar_a"},     {AddParams::Path::kRowB, "row_b"},
    {AddParams::Path::kRowA, "row_a"},           {AddParams::Path::kGeneral, "general"},
};

template <size_t N>
Json intArray(const int64_t (&a)[N]) {
  Json j = Json::array();
  for (int64_t v : a) j.push_back(v);
  return j;
}

Json paramsToJson(const KernelSpec& spec) {
  Json p = Json::object();
  std::visit(
      [&p](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          p["kind"] = "none";
        } else if constexpr (std::is_same_v<T, AddParams>) {
          p["kind"] = "Add";
          for (const auto& [path, name] : kAddPaths)
            if (path == v.path) p["path"] = name;
          p["numel"] = v.numel;
          p["rows"] = v.rows;
          p["cols"] = v.cols;
          p["rank"] = v.rank;
          p["out_dims"] = intArray(v.outDims);
          p["a_strides"] = intArray(v.aStrides);
          p["b_strides"] = intArray(v.bStrides);
        } else if constexpr (std::is_same_v<T, MatMulParams>) {
          p["kind"] = "MatMul";
          p["batch"] = v.batch;
          p["m"] = v.m;
          p["n"] = v.n;
          p["k"] = v.k;
          p["a_offsets"] = v.aOffsets;
          p["b_offsets"] = v.bOffsets;
          p["rows_per_task"] = v.rowsPerTask;
        } else if constexpr (std::is_same_v<T, GatherParams>) {
          p["kind"] = "IndexSelect";
          p["outer"] = v.outer;
          p["dim_size"] = v.dimSize;
          p["count"] = v.count;
          p["inner"] = v.inner;
          p["index_dtype"] = dtypeKernelName(v.indexType);
        } else if constexpr (std::is_same_v<T, CatParams>) {
          p["kind"] = "Cat";
          p["outer"] = v.outer;
          p["row_elems"] = v.rowElems;
          p["out_row_elems"] = v.outRowElems;
        } else if constexpr (std::is_same_v<T, CatGatherParams>) {
          p["kind"] = "CatGather";
          p["outer"] = v.outer;
          p["inner"] = v.inner;
          p["count"] = v.count;
          p["dim_sizes"] = v.dimSizes;
          p["index_dtype"] = dtypeKernelName(v.indexType);
        }
      },
      spec.params);
  return p;
}

template <size_t N>
void fixedIntArray(const Json& p, const char* name, int64_t (&out)[N]) {
  const std::vector<int64_t> v = getIntArray(p, name, "kernel.params", ErrorKind::kIo);
  if (v.size() != N)
    fail(ErrorKind::kIo, "field 'kernel.params.{}' must hold {} integers, got {}", name, N,
         v.size());
  std::copy(v.begin(), v.end(), out);
}

void paramsFromJson(const Json& p, KernelSpec& spec) {
  const std::string where = "kernel.params";
  const ErrorKind io = ErrorKind::kIo;
  const std::string kind = getString(p, "kind", where, io);
  if (kind == "none") {
    spec.params = std::monostate{};
  } else if (kind == "Add") {
    AddParams a;
    const std::string path = getString(p, "path", where, io);
    bool known = false;
    for (const auto& [value, name] : kAddPaths) {
      if (path == name) {
        a.path = value;
        known = true;
      }
    }
    if (!known) fail(io, "field 'kernel.params.path': unknown Add path '{}'", path);
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
  } else if (kind == "MatMul") {
    MatMulParams m;
    m.batch = getInt(p, "batch", where, io);
    m.m = getInt(p, "m", where, io);
    m.n = getInt(p, "n", where, io);
    m.k = getInt(p, "k", where, io);
    m.aOffsets = getIntArray(p, "a_offsets", where, io);
    m.bOffsets = getIntArray(p, "b_offsets", where, io);
    m.rowsPerTask = getInt(p, "rows_per_task", where, io);
    spec.params = std::move(m);
  } else if (kind == "IndexSelect") {
    GatherParams g;
    g.outer = getInt(p, "outer", where, io);
    g.dimSize = getInt(p, "dim_size", where, io);
    g.count = getInt(p, "count", where, io);
    g.inner = getInt(p, "inner", where, io);
    g.indexType = dtypeField(p, "index_dtype", where, io);
    spec.params = g;
  } else if (kind == "Cat") {
    CatParams c;
    c.outer = getInt(p, "outer", where, io);
    c.rowElems = getIntArray(p, "row_elems", where, io);
    c.outRowElems = getInt(p, "out_row_elems", where, io);
    spec.params = std::move(c);
  } else if (kind == "CatGather") {
    CatGatherParams c;
    c.outer = getInt(p, "outer", where, io);
    c.inner = getInt(p, "inner", where, io);
    c.count = getInt(p, "count", where, io);
    c.dimSizes = getIntArray(p, "dim_sizes", where, io);
    c.indexType = dtypeField(p, "index_dtype", where, io);
    spec.params = std::move(c);
  } else {
    fail(io, "field 'kernel.params.kind': unknown params kind '{}'", kind);
  }
}

// ---- consistency of a loaded spec with its key ---------------------------------------------

// Largest element offset an operand is read at in Add's general path, or -1 on overflow.
int64_t maxGeneralOffset(const AddParams& a, const int64_t* strides) {
  int64_t off = 0;
  for (int i = 0; i < a.rank; ++i) {
    const int64_t step = checkedProduct({a.outDims[i] - 1, strides[i]});
    if (step < 0 || __builtin_add_overflow(off, step, &off)) return -1;
  }
  return off;
}

void checkAdd(const KernelSpec& s, const AddParams& a) {
  const int64_t na = s.key.inputs[0].shape.numel(), nb = s.key.inputs[1].shape.numel();
  const int64_t numel = s.output.shape.numel();
  auto bad = [&](const char* what) {
    fail(ErrorKind::kIo, "Add params do not fit the key: {}", what);
  };
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

void checkMatMul(const KernelSpec& s, const MatMulParams& m) {
  const int64_t na = s.key.inputs[0].shape.numel(), nb = s.key.inputs[1].shape.numel();
  auto bad = [&](const char* what) {
    fail(ErrorKind::kIo, "MatMul params do not fit the key: {}", what);
  };
  if (m.batch < 1 || m.m < 0 || m.n < 0 || m.k < 0 || m.rowsPerTask < 0) bad("negative extent");
  if (checkedProduct({m.batch, m.m, m.n}) != s.output.shape.numel()) bad("output size");
  if (m.aOffsets.size() != static_cast<size_t>(m.batch) ||
      m.bOffsets.size() != static_cast<size_t>(m.batch))
    bad("one offset per batch expected");
  const int64_t aElems = checkedProduct({m.m, m.k}), bElems = checkedProduct({m.k, m.n});
  if (aElems < 0 || bElems < 0) bad("matrix size overflows");
  for (int64_t b = 0; b < m.batch; ++b) {
    const int64_t ao = m.aOffsets[b], bo = m.bOffsets[b];
    if (ao < 0 || bo < 0 || ao > na - aElems || bo > nb - bElems) bad("batch offset out of range");
  }
}

void checkGather(const KernelSpec& s, const GatherParams& g) {
  const Shape& in = s.key.inputs[0].shape;
  const int d = static_cast<int>(s.key.attrs.dim.value_or(-1));
  if (d < 0 || d >= in.rank() || s.key.inputs[1].shape.rank() != 1 ||
      g.outer != dimsProduct(in, 0, d) || g.dimSize != in[d] ||
      g.inner != dimsProduct(in, d + 1, in.rank()) || g.count != s.key.inputs[1].shape[0] ||
      g.indexType != s.key.inputs[1].dtype ||
      checkedProduct({g.outer, g.count, g.inner}) != s.output.shape.numel())
    fail(ErrorKind::kIo, "IndexSelect params do not fit the key");
}

void checkCat(const KernelSpec& s, const CatParams& c) {
  bool ok = c.rowElems.size() == s.key.inputs.size() && c.outer >= 0;
  int64_t sum = 0;
  for (size_t i = 0; ok && i < c.rowElems.size(); ++i) {
    ok = checkedProduct({c.outer, c.rowElems[i]}) == s.key.inputs[i].shape.numel() &&
         !__builtin_add_overflow(sum, c.rowElems[i], &sum);
  }
  if (!ok || sum != c.outRowElems ||
      checkedProduct({c.outer, c.outRowElems}) != s.output.shape.numel())
    fail(ErrorKind::kIo, "Cat params do not fit the key");
}

void checkCatGather(const KernelSpec& s, const CatGatherParams& c) {
  const size_t n = s.key.inputs.size() - 1;
  const Shape& index = s.key.inputs[n].shape;
  bool ok = c.dimSizes.size() == n && index.rank() == 1 && c.count == index[0] &&
            c.indexType == s.key.inputs[n].dtype &&
            checkedProduct({c.outer, c.count, c.inner}) == s.output.shape.numel();
  for (size_t i = 0; ok && i < n; ++i)
    ok = checkedProduct({c.outer, c.dimSizes[i], c.inner}) == s.key.inputs[i].shape.numel();
  if (!ok) fail(ErrorKind::kIo, "CatGather params do not fit the key");
}

// Everything a kernel relies on for memory safety is re-derived from the key here and compared,
// which is O(inputs + batch) -- far less than compiling, and it keeps a damaged file from ever
// reaching a kernel.
void checkSpecAgainstKey(const KernelSpec& s) {
  const KernelKey& key = s.key;
  if (s.name != key.name())
    fail(ErrorKind::kIo, "kernel name '{}' does not match its key ('{}')", s.name, key.name());
  if (key.kind == OpKind::kConst) fail(ErrorKind::kIo, "a const is not a kernel");
  TensorType inferred;
  try {
    inferred = inferNode(InferContext{key.kind, key.inputs, key.attrs, nullptr, -1, s.name});
  } catch (const Error& e) {
    fail(ErrorKind::kIo, "the key is not a valid kernel: {}", e.what());
  }
  if (!(inferred == s.output))
    fail(ErrorKind::kIo, "output {} differs from the key's inferred output {}", s.output.toString(),
         inferred.toString());
  if (s.generic != !key.isStatic())
    fail(ErrorKind::kIo, "'generic' is {} for a {} key", s.generic,
         s.generic ? "static" : "dynamic");
  if (s.tasks < 1 || s.tasks > 65536) fail(ErrorKind::kIo, "tasks {} out of range", s.tasks);
  if (!std::isfinite(s.work) || s.work < 0) fail(ErrorKind::kIo, "work {} out of range", s.work);
  if (s.generic) {
    if (!std::holds_alternative<std::monostate>(s.params))
      fail(ErrorKind::kIo, "a shape-generic kernel has no params");
    return;
  }
  const bool fits =
      (key.kind == OpKind::kAdd && std::holds_alternative<AddParams>(s.params)) ||
      (key.kind == OpKind::kMatMul && std::holds_alternative<MatMulParams>(s.params)) ||
      (key.kind == OpKind::kIndexSelect && std::holds_alternative<GatherParams>(s.params)) ||
      (key.kind == OpKind::kCat && std::holds_alternative<CatParams>(s.params)) ||
      (key.kind == OpKind::kCatGather && std::holds_alternative<CatGatherParams>(s.params));
  if (!fits) fail(ErrorKind::kIo, "params kind does not match op {}", opKernelName(key.kind));
  std::visit(
      [&s](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, AddParams>) checkAdd(s, v);
        if constexpr (std::is_same_v<T, MatMulParams>) checkMatMul(s, v);
        if constexpr (std::is_same_v<T, GatherParams>) checkGather(s, v);
        if constexpr (std::is_same_v<T, CatParams>) checkCat(s, v);
        if constexpr (std::is_same_v<T, CatGatherParams>) checkCatGather(s, v);
      },
      s.params);
}

Json withoutHash(const Json& j) {
  Json copy = j;
  copy.erase("hash");
  return copy;
}

void checkHash(const Json& j, const char* what) {
  const std::string stored = getString(j, "hash", "", ErrorKind::kIo);
  const std::string actual = fnv1a64Hex(withoutHash(j).dump());
  if (stored != actual)
    fail(ErrorKind::kIo, "{} hash mismatch (stored {}, contents hash to {})", what, stored, actual);
}

void checkFormat(const Json& j, const char* format) {
  const std::string f = getString(j, "format", "", ErrorKind::kIo);
  if (f != format) fail(ErrorKind::kIo, "format is '{}', expected '{}'", f, format);
  const int64_t v = getInt(j, "version", "", ErrorKind::kIo);
  if (v != kKernelStoreVersion)
    fail(ErrorKind::kIo, "version {} is not supported (this gearbox reads version {})", v,
         kKernelStoreVersion);
}

// The entries of a directory. Uses the error_code overloads throughout: a std::filesystem
// exception escaping to the CLI would abort instead of exiting 2.
std::vector<fs::directory_entry> listDirectory(const fs::path& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) fail(ErrorKind::kIo, "cannot list '{}': {}", dir.string(), ec.message());
  std::vector<fs::directory_entry> out;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    out.push_back(*it);
  }
  if (ec) fail(ErrorKind::kIo, "cannot list '{}': {}", dir.string(), ec.message());
  return out;
}

Json parseJsonText(const std::string& text, ErrorKind kind) {
  checkJsonDepth(text, "kernel file");
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's message names the byte offset, which is what a truncated file needs.
    fail(kind, "not valid JSON: {}", e.what());
  }
}

}  // namespace

// ---- keys and descriptors ------------------------------------------------------------------

Json keyToJson(const KernelKey& key) {
  Json j;
  j["op"] = opKernelName(key.kind);
  j["dtype"] = dtypeKernelName(key.dtype);
  j["format"] = key.format;
  Json inputs = Json::array();
  for (const TensorType& t : key.inputs)
    inputs.push_back(
        Json{{"dtype", dtypeKernelName(t.dtype)}, {"shape", shapeToJson(t.shape, true)}});
  j["inputs"] = std::move(inputs);
  Json attrs = Json::object();
  if (key.attrs.dim) attrs["dim"] = *key.attrs.dim;
  j["attrs"] = std::move(attrs);
  return j;
}

KernelKey keyFromJson(const Json& j) {
  const ErrorKind io = ErrorKind::kIo;
  KernelKey key;
  const std::string op = getString(j, "op", "key", io);
  auto kind = parseKernelOp(op);
  if (!kind) fail(io, "field 'key.op': unknown op '{}'", op);
  key.kind = *kind;
  key.dtype = dtypeField(j, "dtype", "key", io);
  key.format = getString(j, "format", "key", io);
  const Json& inputs = getArray(j, "inputs", "key", io);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string where = fmt::format("key.inputs[{}]", i);
    TensorType t;
    t.dtype = dtypeField(inputs[i], "dtype", where, io);
    t.shape = shapeFromJson(field(inputs[i], "shape", where, io), where + ".shape", io);
    key.inputs.push_back(t);
  }
  const Json& attrs = field(j, "attrs", "key", io);
  if (!attrs.is_object()) fail(io, "field 'key.attrs' must be an object");
  for (const auto& [name, value] : attrs.items()) {
    if (name != "dim") fail(io, "field 'key.attrs': unknown attribute '{}'", name);
    if (!value.is_number_integer()) fail(io, "field 'key.attrs.dim' must be an integer");
    key.attrs.dim = value.get<int64_t>();
  }
  return key;
}

Json kernelDescriptorJson(const KernelSpec& spec, const std::string& created) {
  Json j;
  j["format"] = kKernelDescriptorFormat;
  j["version"] = kKernelStoreVersion;
  j["name"] = spec.name;
  j["created"] = created;
  j["key"] = keyToJson(spec.key);
  Json k;
  k["output"] = Json{{"dtype", dtypeKernelName(spec.output.dtype)},
                     {"shape", shapeToJson(spec.output.shape, true)}};
  k["generic"] = spec.generic;
  k["tasks"] = spec.tasks;
  k["work"] = spec.work;
  k["params"] = paramsToJson(spec);
  j["kernel"] = std::move(k);
  j["hash"] = fnv1a64Hex(j.dump());
  return j;
}

std::string serializeKernelDescriptor(const KernelSpec& spec, const std::string& created) {
  return kernelDescriptorJson(spec, created).dump(2) + "\n";
}

KernelDescriptor parseKernelDescriptor(const Json& j) {
  const ErrorKind io = ErrorKind::kIo;
  if (!j.is_object()) fail(io, "a kernel descriptor must be a JSON object");
  checkFormat(j, kKernelDescriptorFormat);
  checkHash(j, "content");
  auto spec = std::make_shared<KernelSpec>();
  spec->key = keyFromJson(field(j, "key", "", io));
  spec->name = getString(j, "name", "", io);
  const Json& k = field(j, "kernel", "", io);
  const Json& out = field(k, "output", "kernel", io);
  spec->output.dtype = dtypeField(out, "dtype", "kernel.output", io);
  spec->output.shape =
      shapeFromJson(field(out, "shape", "kernel.output", io), "kernel.output.shape", io);
  const Json& generic = field(k, "generic", "kernel", io);
  if (!generic.is_boolean()) fail(io, "field 'kernel.generic' must be a boolean");
  spec->generic = generic.get<bool>();
  const int64_t tasks = getInt(k, "tasks", "kernel", io);
  if (tasks < 1 || tasks > 65536) fail(io, "field 'kernel.tasks' out of range: {}", tasks);
  spec->tasks = static_cast<int>(tasks);
  const Json& work = field(k, "work", "kernel", io);
  if (!work.is_number()) fail(io, "field 'kernel.work' must be a number");
  spec->work = work.get<double>();
  paramsFromJson(field(k, "params", "kernel", io), *spec);
  checkSpecAgainstKey(*spec);
  validateAgainstRecompiled(*spec);  // a cache, not a source of truth (compiler/kernel_validate.h)
  return KernelDescriptor{std::move(spec), getString(j, "created", "", io)};
}

KernelDescriptor parseKernelDescriptor(const std::string& text) {
  return parseKernelDescriptor(parseJsonText(text, ErrorKind::kIo));
}

std::string kernelFileName(const KernelKey& key) {
  const std::string name = key.name();
  bool symbolic = false;
  for (const TensorType& t : key.inputs)
    for (int64_t d : t.shape) symbolic |= isSymbolDim(d);
  // NAME_MAX is 255 on every filesystem gearbox targets.
  if (!symbolic && name.size() + 5 <= 255) return name + ".json";
  return name.substr(0, std::min<size_t>(name.size(), 200)) + "_" +
         fnv1a64Hex(keyToJson(key).dump()) + ".json";
}

std::string isoTimestampNow() {
  const auto now = std::chrono::system_clock::now();
  return strftimeString(toTm(now, true), "%Y-%m-%dT%H:%M:%S") +
         fmt::format(".{:06d}Z", microsOf(now));
}

// ---- KernelMetaStore ------------------------------------------------------------------------

KernelMetaStore::KernelMetaStore(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) {
    disable(fmt::format("cannot create the directory: {}", ec.message()));
  } else if (!fs::is_directory(dir_, ec)) {
    disable("it exists and is not a directory");
  } else if (::access(dir_.c_str(), W_OK | X_OK) != 0) {
    disable(fmt::format("the directory is not writable: {}", std::strerror(errno)));
  }
}

void KernelMetaStore::disable(const std::string& why) {
  if (usable_.exchange(false))
    compileLogger()->warn("kernel_meta '{}': {}; continuing without kernel persistence", dir_, why);
}

void KernelMetaStore::warnOnce(const std::string& path, const std::string& why) {
  {
    std::lock_guard lock(mu_);
    if (!warned_.insert(path).second) return;
    ++stats_.corrupt;
  }
  compileLogger()->warn(
      "kernel_meta: damaged kernel file '{}': {}; recompiling the kernel and "
      "rewriting the file",
      path, why);
}

std::shared_ptr<const KernelSpec> KernelMetaStore::load(const KernelKey& key) {
  if (!usable_.load()) return nullptr;
  const std::string path = (fs::path(dir_) / kernelFileName(key)).string();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    std::lock_guard lock(mu_);
    ++stats_.misses;
    return nullptr;
  }
  try {
    KernelDescriptor d = parseKernelDescriptor(readFile(path));
    if (!(d.spec->key == key))
      fail(ErrorKind::kIo, "it holds kernel '{}', not the requested '{}'", d.spec->name,
           key.name());
    std::lock_guard lock(mu_);
    ++stats_.loads;
    return d.spec;
  } catch (const Error& e) {
    warnOnce(path, e.what());
    return nullptr;
  }
}

void KernelMetaStore::save(const KernelSpec& spec) {
  if (!usable_.load()) return;
  const std::string path = (fs::path(dir_) / kernelFileName(spec.key)).string();
  try {
    writeFileAtomic(path, serializeKernelDescriptor(spec, isoTimestampNow()));
  } catch (const Error& e) {
    // Skip this entry and keep the store on: one unwritable name (a directory in its place, a
    // full disk) must not turn off persistence for every other kernel of the run. The atomic
    // write left no partial file, so nothing is lost; one warning per store is enough.
    bool first = false;
    {
      std::lock_guard lock(mu_);
      ++stats_.saveFailures;
      first = stats_.saveFailures == 1;
    }
    if (first)
      compileLogger()->warn(
          "kernel_meta '{}': {}; skipping this kernel file (further write "
          "failures are counted, not logged)",
          dir_, e.what());
    return;
  }
  std::lock_guard lock(mu_);
  ++stats_.saves;
  // A rewritten file is healthy again; if it is damaged later, that deserves a new warning.
  warned_.erase(path);
}

KernelMetaStore::Stats KernelMetaStore::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::vector<KernelFileInfo> listKernelDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(ErrorKind::kIo, "'{}' is not a directory", dir);
  std::vector<KernelFileInfo> out;
  for (const fs::directory_entry& e : listDirectory(dir)) {
    KernelFileInfo info;
    info.file = e.path().filename().string();
    if (!e.is_regular_file(ec)) {
      info.problem = "not a regular file";
      out.push_back(std::move(info));
      continue;
    }
    info.bytes = static_cast<int64_t>(e.file_size(ec));
    if (!info.file.ends_with(".json")) {
      info.problem = "not a kernel descriptor (a temp file left by an interrupted write?)";
      out.push_back(std::move(info));
      continue;
    }
    try {
      KernelDescriptor d = parseKernelDescriptor(readFile(e.path().string()));
      if (kernelFileName(d.spec->key) != info.file)
        fail(ErrorKind::kIo, "file name does not match its kernel '{}'", d.spec->name);
      info.spec = std::move(d.spec);
      info.created = std::move(d.created);
    } catch (const Error& err) {
      info.problem = err.what();
    }
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(),
            [](const KernelFileInfo& a, const KernelFileInfo& b) { return a.file < b.file; });
  return out;
}

// ---- bundles ---------------------------------------------------------------------------------

std::string serializeKernelBundle(const std::vector<std::shared_ptr<const KernelSpec>>& specs,
                                  const std::string& created) {
  Json j;
  j["format"] = kKernelBundleFormat;
  j["version"] = kKernelStoreVersion;
  j["created"] = created;
  Json kernels = Json::array();
  for (const auto& s : specs) kernels.push_back(kernelDescriptorJson(*s, created));
  j["kernels"] = std::move(kernels);
  j["hash"] = fnv1a64Hex(j.dump());
  return j.dump() + "\n";
}

std::vector<std::shared_ptr<const KernelSpec>> loadKernelBundle(const std::string& path) {
  const std::string text = readFile(path);  // Error(kIo) naming the file
  try {
    const Json j = parseJsonText(text, ErrorKind::kIo);
    if (!j.is_object()) fail(ErrorKind::kIo, "a kernel bundle must be a JSON object");
    checkFormat(j, kKernelBundleFormat);
    checkHash(j, "bundle");
    const Json& kernels = getArray(j, "kernels", "", ErrorKind::kIo);
    std::vector<std::shared_ptr<const KernelSpec>> specs;
    specs.reserve(kernels.size());
    for (size_t i = 0; i < kernels.size(); ++i) {
      try {
        specs.push_back(parseKernelDescriptor(kernels[i]).spec);
      } catch (const Error& e) {
        fail(ErrorKind::kIo, "kernel #{}: {}", i, e.what());
      }
    }
    return specs;
  } catch (const Error& e) {
    fail(ErrorKind::kIo, "kernel bundle '{}': {}", path, e.what());
  }
}

void BundleStore::addBundle(const std::string& path) {
  for (auto& spec : loadKernelBundle(path)) add(std::move(spec));
}

void BundleStore::add(std::shared_ptr<const KernelSpec> spec) {
  KernelKey key = spec->key;
  kernels_.insert_or_assign(std::move(key), std::move(spec));
}

std::shared_ptr<const KernelSpec> BundleStore::load(const KernelKey& key) {
  auto it = kernels_.find(key);
  if (it == kernels_.end()) return nullptr;
  ++hits_;
  return it->second;
}

// ---- op-info records ---------------------------------------------------------------------------

void checkOutputPath(const std::string& path, const std::string& what) {
  if (path.empty()) fail(ErrorKind::kConfig, "{}: the path is empty", what);
  if (const size_t nul = path.find('\0'); nul != std::string::npos) {
    // Printed up to the NUL with an escape: a raw NUL would end the message for every C reader.
    fail(ErrorKind::kConfig, "{} '{}\\0...': the path contains a NUL byte", what,
         path.substr(0, nul));
  }
  const fs::path p(path);
  for (const fs::path& part : p)
    if (part == "..")
      fail(ErrorKind::kConfig, "{} '{}': paths containing '..' are refused", what, path);
  // Every existing component is checked with lstat(): a symlink anywhere would let the output
  // land outside the directory the user named. The walk stops at the first missing component,
  // since nothing below it can exist.
  fs::path prefix;
  for (const fs::path& part : p) {
    prefix /= part;
    if (part == "/" || part == "." || part.empty()) continue;
    struct stat st {};
    if (::lstat(prefix.c_str(), &st) != 0) break;
    if (S_ISLNK(st.st_mode))
      fail(ErrorKind::kConfig, "{} '{}': component '{}' is a symlink; symlinks are refused", what,
           path, prefix.string());
  }
}

namespace {

// Parameter names as aclnn spells them, so the files read like Ascend's.
std::string opInfoInputName(OpKind kind, size_t i, size_t n) {
  switch (kind) {
    case OpKind::kAdd: return i == 0 ? "self" : "other";
    case OpKind::kMatMul: return i == 0 ? "self" : "mat2";
    case OpKind::kIndexSelect: return i == 0 ? "self" : "index";
    case OpKind::kCat: return "tensors";
    case OpKind::kCatGather: return i + 1 == n ? "index" : "tensors";
    case OpKind::kConst: break;
  }
  return fmt::format("input{}", i);
}

Json opInfoTensor(const std::string& name, size_t index, const TensorType& t,
                  const std::string& format) {
  Json j;
  j["name"] = name;
  j["index"] = index;
  j["dtype"] = dtypeKernelName(t.dtype);
  j["shape"] = shapeToJson(t.shape, false);
  j["format"] = format;
  j["origin_shape"] = shapeToJson(t.shape, false);
  j["origin_format"] = format;
  return j;
}

}  // namespace

Json opInfoJson(const KernelKey& key) {
  Json j;
  j["op_type"] = opKernelName(key.kind);
  Json inputs = Json::array();
  for (size_t i = 0; i < key.inputs.size(); ++i)
    inputs.push_back(opInfoTensor(opInfoInputName(key.kind, i, key.inputs.size()), i, key.inputs[i],
                                  key.format));
  j["inputs"] = std::move(inputs);
  Json outputs = Json::array();
  try {
    const TensorType out =
        inferNode(InferContext{key.kind, key.inputs, key.attrs, nullptr, -1, "op-info"});
    outputs.push_back(opInfoTensor("out", 0, out, key.format));
  } catch (const Error&) {
    // Only valid keys reach the kernel cache; an invalid one fails at compile with a clear
    // message, so the record just has no output.
  }
  j["outputs"] = std::move(outputs);
  Json attrs = Json::array();
  if (key.attrs.dim)
    attrs.push_back(
        Json{{"name", "dim"}, {"dtype", "int64"}, {"index", 0}, {"value", *key.attrs.dim}});
  j["attrs"] = std::move(attrs);
  return j;
}

std::string opInfoFileName(const KernelKey& key, int counter) {
  if (key.inputs.empty()) return fmt::format("{}_{}.json", opKernelName(key.kind), counter);
  const TensorType& in0 = key.inputs[0];
  std::string s =
      fmt::format("{}_{}_{}", opKernelName(key.kind), dtypeKernelName(in0.dtype), key.format);
  for (int64_t d : in0.shape) s += fmt::format("_{}", d >= 0 ? d : kAnyDim);
  return s + fmt::format("_{}.json", counter);
}

OpInfoRecorder::OpInfoRecorder(const std::string& dir) {
  checkOutputPath(dir, "--record-op-info");
  const long pid = static_cast<long>(::getpid());
  const fs::path top = fs::path(dir) / kOpInfoTopDir;
  checkOutputPath(top.string(), "--record-op-info");
  std::error_code ec;
  fs::create_directories(top, ec);
  if (ec)
    fail(ErrorKind::kIo, "--record-op-info: cannot create '{}': {}", top.string(), ec.message());
  // Two recorders of one process in the same microsecond (two sessions in a test) would share
  // a folder and overwrite each other's numbered files; the next free microsecond keeps every
  // run's folder its own while the name stays a real timestamp.
  const auto now = std::chrono::system_clock::now();
  for (int attempt = 0;; ++attempt) {
    const auto t = now + std::chrono::microseconds(attempt);
    const fs::path run = top / fmt::format("ts{}_pid{}_outputs", compactTimestamp(t, true), pid);
    checkOutputPath(run.string(), "--record-op-info");
    if (fs::create_directory(run, ec)) {
      runDir_ = run.string();
      break;
    }
    if (ec || attempt >= 1000000)
      fail(ErrorKind::kIo, "--record-op-info: cannot create '{}': {}", run.string(),
           ec ? ec.message() : "every candidate name exists");
  }
  selected_ = (fs::path(runDir_) / std::to_string(pid)).string();
  debug_ = (fs::path(runDir_) / fmt::format("{}_debug", pid)).string();
  for (const std::string& d : {selected_, debug_}) {
    if (!fs::create_directory(d, ec) || ec)
      fail(ErrorKind::kIo, "--record-op-info: cannot create '{}': {}", d,
           ec ? ec.message() : "it already exists");
  }
}

void OpInfoRecorder::record(const KernelKey& key) {
  if (key.kind == OpKind::kConst) return;
  const Json info = opInfoJson(key);
  const std::string canonical = info.dump();
  const std::string text = info.dump(2) + "\n";
  // Files are written under the lock so that counter order is file order and a record is
  // only marked seen once its file exists.
  std::lock_guard lock(mu_);
  auto write = [&](std::set<std::string>& seen, int& counter, const std::string& dir) {
    if (seen.count(canonical)) return;
    writeFileAtomic((fs::path(dir) / opInfoFileName(key, counter)).string(), text);
    seen.insert(canonical);
    ++counter;
  };
  write(seenDebug_, debugCounter_, debug_);
  // Only a static shape can have a static kernel precompiled for it.
  if (key.isStatic()) write(seenSelected_, selectedCounter_, selected_);
}

namespace {
class RecordingStore final : public KernelStore {
 public:
  explicit RecordingStore(std::shared_ptr<OpInfoRecorder> r) : recorder_(std::move(r)) {}
  std::shared_ptr<const KernelSpec> load(const KernelKey& key) override {
    recorder_->record(key);
    return nullptr;
  }
  void save(const KernelSpec&) override {}

 private:
  std::shared_ptr<OpInfoRecorder> recorder_;
};
}  // namespace

std::shared_ptr<KernelStore> OpInfoRecorder::observer() {
  return std::make_shared<RecordingStore>(shared_from_this());
}

KernelCompileHook OpInfoRecorder::hook() {
  return [self = shared_from_this()](const KernelSpec& spec) { self->record(spec.key); };
}

int64_t OpInfoRecorder::selectedCount() const {
  std::lock_guard lock(mu_);
  return selectedCounter_;
}

int64_t OpInfoRecorder::debugCount() const {
  std::lock_guard lock(mu_);
  return debugCounter_;
}

// ---- precompile ------------------------------------------------------------------------------

namespace {

bool isRunDirName(const std::string& name) {
  return name.starts_with("ts") && name.ends_with("_outputs") &&
         name.find("_pid") != std::string::npos;
}

std::string pidOfRunDir(const std::string& name) {
  const size_t at = name.rfind("_pid");
  return name.substr(at + 4, name.size() - at - 4 - std::string("_outputs").size());
}

}  // namespace

std::string findOpInfoDir(const std::string& dir, std::string* runDir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(ErrorKind::kIo, "'{}' is not a directory", dir);
  fs::path base = fs::path(dir).lexically_normal();
  if (base.filename().empty()) base = base.parent_path();
  fs::path top;
  if (fs::is_directory(base / kOpInfoTopDir, ec)) {
    top = base / kOpInfoTopDir;
  } else if (base.filename() == kOpInfoTopDir) {
    top = base;
  }
  fs::path run;
  if (!top.empty()) {
    std::string newest;
    for (const fs::directory_entry& e : listDirectory(top)) {
      const std::string name = e.path().filename().string();
      // Timestamps have a fixed width, so the largest name is the newest run.
      if (e.is_directory(ec) && isRunDirName(name) && name > newest) newest = name;
    }
    if (newest.empty())
      fail(ErrorKind::kIo, "'{}' holds no ts<time>_pid<pid>_outputs folder", top.string());
    run = top / newest;
  } else if (isRunDirName(base.filename().string())) {
    run = base;
  }
  fs::path selected = base;
  if (!run.empty()) {
    selected = run / pidOfRunDir(run.filename().string());
    if (!fs::is_directory(selected, ec))
      fail(ErrorKind::kIo, "'{}' has no selected-ops folder '{}'", run.string(),
           selected.filename().string());
  }
  if (runDir) *runDir = (run.empty() ? base : run).string();
  return selected.string();
}

KernelKey opInfoToKey(const Json& j, const std::string& file) {
  const ErrorKind pe = ErrorKind::kParse;
  try {
    const std::string op = getString(j, "op_type", "", pe);
    auto kind = parseKernelOp(op);
    if (!kind || *kind == OpKind::kConst) fail(pe, "field 'op_type': '{}' is not a kernel op", op);
    const Json& inputs = getArray(j, "inputs", "", pe);
    std::vector<TensorType> types;
    std::string format = "ND";
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string where = fmt::format("inputs[{}]", i);
      const int64_t index = getInt(inputs[i], "index", where, pe);
      if (index != static_cast<int64_t>(i))
        fail(pe, "field '{}.index' is {}, expected {}", where, index, i);
      TensorType t;
      t.dtype = dtypeField(inputs[i], "dtype", where, pe);
      t.shape = shapeFromJson(field(inputs[i], "shape", where, pe), where + ".shape", pe);
      const std::string f = getString(inputs[i], "format", where, pe);
      if (f != "ND") fail(pe, "field '{}.format': '{}' is not supported (only ND)", where, f);
      types.push_back(t);
    }
    Attrs attrs;
    const Json& as = getArray(j, "attrs", "", pe);
    for (size_t i = 0; i < as.size(); ++i) {
      const std::string where = fmt::format("attrs[{}]", i);
      const std::string name = getString(as[i], "name", where, pe);
      if (name != "dim") fail(pe, "field '{}.name': unknown attribute '{}'", where, name);
      attrs.dim = getInt(as[i], "value", where, pe);
    }
    KernelKey key = makeKernelKey(*kind, types, attrs);
    key.format = format;
    return key;
  } catch (const Error& e) {
    fail(pe, "op-info file '{}': {}", file, e.what());
  }
}

PrecompileResult precompileBundle(const std::string& recordDir, const std::string& output) {
  PrecompileResult r;
  std::string runDir;
  r.recordDir = findOpInfoDir(recordDir, &runDir);
  std::vector<fs::path> files;
  std::error_code ec;
  for (const fs::directory_entry& e : listDirectory(r.recordDir))
    if (e.is_regular_file(ec) && e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) fail(ErrorKind::kIo, "no op-info files (*.json) in '{}'", r.recordDir);

  std::vector<KernelKey> keys;
  std::vector<std::string> keyFile;
  std::unordered_set<KernelKey> seen;
  for (const fs::path& f : files) {
    ++r.records;
    const std::string text = readFile(f.string());
    Json j;
    try {
      j = parseJsonText(text, ErrorKind::kParse);
    } catch (const Error& e) {
      fail(ErrorKind::kParse, "op-info file '{}': {}", f.string(), e.what());
    }
    KernelKey key = opInfoToKey(j, f.string());
    if (!key.isStatic()) {
      ++r.skippedDynamic;
      continue;
    }
    if (seen.insert(key).second) {
      keys.push_back(std::move(key));
      keyFile.push_back(f.string());
    }
  }
  if (keys.empty())
    fail(ErrorKind::kIo, "no static-shape op records in '{}' ({} dynamic-shape records skipped)",
         r.recordDir, r.skippedDynamic);

  // One task per kernel: compiles are independent, and TBB balances the uneven costs
  // (a batched MatMul's offsets vs a Cat's few numbers) by stealing.
  std::vector<std::shared_ptr<const KernelSpec>> specs(keys.size());
  std::vector<std::string> errors(keys.size());
  std::mutex threadsMu;
  std::set<std::thread::id> threads;
  const auto start = std::chrono::steady_clock::now();
  tbb::parallel_for(tbb::blocked_range<size_t>(0, keys.size(), 1),
                    [&](const tbb::blocked_range<size_t>& range) {
                      {
                        std::lock_guard lock(threadsMu);
                        threads.insert(std::this_thread::get_id());
                      }
                      for (size_t i = range.begin(); i != range.end(); ++i) {
                        try {
                          specs[i] = compileKernelSpec(keys[i]);
                        } catch (const Error& e) {
                          errors[i] = e.what();
                        }
                      }
                    });
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.threads = static_cast<int>(threads.size());
  for (size_t i = 0; i < keys.size(); ++i)
    if (!errors[i].empty())
      fail(ErrorKind::kParse, "op-info file '{}': not a valid kernel: {}", keyFile[i], errors[i]);
  r.kernels = static_cast<int64_t>(specs.size());

  const auto now = std::chrono::system_clock::now();
  r.bundlePath =
      output.empty()
          ? (fs::path(runDir) / fmt::format("static_kernel_{}.run", compactTimestamp(now, false)))
                .string()
          : output;
  writeFileAtomic(r.bundlePath, serializeKernelBundle(specs, isoTimestampNow()));
  return r;
}

}  // namespace gearbox
