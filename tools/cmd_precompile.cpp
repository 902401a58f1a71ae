// `gearbox precompile DIR [-o BUNDLE]`: seed 003's static kernel compile. Reads the op-info
// files a `--record-op-info DIR` run wrote, compiles one kernel per recorded shape in
// parallel and writes them into one bundle, which `--kernel-bundle` loads so the recorded
// shapes compile nothing. See docs/kernel-meta.md.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>

#include "compiler/kernel_store.h"
#include "driver/run_options.h"
#include "graph/error.h"
#include "tools/commands.h"

namespace gearbox::cli {
namespace {

struct PrecompileOptions {
  std::string dir, output;
  int threads = 0;
};

void runPrecompile(const PrecompileOptions& o) {
  const PrecompileResult r = precompileBundle(o.dir, o.output, o.threads);
  std::cout << fmt::format("read {} op-info records from {}\n", r.records, r.recordDir);
  if (r.skippedDynamic)
    std::cout << fmt::format("skipped {} records with dynamic dims (no static kernel possible)\n",
                             r.skippedDynamic);
  std::cout << fmt::format("compiled {} {} in {} (measured) on {} {}\n", r.kernels,
                           r.kernels == 1 ? "kernel" : "kernels", formatSeconds(r.seconds),
                           r.threads, r.threads == 1 ? "thread" : "threads");
  std::cout << fmt::format("bundle written to {}\n", r.bundlePath);
}

}  // namespace

void registerPrecompile(CLI::App& app) {
  auto o = std::make_shared<PrecompileOptions>();
  CLI::App* cmd = app.add_subcommand(
      "precompile",
      "Compile one static kernel per op recorded by --record-op-info into a bundle "
      "for --kernel-bundle");
  cmd->add_option("DIR", o->dir,
                  "The --record-op-info DIR, its aclnn_static_shape_kernel_outputs folder, a "
                  "ts..._outputs folder or a folder of op-info files")
      ->required();
  cmd->add_option("-o,--output", o->output,
                  "Bundle to write (default: <ts dir>/static_kernel_<datetime>.run)");
  cmd->add_option("--threads", o->threads,
                  "Compile the kernels for this thread cap, the --threads of the runs that load "
                  "the bundle (0: no cap, as those runs without --threads)")
      ->check(CLI::Range(0, kMaxThreads));
  cmd->callback([o] { runPrecompile(*o); });
}

}  // namespace gearbox::cli
