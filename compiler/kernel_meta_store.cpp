// The kernel_meta directory (--kernel-meta): one descriptor file per compiled kernel.
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
  } else {
    // Once per store, not per write: a directory of many kernels is scanned once per run.
    removeStaleTempFiles(dir_);
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
    ++(d.recompiledForIsa ? stats_.otherIsa : stats_.loads);
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
    writeFileAtomic(path, serializeKernelDescriptor(spec, isoTimestampNow()), TempSweep::kNone);
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

}  // namespace gearbox
