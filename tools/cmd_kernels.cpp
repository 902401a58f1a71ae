// `gearbox kernels DIR`: what a --kernel-meta directory holds, one line per file (op, dtype,
// input shapes, attributes, size, creation time), with damaged files flagged. The seed 000
// workflow counts kernels with `ls DIR | wc -l` and finds the newest with `ls -lt`; this is
// the same view with the kernel names decoded. See docs/kernel-meta.md.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "compiler/kernel_store.h"
#include "graph/error.h"
#include "tools/commands.h"

namespace gearbox::cli {
namespace {

struct KernelsOptions {
  std::string dir;
  bool newestFirst = false;
};

std::string describeShapes(const KernelSpec& s) {
  std::string out;
  for (const TensorType& t : s.key.inputs) {
    if (!out.empty()) out += ' ';
    out += '[';
    for (int i = 0; i < t.shape.rank(); ++i) out += (i ? "," : "") + dimToString(t.shape[i]);
    out += ']';
    // Index inputs differ from the data dtype; say so, as the kernel name does.
    if (t.dtype != s.key.dtype) out += fmt::format(":{}", dtypeKernelName(t.dtype));
  }
  return out;
}

void listKernels(const KernelsOptions& o) {
  std::vector<KernelFileInfo> files = listKernelDir(o.dir);
  if (o.newestFirst) {
    // ISO 8601 UTC timestamps sort as text; damaged files (no time) go last.
    std::stable_sort(files.begin(), files.end(),
                     [](const auto& a, const auto& b) { return a.created > b.created; });
  }
  struct Row {
    std::string op, dtype, shapes, attrs, bytes, created, file;
  };
  std::vector<Row> rows;
  int64_t total = 0, damaged = 0;
  // "dim=1", "shape=[4,8,-1]" (-2: the input's dim there), "perm=[0,2,1]", or "-".
  auto describeAttrs = [](const Attrs& a) -> std::string {
    auto list = [](const Shape& s) {
      std::string out = "[";
      for (int i = 0; i < s.rank(); ++i) out += fmt::format("{}{}", i ? "," : "", s[i]);
      return out + "]";
    };
    if (a.dim) return fmt::format("dim={}", *a.dim);
    if (a.shape) return "shape=" + list(*a.shape);
    if (a.perm) return "perm=" + list(*a.perm);
    return "-";
  };
  // Typed attributes as the IR writes them (defaults left out), after the legacy ones above.
  auto describeKeyAttrs = [&](const KernelKey& k) {
    std::string legacy = describeAttrs(k.attrs);
    Attrs typed = k.attrs;
    typed.dim.reset();
    typed.shape.reset();
    typed.perm.reset();
    std::string rest = formatAttrs(k.kind, typed);  // ", name=value, ..."
    if (rest.empty()) return legacy;
    rest = rest.substr(2);
    return legacy == "-" ? rest : legacy + ", " + rest;
  };
  for (const KernelFileInfo& f : files) {
    total += f.bytes;
    if (!f.spec) {
      ++damaged;
      continue;
    }
    const KernelSpec& s = *f.spec;
    rows.push_back(Row{std::string(opKernelName(s.key.kind)),
                       std::string(dtypeKernelName(s.key.dtype)), describeShapes(s),
                       describeKeyAttrs(s.key), std::to_string(f.bytes), f.created, f.file});
  }
  Row header{"OP", "DTYPE", "SHAPES", "ATTRS", "BYTES", "CREATED", "FILE"};
  size_t w[6] = {};
  auto widen = [&w](const Row& r) {
    const std::string* cols[6] = {&r.op, &r.dtype, &r.shapes, &r.attrs, &r.bytes, &r.created};
    for (int i = 0; i < 6; ++i) w[i] = std::max(w[i], cols[i]->size());
  };
  widen(header);
  for (const Row& r : rows) widen(r);
  auto print = [&w](const Row& r) {
    std::cout << fmt::format("{:<{}}  {:<{}}  {:<{}}  {:<{}}  {:>{}}  {:<{}}  {}\n", r.op, w[0],
                             r.dtype, w[1], r.shapes, w[2], r.attrs, w[3], r.bytes, w[4], r.created,
                             w[5], r.file);
  };
  print(header);
  for (const Row& r : rows) print(r);
  for (const KernelFileInfo& f : files)
    if (!f.spec)
      std::cout << fmt::format("DAMAGED  {} ({} bytes): {}\n", f.file, f.bytes, f.problem);
  std::cout << fmt::format("{} kernels, {} damaged files, {} bytes in {}\n", rows.size(), damaged,
                           total, o.dir);
}

}  // namespace

void registerKernels(CLI::App& app) {
  auto o = std::make_shared<KernelsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "kernels", "List the kernels persisted in a --kernel-meta directory; flag damaged files");
  cmd->add_option("DIR", o->dir, "The --kernel-meta directory")->required();
  cmd->add_flag("-t,--newest-first", o->newestFirst,
                "Newest kernels first (like ls -lt: the shapes compiled last)");
  cmd->callback([o] { listKernels(*o); });
}

}  // namespace gearbox::cli
