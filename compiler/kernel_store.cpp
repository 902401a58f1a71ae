// Kernel descriptors: keys, params and specs as JSON, and their consistency checks.
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
#include "compiler/json_fields.h"
#include "compiler/kernel_store_internal.h"
#include "compiler/kernel_validate.h"
#include "compiler/ops/op_hooks.h"
#include "graph/error.h"
#include "graph/json_limits.h"

namespace gearbox {

namespace fs = std::filesystem;
using namespace store_detail;

// ---- small helpers ---------------------------------------------------------------------------

std::string fnv1a64Hex(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", h);
}

namespace store_detail {

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

// ---- consistency of a loaded spec with its key ---------------------------------------------

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
  ops::checkParams(s);  // the op's own file: compiler/ops/<op>.cpp
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

}  // namespace store_detail

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
  j["attrs"] = attrsToJson(key.kind, key.attrs);
  // Only a capped key says so: the descriptors of uncapped keys stay as they were.
  if (key.threads > 0) j["threads"] = key.threads;
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
  key.attrs = attrsFromJson(key.kind, field(j, "attrs", "key", io), "key.attrs", io);
  if (j.contains("threads")) {
    const int64_t threads = getInt(j, "threads", "key", io);
    if (threads < 1 || threads > kMaxThreads)
      fail(io, "field 'key.threads' out of range [1, {}]: {}", kMaxThreads, threads);
    key.threads = static_cast<int>(threads);
  }
  return key;
}

Json kernelDescriptorJson(const KernelSpec& spec, const std::string& created) {
  Json j = kernelDescriptorBody(spec, created);
  j["hash"] = fnv1a64Hex(j.dump());
  return j;
}

Json kernelDescriptorBody(const KernelSpec& spec, const std::string& created) {
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
  k["params"] = ops::paramsToJson(spec);
  j["kernel"] = std::move(k);
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
  ops::paramsFromJson(field(k, "params", "kernel", io), *spec);
  checkSpecAgainstKey(*spec);
  // A cache, not a source of truth (compiler/kernel_validate.h): the spec compiled here when the
  // file's was compiled for another ISA.
  std::shared_ptr<const KernelSpec> use = validateAgainstRecompiled(spec);
  const bool otherIsa = use != spec;
  return KernelDescriptor{std::move(use), getString(j, "created", "", io), otherIsa};
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

}  // namespace gearbox
