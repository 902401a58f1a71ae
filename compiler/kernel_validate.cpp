#include "compiler/kernel_validate.h"

#include <nlohmann/json.hpp>

#include "compiler/kernel_store.h"
#include "graph/error.h"

namespace gearbox {

void validateAgainstRecompiled(const KernelSpec& loaded) {
  std::shared_ptr<const KernelSpec> fresh;
  try {
    fresh = compileKernelSpec(loaded.key);
  } catch (const Error& e) {
    fail(ErrorKind::kIo, "its key does not compile: {}", e.what());
  }
  // The same "created" stamp on both sides, so only the compiled content is compared.
  const std::string a = serializeKernelDescriptor(loaded, "");
  const std::string b = serializeKernelDescriptor(*fresh, "");
  if (a == b) return;
  // Name the first differing field: a JSON patch from the file's spec to the compiled one.
  const nlohmann::json ja = nlohmann::json::parse(a), jb = nlohmann::json::parse(b);
  const nlohmann::json patch = nlohmann::json::diff(ja, jb);
  for (const auto& op : patch) {
    const std::string path = op.value("path", "");
    if (path == "/hash") continue;
    const nlohmann::json::json_pointer ptr(path);
    fail(ErrorKind::kIo,
         "kernel '{}' differs from the spec compiled from its key at {} (file: {}, compiled: {})",
         loaded.name, path, ja.contains(ptr) ? ja.at(ptr).dump() : "absent",
         jb.contains(ptr) ? jb.at(ptr).dump() : "absent");
  }
  fail(ErrorKind::kIo, "kernel '{}' differs from the spec compiled from its key", loaded.name);
}

}  // namespace gearbox
