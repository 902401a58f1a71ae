// gearbox import MODEL.onnx -o MODEL.gbx [--name NAME]
//
// The importer itself is Python (python/gearbox/onnx_import.py, docs/import.md): it reads the
// model with python3-onnx, the ONNX project's own reader, shape inference and numpy_helper,
// instead of a second C++ reader of onnx.proto with its own protobuf build. This command only
// finds the interpreter and the gearbox Python package and runs the importer, so `gearbox
// import` needs Python 3 + python3-onnx; every other command works without Python.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "graph/error.h"
#include "tools/commands.h"

extern char** environ;

namespace gearbox::cli {
namespace {

namespace fs = std::filesystem;

std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// The directory holding the `gearbox` Python package: $GEARBOX_PYTHONPATH, else next to this
// binary in a build tree (build/bin/../python), else in an install prefix
// (<prefix>/bin/../<libdir>/gearbox/python).
std::string findPythonDir() {
  if (const char* v = std::getenv("GEARBOX_PYTHONPATH"); v && *v) return v;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path bin = exe.parent_path();
    for (const fs::path& dir :
         {bin / ".." / "python", bin / ".." / GEARBOX_INSTALL_LIBDIR / "gearbox" / "python"}) {
      if (fs::exists(dir / "gearbox" / "onnx_import.py", ec))
        return fs::weakly_canonical(dir).string();
    }
  }
  fail(ErrorKind::kConfig,
       "gearbox import: the gearbox Python package (onnx_import.py) was not found next to {}; "
       "build with -DGEARBOX_BUILD_PYTHON=ON or set GEARBOX_PYTHONPATH",
       ec ? std::string("the gearbox binary") : exe.string());
}

}  // namespace

void registerImport(CLI::App& app) {
  struct Opts {
    std::string model, out, name;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "import", "Import an ONNX model as a .gbx model (+ .npy constants); docs/import.md");
  cmd->add_option("MODEL", o->model, "ONNX model file")->required();
  cmd->add_option("-o,--out", o->out, "The .gbx file to write; .npy files go beside it")
      ->required();
  cmd->add_option("--name", o->name, "Graph name (default: the ONNX graph's name)");
  cmd->callback([o] {
    const std::string python = envOr("GEARBOX_PYTHON", GEARBOX_PYTHON_EXECUTABLE);
    const std::string dir = findPythonDir();
    std::vector<std::string> args = {python, "-m", "gearbox.onnx_import", o->model, "-o", o->out};
    if (!o->name.empty()) args.insert(args.end(), {"--name", o->name});

    // The child sees PYTHONPATH=<dir>[:old PYTHONPATH]; everything else is inherited.
    std::vector<std::string> env;
    const char* oldPath = std::getenv("PYTHONPATH");
    env.push_back("PYTHONPATH=" + dir + (oldPath && *oldPath ? std::string(":") + oldPath : ""));
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "PYTHONPATH=", 11) != 0) env.emplace_back(*e);
    std::vector<char*> argv, envp;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);

    pid_t pid = 0;
    const int rc = posix_spawnp(&pid, python.c_str(), nullptr, nullptr, argv.data(), envp.data());
    if (rc != 0)
      fail(ErrorKind::kConfig,
           "gearbox import needs Python 3 with python3-onnx: cannot run '{}': {} (set "
           "GEARBOX_PYTHON to the interpreter)",
           python, std::strerror(rc));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR)
        fail(ErrorKind::kConfig, "gearbox import: waitpid: {}", std::strerror(errno));
    }
    // The importer prints its own "gearbox: <kind>: ..." message and exits 2 on bad input.
    if (WIFEXITED(status)) {
      gExitCode = WEXITSTATUS(status);
    } else {
      fail(ErrorKind::kConfig, "gearbox import: the importer ({}) was killed by signal {}", python,
           WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    }
  });
}

}  // namespace gearbox::cli
