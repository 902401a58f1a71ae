// gearbox: a graph-compiler backend simulator. See README.md.
#include <spdlog/spdlog.h>

#include <exception>
#include <iostream>

#include "compiler/cpu_isa.h"
#include "executor/modes/mode_table.h"
#include "gearbox/version.h"
#include "graph/error.h"
#include "tools/commands.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

int main(int argc, char** argv) {
  // glibc raises its mmap threshold to the size of every large block freed (up to 32 MiB), so
  // after the first few calls each call's tensors (megabytes, a new size per call) come from the
  // heap, and the holes they leave are never returned: eager over batches 1..800 of
  // examples/mlp.gbx held 1.8 GB (issue 22). Pinning the threshold at its default (128 KiB)
  // keeps large tensors in mmap'd pages, returned when freed: 27 MB, same run time.
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
  CLI::App app{"gearbox: compile a graph per shape, run it in " +
                   gearbox::joinModeNames(gearbox::ModeSet::kAll) +
                   " mode, and measure what shape changes cost",
               "gearbox"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Expand all help");
  // The ISA the kernels run with is decided here, before any command: a bad GEARBOX_ISA is bad
  // input (exit 2, the variable named), whatever the command.
  std::string isa;
  try {
    isa = gearbox::isaDescription();
  } catch (const gearbox::Error& e) {
    std::cerr << "gearbox: " << gearbox::errorKindName(e.kind()) << ": " << e.what() << "\n";
    return 2;
  }
  app.set_version_flag("--version", std::string("gearbox ") + GEARBOX_VERSION + "\n" + isa);
  gearbox::cli::registerPrint(app);
  gearbox::cli::registerRun(app);
  gearbox::cli::registerEval(app);
  gearbox::cli::registerCompare(app);
  gearbox::cli::registerSweep(app);
  gearbox::cli::registerRecompileReport(app);
  gearbox::cli::registerGears(app);
  gearbox::cli::registerKernels(app);
  gearbox::cli::registerPrecompile(app);
  gearbox::cli::registerCalibrate(app);
  gearbox::cli::registerImport(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Bad command lines are user input: one message, exit 2 (CLI11 would use 105-ish codes).
    app.exit(e);
    return 2;
  } catch (const gearbox::Error& e) {
    std::cerr << "gearbox: " << gearbox::errorKindName(e.kind()) << ": " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "gearbox: out of memory\n";
    return 2;
  } catch (const std::exception& e) {
    // The one error boundary: whatever a library throws past the checks (a JSON type error, a
    // filesystem error) is still a failed command with exit 2 and a message, never an abort.
    // Not every message is gearbox's own wording, so the label says so.
    std::cerr << "gearbox: error: " << e.what() << "\n";
    return 2;
  }
  return gearbox::cli::gExitCode;
}
