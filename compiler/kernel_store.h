#pragma once
// Kernel persistence and the static-kernel workflow (seeds 000 and 003, docs/kernel-meta.md).
//
// A KernelSpec is fully determined by its KernelKey, so what gearbox persists is a kernel
// *descriptor*: a small JSON file holding the key, the kernel name and every parameter the
// compile decided, plus a content hash. Loading one is parsing and checking, not compiling.
//
//   KernelMetaStore   --kernel-meta DIR: one <kernel name>.json per compiled kernel, so
//                     `ls DIR | wc -l` counts the kernels compiled so far (seed 000).
//   OpInfoRecorder    --record-op-info DIR: one op-info JSON per distinct op record, in the
//                     aclnn_static_shape_kernel_outputs layout of seed 003.
//   precompileBundle  `gearbox precompile`: compiles one kernel per recorded op, in parallel,
//                     into one bundle file (the static_kernel_<datetime>.run package).
//   BundleStore       --kernel-bundle FILE: serves the bundle's kernels, so a later run
//                     compiles nothing for the recorded shapes.
//
// Trust model: like Ascend's kernel_meta (which holds device binaries that are executed),
// descriptors are trusted local files. The hash catches truncation and bit rot, and a loaded
// spec is checked for internal consistency with its key (extents, offsets, vector sizes) so
// that a damaged file can never make a kernel read out of bounds; neither is a defence
// against someone who rewrites a file on purpose and recomputes its hash.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/compiler.h"
#include "compiler/kernel_spec.h"

namespace gearbox {

// ---- Descriptors ----------------------------------------------------------------------------

// Format tag and version written into every descriptor and bundle. A reader refuses other
// versions instead of guessing at a layout it does not know.
inline constexpr const char* kKernelDescriptorFormat = "gearbox-kernel";
inline constexpr const char* kKernelBundleFormat = "gearbox-kernel-bundle";
inline constexpr int kKernelStoreVersion = 1;

// 64-bit FNV-1a of `bytes`, printed as 16 lower-case hex digits. Used as a content checksum.
std::string fnv1a64Hex(std::string_view bytes);

// The descriptor of `spec` as a JSON object; `created` is an ISO 8601 UTC time. The "hash"
// field covers the compact dump of every other field.
nlohmann::ordered_json kernelDescriptorJson(const KernelSpec& spec, const std::string& created);
// The same without the "hash" key: what validation compares (no dump, no hash per kernel).
nlohmann::ordered_json kernelDescriptorBody(const KernelSpec& spec, const std::string& created);
// kernelDescriptorJson, pretty-printed, with a trailing newline: the file contents.
std::string serializeKernelDescriptor(const KernelSpec& spec, const std::string& created);

struct KernelDescriptor {
  std::shared_ptr<const KernelSpec> spec;
  std::string created;
  // The file's spec was compiled for another ISA than this process runs (compiler/cpu_isa.h):
  // `spec` is the one compiled here from the key instead.
  bool recompiledForIsa = false;
};

// Parses and checks one descriptor: format and version, hash, key, params, and that the
// params are consistent with the key. Throws Error(kIo) whose message says what is wrong
// (the caller prefixes the file name).
KernelDescriptor parseKernelDescriptor(const nlohmann::ordered_json& j);
KernelDescriptor parseKernelDescriptor(const std::string& text);

// The key as JSON ({op, dtype, format, inputs:[{dtype, shape}], attrs:{dim}}) and back.
// Symbolic dims are written by name and re-interned on load, because symbol ids are only
// meaningful inside one process. keyFromJson throws Error(kIo).
nlohmann::ordered_json keyToJson(const KernelKey& key);
KernelKey keyFromJson(const nlohmann::ordered_json& j);

// The file name (without directory) a kernel gets in a kernel_meta directory:
// "<kernel name>.json" when that fits in 255 bytes and the name identifies the key; otherwise
// a 200-byte prefix of the name, "_" and a hash of the key. Names identify the key unless a
// shape holds a named symbolic dim (printed as -1 like an anonymous one).
std::string kernelFileName(const KernelKey& key);

// Current time as ISO 8601 UTC with microseconds: "2024-05-01T12:34:56.123456Z".
std::string isoTimestampNow();

// ---- kernel_meta directory -----------------------------------------------------------------

// A persistent directory of kernel descriptors, one file per distinct kernel and nothing
// else, shared by every process pointed at it. Never throws on I/O trouble: an unusable
// directory is one warning and the run goes on without persistence; a damaged file is one
// warning (per file) and a miss, so the kernel is recompiled and the file rewritten.
// Thread-safe (geared mode compiles gears in parallel).
class KernelMetaStore final : public KernelStore {
 public:
  struct Stats {
    int64_t loads = 0;         // kernels served from the directory
    int64_t misses = 0;        // no file for the key
    int64_t corrupt = 0;       // files that failed to parse or check (each counted once)
    int64_t saves = 0;         // descriptors written
    int64_t saveFailures = 0;  // writes that failed (skipped; the first one is logged)
    // Files compiled for another ISA (another machine, or GEARBOX_ISA): the kernel was compiled
    // here from the file's key instead, and the file left as it is.
    int64_t otherIsa = 0;
  };

  // Creates `dir` (and parents) when missing. Failure to create it is a warning, not an error.
  explicit KernelMetaStore(std::string dir);

  std::shared_ptr<const KernelSpec> load(const KernelKey& key) override;
  void save(const KernelSpec& spec) override;

  const std::string& dir() const { return dir_; }
  // False when the directory could not be created or written: nothing is persisted.
  bool usable() const { return usable_.load(); }
  Stats stats() const;

 private:
  void warnOnce(const std::string& path, const std::string& why);
  void disable(const std::string& why);

  std::string dir_;
  std::atomic<bool> usable_{true};
  mutable std::mutex mu_;
  std::set<std::string> warned_;  // files already reported as damaged
  Stats stats_;
};

// One entry of `gearbox kernels DIR`.
struct KernelFileInfo {
  std::string file;  // file name inside the directory
  int64_t bytes = 0;
  std::string created;                     // from the descriptor; "" when damaged
  std::shared_ptr<const KernelSpec> spec;  // nullptr when damaged
  std::string problem;                     // why the file is damaged; "" when fine
};
// Reads every regular file in a kernel_meta directory, sorted by name. Leftover temp files
// from an interrupted write and any other foreign file are listed as damaged. Throws
// Error(kIo) when `dir` cannot be read.
std::vector<KernelFileInfo> listKernelDir(const std::string& dir);

// ---- Bundles --------------------------------------------------------------------------------

// One file holding many descriptors: {format, version, created, kernels:[...], hash}.
std::string serializeKernelBundle(const std::vector<std::shared_ptr<const KernelSpec>>& specs,
                                  const std::string& created);
// Parses and checks a bundle; every problem is an Error(kIo) naming `path`.
std::vector<std::shared_ptr<const KernelSpec>> loadKernelBundle(const std::string& path);

// Serves the kernels of one or more bundles from memory. save() does nothing: a bundle is
// built by `gearbox precompile`, never by a run.
class BundleStore final : public KernelStore {
 public:
  BundleStore() = default;
  // Loads `path`; a bad file is an Error(kIo) naming it (the user asked for this file).
  explicit BundleStore(const std::string& path) { addBundle(path); }
  void addBundle(const std::string& path);
  void add(std::shared_ptr<const KernelSpec> spec);

  std::shared_ptr<const KernelSpec> load(const KernelKey& key) override;
  void save(const KernelSpec&) override {}

  bool has(const KernelKey& key) override { return kernels_.count(key) > 0; }
  size_t size() const { return kernels_.size(); }
  int64_t hits() const { return hits_.load(); }

 private:
  std::unordered_map<KernelKey, std::shared_ptr<const KernelSpec>> kernels_;
  std::atomic<int64_t> hits_{0};
};

// ---- Op-info records (seed 003) --------------------------------------------------------------

inline constexpr const char* kOpInfoTopDir = "aclnn_static_shape_kernel_outputs";

// The op-info JSON of one kernel key: {op_type, inputs[], outputs[], attrs[]}, each tensor
// with name, index, dtype, shape, format, origin_shape, origin_format, each attr with name,
// dtype, index, value. Dynamic dims are written as -1.
nlohmann::ordered_json opInfoJson(const KernelKey& key);
// "{Op}_{dtype}_{format}_{dims of input 0 joined by _}_{counter}.json", or
// "{Op}_{counter}.json" without input 0. A rank-0 input 0 contributes no dims.
std::string opInfoFileName(const KernelKey& key, int counter);

// Writes one op-info file per distinct op record of a run:
//   DIR/aclnn_static_shape_kernel_outputs/ts<YYYYmmddHHMMSSffffff>_pid<pid>_outputs/
//     <pid>/        selected ops: static-shape kernels, the ones a static kernel can be
//                   precompiled for;
//     <pid>_debug/  every kernel the run needed, including shape-generic ones (dims -1).
// Each file is written atomically as soon as its op is first seen, so the record is complete
// whenever the run stops. Thread-safe. Must be owned by a std::shared_ptr: observer() and
// hook() keep the recorder alive for as long as a kernel cache holds them.
class OpInfoRecorder : public std::enable_shared_from_this<OpInfoRecorder> {
 public:
  // Checks `dir` (checkOutputPath, OutputKind::kTree) and creates the run's directories. Throws
  // Error(kConfig) for a refused path and Error(kIo) when the directories cannot be created.
  explicit OpInfoRecorder(const std::string& dir);

  // Records the op of `key` (once per distinct record). Throws Error(kIo) if a write fails.
  void record(const KernelKey& key);

  // A KernelStore that records every key the kernel cache looks up and never serves one.
  // Register it before any other store: a compile hook alone would miss the kernels loaded
  // from --kernel-meta or a bundle, and a run that found everything on disk would record
  // nothing.
  std::shared_ptr<KernelStore> observer();
  // A compile hook that records the compiled kernel (for callers that only have hooks).
  KernelCompileHook hook();

  const std::string& runDir() const { return runDir_; }         // ts..._pid..._outputs
  const std::string& selectedDir() const { return selected_; }  // <pid>
  const std::string& debugDir() const { return debug_; }        // <pid>_debug
  int64_t selectedCount() const;
  int64_t debugCount() const;

 private:
  std::string runDir_, selected_, debug_;
  mutable std::mutex mu_;
  std::set<std::string> seenSelected_, seenDebug_;  // canonical record JSON
  int selectedCounter_ = 0, debugCounter_ = 0;
};

// ---- Precompile ------------------------------------------------------------------------------

struct PrecompileResult {
  std::string recordDir;       // the folder whose op-info files were read
  std::string bundlePath;      // where the bundle was written
  int64_t records = 0;         // op-info files read
  int64_t kernels = 0;         // distinct kernels compiled into the bundle
  int64_t skippedDynamic = 0;  // records with dynamic dims (no static kernel possible)
  int threads = 0;             // distinct threads that compiled at least one kernel
  double seconds = 0;          // measured wall time of the parallel compile
};

// Finds the selected-ops folder to precompile from `dir`: the top-level build dir (holding
// aclnn_static_shape_kernel_outputs), that folder itself, a ts..._pid..._outputs folder (the
// newest is taken when there are several), or a folder of op-info files. Throws Error(kIo).
// `runDir` receives the ts folder when there is one, else `dir`.
std::string findOpInfoDir(const std::string& dir, std::string* runDir = nullptr);

// Parses one op-info file back into a kernel key. Bad or missing fields are Error(kParse)
// naming `file` and the field.
KernelKey opInfoToKey(const nlohmann::ordered_json& j, const std::string& file);

// Reads every op-info JSON of `recordDir` (see findOpInfoDir), compiles one kernel per distinct
// record in parallel (oneTBB) and writes the bundle atomically to `output`, or by default to
// <ts dir>/static_kernel_<YYYYmmddHHMMSS>.run. `kernelThreads` is the thread cap the kernels
// are compiled for (KernelKey::threads; 0 = none), the --threads of the runs that will load it.
PrecompileResult precompileBundle(const std::string& recordDir, const std::string& output = "",
                                  int kernelThreads = 0);

}  // namespace gearbox
