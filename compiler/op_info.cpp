// Op-info records (--record-op-info) in seed 003's aclnn_static_shape_kernel_outputs layout.
// See compiler/kernel_store.h for the formats and docs/kernel-meta.md for the workflows.
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
#include "compiler/kernel_store.h"
#include "compiler/kernel_store_internal.h"
#include "compiler/ops/op_hooks.h"
#include "graph/error.h"
#include "graph/file_io.h"

namespace gearbox {

namespace fs = std::filesystem;
using namespace store_detail;

// ---- op-info records ---------------------------------------------------------------------------

namespace {

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
    inputs.push_back(opInfoTensor(ops::opInfoInputName(key.kind, i, key.inputs.size()), i,
                                  key.inputs[i], key.format));
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
  // aclnn's attribute records: scalar dims are int64, dim lists are listInt.
  Json attrs = Json::array();
  const Json attrObject = attrsToJson(key.kind, key.attrs);  // named: items() refers into it
  for (const auto& [name, value] : attrObject.items())
    attrs.push_back(Json{{"name", name},
                         {"dtype", value.is_array()            ? "listInt"
                                   : value.is_number_integer() ? "int64"
                                                               : "float"},
                         {"index", attrs.size()},
                         {"value", value}});
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
  checkOutputPath("--record-op-info", dir, OutputKind::kTree);
  const long pid = static_cast<long>(::getpid());
  const fs::path top = fs::path(dir) / kOpInfoTopDir;
  checkOutputPath("--record-op-info", top.string(), OutputKind::kTree);
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
    checkOutputPath("--record-op-info", run.string(), OutputKind::kTree);
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
    // A fresh per-process directory: nothing stale to sweep.
    writeFileAtomic((fs::path(dir) / opInfoFileName(key, counter)).string(), text,
                    TempSweep::kNone);
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

}  // namespace gearbox
