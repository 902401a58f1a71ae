// The package-facing CLI: --version and `gearbox import`'s handling of a missing Python
// (the importer itself is tested with pytest: tests/python/test_onnx_import.py).
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_util.h"
#include "compiler/cpu_isa.h"
#include "gearbox/version.h"
#include "temp_dir.h"

namespace gearbox {
namespace {

using testing_util::runGearbox;
using testing_util::shellQuote;
using testing_util::TempDir;

TEST(PackageCli, VersionPrintsTheProjectVersionAndTheIsa) {
  const auto r = runGearbox("--version");
  EXPECT_EQ(r.exitCode, 0);
  // The second line: the ISA the kernels run with and what the CPU has (compiler/cpu_isa.h).
  EXPECT_EQ(r.output, std::string("gearbox ") + GEARBOX_VERSION + "\n" + isaDescription() + "\n");
}

TEST(PackageCli, ImportWithoutPythonIsAClearConfigError) {
  TempDir dir;
  const std::string out = (dir.path() / "m.gbx").string();
  // The interpreter is taken from GEARBOX_PYTHON: point it at nothing (and the package dir at
  // an existing one, so Release and ASan builds, with and without the Python module, agree).
  const std::string cmd =
      "GEARBOX_PYTHON=/nonexistent/python3 GEARBOX_PYTHONPATH=" + shellQuote(dir.path().string()) +
      " " + shellQuote(GEARBOX_BINARY) + " import model.onnx -o " + shellQuote(out) + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  const int status = ::pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(output.find("gearbox: config error: gearbox import needs Python 3 with python3-onnx: "
                        "cannot run '/nonexistent/python3'"),
            std::string::npos)
      << output;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace gearbox
