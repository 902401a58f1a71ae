// Kernel bundles (--kernel-bundle) and `gearbox precompile`, which builds them from op-info
// records. See compiler/kernel_store.h for the formats and docs/kernel-meta.md for the workflows.
#include <fmt/format.h>
#include <sys/stat.h>
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
#include "compiler/kernel_store.h"
#include "compiler/kernel_store_internal.h"
#include "compiler/ops/op_hooks.h"
#include "compiler/parallel_for.h"
#include "graph/error.h"
#include "graph/file_io.h"

namespace gearbox {

namespace fs = std::filesystem;
using namespace store_detail;

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
    Json attrObject = Json::object();
    const Json& as = getArray(j, "attrs", "", pe);
    for (size_t i = 0; i < as.size(); ++i) {
      const std::string where = fmt::format("attrs[{}]", i);
      const std::string name = getString(as[i], "name", where, pe);
      if (findAttr(*kind, name) < 0)
        fail(pe, "field '{}.name': unknown attribute '{}'", where, name);
      attrObject[name] = field(as[i], "value", where, pe);
    }
    const Attrs attrs = attrsFromJson(*kind, attrObject, "attrs", pe);
    KernelKey key = makeKernelKey(*kind, types, attrs);
    key.format = format;
    return key;
  } catch (const Error& e) {
    fail(pe, "op-info file '{}': {}", file, e.what());
  }
}

PrecompileResult precompileBundle(const std::string& recordDir, const std::string& output,
                                  int kernelThreads) {
  if (kernelThreads < 0 || kernelThreads > kMaxThreads)
    fail(ErrorKind::kConfig, "--threads {}: expected 0 (no cap) to {}", kernelThreads, kMaxThreads);
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
    key.threads = kernelThreads;
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
  parallelFor(keys.size(), [&](size_t i) {
    {
      std::lock_guard lock(threadsMu);
      threads.insert(std::this_thread::get_id());
    }
    try {
      specs[i] = compileKernelSpec(keys[i]);
    } catch (const Error& e) {
      errors[i] = e.what();
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
