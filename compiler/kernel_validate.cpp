#include "compiler/kernel_validate.h"

#include <nlohmann/json.hpp>

#include "compiler/kernel_store.h"
#include "graph/error.h"

namespace gearbox {

std::shared_ptr<const KernelSpec> validateAgainstRecompiled(
    std::shared_ptr<const KernelSpec> loadedPtr) {
  const KernelSpec& loaded = *loadedPtr;
  std::shared_ptr<const KernelSpec> fresh;
  try {
    fresh = compileKernelSpec(loaded.key);
  } catch (const Error& e) {
    fail(ErrorKind::kIo, "its key does not compile: {}", e.what());
  }
  // The same "created" stamp on both sides, so only the compiled content is compared; the
  // values are compared as JSON trees (a bundle of 300,000 kernels validates each one).
  const nlohmann::ordered_json oa = kernelDescriptorBody(loaded, "");
  const nlohmann::ordered_json ob = kernelDescriptorBody(*fresh, "");
  if (oa == ob) return loadedPtr;
  // Compiled for another ISA: a cache entry for another machine, not damage. The spec compiled
  // here replaces it.
  const auto& pa = oa["kernel"]["params"];
  const auto& pb = ob["kernel"]["params"];
  if (pa.is_object() && pb.is_object() && pa.contains("isa") && pb.contains("isa") &&
      pa["isa"] != pb["isa"])
    return fresh;
  // Name the first differing field: a JSON patch from the file's spec to the compiled one.
  const nlohmann::json ja = nlohmann::json::parse(oa.dump()), jb = nlohmann::json::parse(ob.dump());
  const nlohmann::json patch = nlohmann::json::diff(ja, jb);
  for (const auto& op : patch) {
    const std::string path = op.value("path", "");
    const nlohmann::json::json_pointer ptr(path);
    fail(ErrorKind::kIo,
         "kernel '{}' differs from the spec compiled from its key at {} (file: {}, compiled: {})",
         loaded.name, path, ja.contains(ptr) ? ja.at(ptr).dump() : "absent",
         jb.contains(ptr) ? jb.at(ptr).dump() : "absent");
  }
  fail(ErrorKind::kIo, "kernel '{}' differs from the spec compiled from its key", loaded.name);
}

}  // namespace gearbox
