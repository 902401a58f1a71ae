// `gearbox recompile-report LOG`: the C++ counterpart of recompiled_op.py. Writes the same
// recompile_op_list.txt, byte for byte, and prints which kernels look like dynamic-shape
// recompiles. See docs/recompile-report.md.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "compiler/recompile_report.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "tools/commands.h"

namespace gearbox::cli {
namespace {

struct RecompileReportOptions {
  std::string log;
  std::string splitFlag{kDefaultSplitFlag};
  std::string output = "recompile_op_list.txt";  // the script's fixed output name
  int stableSteps = 3;
};

// Reads the whole log. POSIX read() rather than a stream so a directory or a read error is an
// error with errno's reason, and a pipe (`<(grep ... nohup.out)`) works as well as a file.
std::string readLog(const std::string& path) {
  // Non-blocking open: a FIFO with no writer would otherwise block here forever. A pipe is
  // still read to its end (blocking reads once open); directories and devices are refused.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) fail(ErrorKind::kIo, "cannot open log '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode))) {
    const unsigned mode = st.st_mode;
    ::close(fd);
    fail(ErrorKind::kIo, "cannot read log '{}': it is {}, not a regular file or a pipe", path,
         fileTypeName(mode));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  std::string text;
  std::vector<char> buffer(1 << 16);
  while (true) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      fail(ErrorKind::kIo, "cannot read log '{}': {}", path, std::strerror(err));
    }
    text.append(buffer.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

void writeAll(int fd, const std::string& contents) {
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category());
    }
    done += static_cast<size_t>(n);
  }
}

// Writes `contents` to a temp file next to `path`, then renames it over `path`, so a reader
// (or a crash) never sees a half-written list. Local on purpose: it must not depend on
// graph/npy's helper, which lives in another branch. `mode` is the mode the file gets.
void writeModeFileAtomic(const std::string& path, const std::string& contents, mode_t mode) {
  std::string tempPath = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tempPath.data());
  if (fd < 0) {
    fail(ErrorKind::kIo, "cannot create a temp file for '{}': {}", path, std::strerror(errno));
  }
  try {
    if (::fchmod(fd, mode) != 0) throw std::system_error(errno, std::generic_category());
    writeAll(fd, contents);
    if (::fsync(fd) != 0) throw std::system_error(errno, std::generic_category());
  } catch (const std::system_error& e) {
    ::close(fd);
    ::unlink(tempPath.c_str());
    fail(ErrorKind::kIo, "cannot write '{}': {}", path, std::strerror(e.code().value()));
  }
  if (::close(fd) != 0 || ::rename(tempPath.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tempPath.c_str());
    fail(ErrorKind::kIo, "cannot write '{}': {}", path, std::strerror(err));
  }
}

// Writes the op list where the script's open(path, 'w') would put it, atomically when that
// is a regular file.
void writeOutput(const std::string& path, const std::string& contents) {
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    // /dev/null, a FIFO, a terminal: renaming a temp file over it would replace the device
    // with a plain file, so write in place like the script. (A directory fails in open().)
    const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) fail(ErrorKind::kIo, "cannot write '{}': {}", path, std::strerror(errno));
    try {
      writeAll(fd, contents);
    } catch (const std::system_error& e) {
      ::close(fd);
      fail(ErrorKind::kIo, "cannot write '{}': {}", path, std::strerror(e.code().value()));
    }
    ::close(fd);
    return;
  }
  // Through a symlink the script writes the link's target; renaming over the link itself
  // would replace the link, so rename over the resolved target instead.
  std::string target = path;
  if (exists) {
    if (char* resolved = ::realpath(path.c_str(), nullptr)) {
      target = resolved;
      std::free(resolved);
    }
  }
  // A new file gets what open() would give it (0666 minus the umask); a replaced file keeps
  // its mode. The CLI is single-threaded here, so the umask round trip cannot race.
  mode_t mode = st.st_mode & 07777;
  if (!exists) {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  writeModeFileAtomic(target, contents, mode);
}

void runRecompileReport(const RecompileReportOptions& opts) {
  const RecompileReport report = parseCompileLog(readLog(opts.log), opts.splitFlag);
  // Summarize before writing so every failure happens before the file is touched.
  const std::string summary = summarize(report, opts.stableSteps);
  writeOutput(opts.output, formatRecompileOpList(report));
  std::cout << summary << "op list written to " << opts.output << "\n";
}

}  // namespace

void registerRecompileReport(CLI::App& app) {
  auto opts = std::make_shared<RecompileReportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "recompile-report",
      "Per-iteration list of compiled kernels from a log (recompiled_op.py's "
      "recompile_op_list.txt) and the kernels that look like dynamic-shape recompiles");
  cmd->add_option("log", opts->log,
                  "Log holding iteration markers and 'To compile op: <kernel>' lines")
      ->required();
  cmd->add_option("--split-flag", opts->splitFlag,
                  "A line containing this text starts the next iteration")
      ->capture_default_str();
  cmd->add_option("-o,--output", opts->output, "Where to write the op list")->capture_default_str();
  cmd->add_option("--stable-steps", opts->stableSteps,
                  "Kernels compiled after this many iterations are dynamic-shape suspects")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  cmd->callback([opts] { runRecompileReport(*opts); });
}

}  // namespace gearbox::cli
