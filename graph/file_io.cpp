#include "graph/file_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "graph/checked.h"
#include "graph/error.h"

namespace gearbox {

namespace {

std::string errnoText() {
  return std::strerror(errno);
}

}  // namespace

namespace {

// Follows `path` through symlinks (at most 40, like the kernel's ELOOP limit) to the name a
// write should replace; a dangling link resolves to its missing target, which is created.
std::string resolveSymlinks(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p.string();
    std::error_code ec;
    const fs::path target = fs::read_symlink(p, ec);
    if (ec)
      fail(ErrorKind::kIo, "cannot write '{}': reading the symlink failed: {}", path, ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  fail(ErrorKind::kIo, "cannot write '{}': too many levels of symbolic links", path);
}

// Writes into an existing character device or FIFO (/dev/null, a pipe to another process):
// replacing it with a regular file would break it for everyone else.
void writeInPlace(const std::string& path, const std::function<void(const ByteSink&)>& produce) {
  // O_NONBLOCK: a FIFO without a reader fails with ENXIO instead of blocking forever.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENXIO)
      fail(ErrorKind::kIo, "cannot write '{}': it is a FIFO and nothing is reading it", path);
    fail(ErrorKind::kIo, "cannot write '{}': {}", path, errnoText());
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  try {
    produce([&](std::string_view piece) {
      size_t done = 0;
      while (done < piece.size()) {
        const ssize_t n = ::write(fd, piece.data() + done, piece.size() - done);
        if (n < 0) {
          if (errno == EINTR) continue;
          fail(ErrorKind::kIo, "cannot write '{}': {}", path, errnoText());
        }
        done += static_cast<size_t>(n);
      }
    });
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

int64_t envBytes(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  return (end && *end == '\0' && n >= 0) ? static_cast<int64_t>(n) : -1;
}

// Test hooks, read once. GEARBOX_FAIL_WRITE_AFTER=N makes every atomic write fail (ENOSPC) once
// N bytes of it are written: a full disk. GEARBOX_KILL_WRITE_AFTER=N kills the process with
// SIGKILL at that point: a crash mid-write. Tests use them to check that neither loses or
// corrupts a file.
int64_t injectedWriteLimit() {
  static const int64_t limit = envBytes("GEARBOX_FAIL_WRITE_AFTER");
  return limit;
}
int64_t injectedKillPoint() {
  static const int64_t limit = envBytes("GEARBOX_KILL_WRITE_AFTER");
  return limit;
}

}  // namespace

size_t removeStaleTempFiles(const std::string& dir, const std::string& prefix,
                            double minAgeSeconds) {
  namespace fs = std::filesystem;
  size_t removed = 0;
  std::error_code ec;
  fs::directory_iterator it(dir.empty() ? "." : dir, ec), end;
  const auto now = fs::file_time_type::clock::now();
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    // NAME.tmp.PID.N: the last two dot-separated fields are decimal numbers.
    const size_t lastDot = name.rfind('.');
    if (lastDot == std::string::npos || lastDot == 0) continue;
    const size_t pidDot = name.rfind('.', lastDot - 1);
    if (pidDot == std::string::npos || pidDot < 4 || name.compare(pidDot - 4, 4, ".tmp") != 0)
      continue;
    const std::string pidText = name.substr(pidDot + 1, lastDot - pidDot - 1);
    const std::string counterText = name.substr(lastDot + 1);
    auto decimal = [](const std::string& t) {
      return !t.empty() && t.size() <= 18 &&
             std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (!decimal(pidText) || !decimal(counterText)) continue;
    const long long pid = std::stoll(pidText);
    if (pid <= 0 || pid > std::numeric_limits<pid_t>::max() || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or unknown
    std::error_code fileEc;
    if (!it->is_regular_file(fileEc) || fileEc) continue;
    const auto mtime = it->last_write_time(fileEc);
    if (fileEc || std::chrono::duration<double>(now - mtime).count() < minAgeSeconds) continue;
    if (fs::remove(it->path(), fileEc) && !fileEc) ++removed;
  }
  return removed;
}

void writeFileAtomic(const std::string& path, const std::string& contents, TempSweep sweep) {
  writeFileAtomicStream(
      path, [&](const ByteSink& sink) { sink(contents); }, sweep);
}

void writeFileAtomicStream(const std::string& requested,
                           const std::function<void(const ByteSink&)>& produce, TempSweep sweep) {
  // Writers never replace what the path is: a symlink is followed and its target replaced, a
  // character device or FIFO is written in place, anything else that is not a regular file is
  // refused (docs/architecture.md, "Files gearbox writes").
  const std::string path = resolveSymlinks(requested);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return writeInPlace(path, produce);
    fail(ErrorKind::kIo, "cannot write '{}': it is {}, not a regular file", requested,
         fileTypeName(st.st_mode));
  }
  if (sweep == TempSweep::kSiblings) {
    const std::filesystem::path p(path);
    removeStaleTempFiles(p.parent_path().string(), p.filename().string() + ".tmp.");
  }
  // A unique sibling name: the same directory keeps rename() atomic (same filesystem), and
  // O_EXCL with the pid and a counter keeps concurrent writers from sharing a temp file.
  static std::atomic<uint64_t> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) fail(ErrorKind::kIo, "cannot write '{}': {}", path, errnoText());

  auto abandon = [&](std::string_view step) {
    const std::string why = errnoText();
    if (fd >= 0) ::close(fd);
    fd = -1;
    ::unlink(tmp.c_str());
    fail(ErrorKind::kIo, "cannot write '{}': {} failed: {}", path, step, why);
  };
  size_t done = 0;  // over all pieces: the injected limits count the whole file
  const int64_t injected = injectedWriteLimit();
  const int64_t killAt = injectedKillPoint();
  const ByteSink sink = [&](std::string_view piece) {
    size_t at = 0;
    while (at < piece.size()) {
      size_t chunk = piece.size() - at;
      if (killAt >= 0) {
        if (done >= static_cast<size_t>(killAt)) ::kill(::getpid(), SIGKILL);
        chunk = std::min(chunk, static_cast<size_t>(killAt) - done);
      }
      if (injected >= 0) {
        if (done >= static_cast<size_t>(injected)) {
          errno = ENOSPC;
          abandon("write");
        }
        chunk = std::min(chunk, static_cast<size_t>(injected) - done);
      }
      const ssize_t n = ::write(fd, piece.data() + at, chunk);
      if (n < 0) {
        if (errno == EINTR) continue;
        abandon("write");
      }
      at += static_cast<size_t>(n);
      done += static_cast<size_t>(n);
    }
  };
  try {
    produce(sink);
  } catch (...) {
    // abandon() has already closed and removed the temp file when the sink failed.
    if (fd >= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
    }
    throw;
  }
  // fsync before rename: otherwise a crash can leave the new name pointing at empty data.
  if (::fsync(fd) != 0) abandon("fsync");
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) abandon("close");
  if (::rename(tmp.c_str(), path.c_str()) != 0) abandon("rename");
  // Persist the rename itself. Failure here does not lose the data already written, so it is
  // best effort rather than an error.
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

int openRegularFile(const std::string& path, const char* what) {
  // O_NONBLOCK: opening a FIFO with no writer (or some devices) would otherwise block forever
  // before fstat could tell what it is. A regular file ignores the flag.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  const std::string label = *what ? fmt::format("{} '{}'", what, path) : fmt::format("'{}'", path);
  if (fd < 0) fail(ErrorKind::kIo, "cannot read {}: {}", label, errnoText());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string why = errnoText();
    ::close(fd);
    fail(ErrorKind::kIo, "cannot read {}: {}", label, why);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorKind::kIo, "cannot read {}: it is {}, not a regular file", label,
         fileTypeName(st.st_mode));
  }
  return fd;
}

const char* fileTypeName(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISREG(mode)) return "a regular file";
  return "not a regular file";
}

std::string readFile(const std::string& path, size_t maxBytes) {
  const int fd = openRegularFile(path, "");
  struct stat st {};
  if (::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) > maxBytes) {
    ::close(fd);
    fail(ErrorKind::kIo, "cannot read '{}': it is {} bytes, above the limit of {} bytes", path,
         static_cast<uint64_t>(st.st_size), maxBytes);
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string why = errnoText();
      ::close(fd);
      fail(ErrorKind::kIo, "cannot read '{}': {}", path, why);
    }
    if (n == 0) break;
    // The file may grow while it is read; the limit holds for what is actually read.
    if (out.size() + static_cast<size_t>(n) > maxBytes) {
      ::close(fd);
      fail(ErrorKind::kIo, "cannot read '{}': more than the limit of {} bytes", path, maxBytes);
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

void checkOutputPath(std::string_view option, const std::string& path, OutputKind kind) {
  namespace fs = std::filesystem;
  if (path.empty()) {
    fail(kind == OutputKind::kFile ? ErrorKind::kIo : ErrorKind::kConfig, "{}: the path is empty",
         option);
  }
  if (const size_t nul = path.find('\0'); nul != std::string::npos) {
    // Printed up to the NUL with an escape: a raw NUL would end the message for every C reader.
    fail(ErrorKind::kConfig, "{} '{}\\0...': the path contains a NUL byte", option,
         path.substr(0, nul));
  }
  const fs::path p(path);
  if (kind == OutputKind::kFile) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) fail(ErrorKind::kIo, "{} {}: is a directory", option, path);
    fs::path dir = p.parent_path();
    if (dir.empty()) dir = ".";
    if (!fs::is_directory(dir, ec))
      fail(ErrorKind::kIo, "{} {}: directory {} does not exist", option, path, dir.string());
    if (::access(dir.c_str(), W_OK) != 0)
      fail(ErrorKind::kIo, "{} {}: directory {} is not writable", option, path, dir.string());
    return;
  }
  for (const fs::path& part : p)
    if (part == "..")
      fail(ErrorKind::kConfig, "{} '{}': paths containing '..' are refused", option, path);
  // Every existing component is checked with lstat(): a symlink anywhere would let the output
  // land outside the directory the user named. The walk stops at the first missing component,
  // since nothing below it can exist.
  fs::path prefix;
  for (const fs::path& part : p) {
    prefix /= part;
    if (part == "/" || part == "." || part.empty()) continue;
    struct stat st {};
    if (::lstat(prefix.c_str(), &st) != 0) break;
    if (S_ISLNK(st.st_mode))
      fail(ErrorKind::kConfig, "{} '{}': component '{}' is a symlink; symlinks are refused", option,
           path, prefix.string());
  }
}

}  // namespace gearbox
