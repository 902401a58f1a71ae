#include "executor/device_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "compiler/passes.h"
#include "executor/session.h"
#include "graph/checked.h"
#include "graph/error.h"

namespace gearbox {

const char* graphPoolName(GraphPool p) {
  return p == GraphPool::kShared ? "shared" : "separate";
}

std::optional<GraphPool> parseGraphPool(std::string_view s) {
  if (s == "shared") return GraphPool::kShared;
  if (s == "separate") return GraphPool::kSeparate;
  return std::nullopt;
}

const char* onOomName(OnOom o) {
  return o == OnOom::kError ? "error" : "evict";
}

std::optional<OnOom> parseOnOom(std::string_view s) {
  if (s == "error") return OnOom::kError;
  if (s == "evict") return OnOom::kEvict;
  return std::nullopt;
}

std::string formatBytes(int64_t bytes) {
  return fmt::format("{} bytes ({:.2f} MiB)", bytes, static_cast<double>(bytes) / (1 << 20));
}

std::string humanBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < (int64_t{1} << 10)) return fmt::format("{} B", bytes);
  if (bytes < (int64_t{1} << 20)) return fmt::format("{:.2f} KiB", b / (1 << 10));
  if (bytes < (int64_t{1} << 30)) return fmt::format("{:.2f} MiB", b / (1 << 20));
  return fmt::format("{:.2f} GiB", b / (1 << 30));
}

std::string memoryCapacitySource(const SessionOptions& o) {
  if (o.deviceMemoryBytes > 0) return "--device-memory";
  return "memory_capacity_bytes of device profile " + o.cost.name;
}

int64_t parseByteSize(const std::string& text, std::string_view what) {
  size_t i = 0;
  int64_t n = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    n = n * 10 + (text[i] - '0');  // n <= 2^50 before: no overflow
    if (n > kMaxDeviceMemoryBytes)
      fail(ErrorKind::kConfig, "{} '{}': more than {} bytes (1 PiB)", what, text,
           kMaxDeviceMemoryBytes);
    ++i;
  }
  if (i == 0)
    fail(ErrorKind::kConfig,
         "{} '{}': expected a whole number of bytes, optionally with a suffix (B, KB, MB, GB, "
         "TB, KiB, MiB, GiB, TiB), e.g. 40GiB",
         what, text);
  const std::string suffix = text.substr(i);
  static const std::pair<const char*, int64_t> kUnits[] = {
      {"", 1},
      {"B", 1},
      {"KB", 1000},
      {"MB", 1000 * 1000},
      {"GB", 1000 * 1000 * 1000},
      {"TB", int64_t{1000} * 1000 * 1000 * 1000},
      {"KiB", int64_t{1} << 10},
      {"MiB", int64_t{1} << 20},
      {"GiB", int64_t{1} << 30},
      {"TiB", int64_t{1} << 40},
  };
  for (const auto& [name, scale] : kUnits) {
    if (suffix != name) continue;
    if (n > kMaxDeviceMemoryBytes / scale)
      fail(ErrorKind::kConfig, "{} '{}': more than {} bytes (1 PiB)", what, text,
           kMaxDeviceMemoryBytes);
    if (n == 0) fail(ErrorKind::kConfig, "{} '{}': a capacity must be at least 1 byte", what, text);
    return n * scale;
  }
  fail(ErrorKind::kConfig,
       "{} '{}': unknown unit '{}' (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB; no space)", what, text,
       suffix);
}

DeviceMemoryModel::DeviceMemoryModel(int64_t weightsBytes, int64_t capacityBytes, GraphPool pool)
    : weights_(weightsBytes), capacity_(capacityBytes), pool_(pool), peak_(weightsBytes) {}

int64_t DeviceMemoryModel::workspaceWith(int64_t extra, bool pooled) const {
  const int64_t add = pooled ? 0 : extra;
  int64_t pool = 0;
  if (pool_ == GraphPool::kShared)
    pool = std::max(pooled ? extra : 0, pooled_.empty() ? int64_t{0} : *pooled_.rbegin());
  else
    pool = addOrFail(pooledSum_, pooled ? extra : 0, "modeled workspace bytes");
  return addOrFail(addOrFail(cachedSum_, add, "modeled workspace bytes"), pool,
                   "modeled workspace bytes");
}

int64_t DeviceMemoryModel::residentWith(int64_t extra, bool pooled) const {
  return addOrFail(addOrFail(weights_, workspaceWith(extra, pooled), "modeled device memory"),
                   opByOp_, "modeled device memory");
}

void DeviceMemoryModel::hold(uint64_t id, int64_t bytes, bool evictable) {
  release(id);  // a plan compiled again for the same id replaces its entry
  held_[id] = Held{bytes, evictable};
  if (evictable) {
    cachedSum_ = addOrFail(cachedSum_, bytes, "modeled workspace bytes");
  } else {
    pooled_.insert(bytes);
    pooledSum_ = addOrFail(pooledSum_, bytes, "modeled workspace bytes");
  }
  peakWorkspace_ = std::max(peakWorkspace_, workspaceWith(0));
  notePeak(0);
}

void DeviceMemoryModel::release(uint64_t id) {
  const auto it = held_.find(id);
  if (it == held_.end()) return;
  if (it->second.evictable) {
    cachedSum_ -= it->second.bytes;
  } else {
    pooled_.erase(pooled_.find(it->second.bytes));
    pooledSum_ -= it->second.bytes;
  }
  held_.erase(it);
}

std::vector<uint64_t> DeviceMemoryModel::evictableIds() const {
  std::vector<uint64_t> ids;
  for (const auto& [id, h] : held_)
    if (h.evictable) ids.push_back(id);
  return ids;
}

void DeviceMemoryModel::setOpByOpBytes(int64_t bytes) {
  opByOp_ = bytes;
}

void DeviceMemoryModel::notePeak(int64_t transient) {
  peak_ = std::max(peak_, addOrFail(residentWith(0), transient, "modeled device memory"));
}

ModeledMemory DeviceMemoryModel::snapshot() const {
  ModeledMemory m;
  m.weightsBytes = weights_;
  m.workspaceBytes = workspaceWith(0);
  m.opByOpBytes = opByOp_;
  m.residentBytes = residentWith(0);
  m.peakBytes = peak_;
  m.peakWorkspaceBytes = peakWorkspace_;
  m.residentPlans = static_cast<int64_t>(held_.size());
  m.capacityBytes = capacity_;
  m.evictions = evictions_;
  m.pool = pool_;
  return m;
}

int64_t graphWeightBytes(const Graph& g) {
  int64_t bytes = 0;
  for (const Node& n : g.nodes)
    if (n.kind == OpKind::kConst && n.constant)
      bytes = addOrFail(bytes, static_cast<int64_t>(n.constant->bytes()), "weight bytes");
  return bytes;
}

int64_t planIoBytes(const Plan& plan) {
  const Graph& g = *plan.graph;
  int64_t bytes = 0;
  auto add = [&](ValueId v) {
    const TensorType& t = plan.types[v];
    if (!t.shape.isStatic()) return;
    bytes = addOrFail(bytes, checkedBytes(t.shape, t.dtype, "plan input/output"), "plan I/O");
  };
  for (ValueId v : g.inputs) add(v);
  for (ValueId v : g.outputs) add(v);
  return bytes;
}

ShapeSetMemory modeledPlanMemory(const Graph& graph, std::span<const InputSignature> shapes,
                                 GraphPool pool, bool runPasses) {
  Graph g = graph;
  if (runPasses) defaultPipeline().run(g);
  auto shared = std::make_shared<const Graph>(std::move(g));
  ShapeSetMemory out;
  out.weightsBytes = graphWeightBytes(*shared);
  DeviceMemoryModel model(out.weightsBytes, 0, pool);
  KernelCache kernels(1024);
  int64_t io = 0;
  uint64_t id = 1;
  for (const InputSignature& sig : shapes) {
    auto plan = compilePlan(shared, sig, kernels, PlanCompileOptions{"memory estimate", false, id});
    PlanMemory pm{sig, plan->arenaBytes, planIoBytes(*plan)};
    model.hold(id++, pm.workspaceBytes, false);
    io = std::max(io, pm.ioBytes);
    out.plans.push_back(std::move(pm));
  }
  out.workspaceBytes = model.workspaceWith(0);
  out.residentBytes = model.residentWith(0);
  out.peakBytes = addOrFail(out.residentBytes, io, "modeled device memory");
  return out;
}

}  // namespace gearbox
