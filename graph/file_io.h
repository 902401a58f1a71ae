#pragma once
// The file I/O layer every reader and writer goes through: whole-file reads of regular files
// only (non-blocking open, type checked on the descriptor, a size cap before reading), atomic
// writes (temp file + rename, special files written in place), the sweep of temp files a killed
// writer left, and the one check of an output path before anything is written.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace gearbox {

// Writes `contents` to `path` atomically: a temp file NAME.tmp.PID.N in the same directory,
// then rename(). With kSiblings it first removes the NAME.tmp.* files a killed earlier writer
// left (removeStaleTempFiles); a store that writes many names into one directory passes kNone
// and sweeps the directory once when it opens.
enum class TempSweep { kSiblings, kNone };
void writeFileAtomic(const std::string& path, const std::string& contents,
                     TempSweep sweep = TempSweep::kSiblings);
// The streaming form: `produce` is called once with a sink that takes the contents piece by
// piece, so a report with a million per-iteration records is never held whole in memory. An
// Error thrown by `produce` or by the sink removes the temp file and leaves `path` untouched.
using ByteSink = std::function<void(std::string_view)>;
void writeFileAtomicStream(const std::string& path,
                           const std::function<void(const ByteSink&)>& produce,
                           TempSweep sweep = TempSweep::kSiblings);
// Removes from `dir` the temp files of writeFileAtomic (NAME.tmp.PID.N, NAME starting with
// `prefix`) whose writer is gone: no process PID exists (kill(PID, 0) fails with ESRCH) and
// the file is older than `minAgeSeconds`. The age guard keeps a writer in another pid namespace
// sharing the directory safe: its temp file lives for the milliseconds of one write. Returns
// the number of files removed; errors are ignored (a sweep is housekeeping, never a failure).
size_t removeStaleTempFiles(const std::string& dir, const std::string& prefix = "",
                            double minAgeSeconds = 60);
// The largest file readFile() reads unless told otherwise (4 GiB): well above any model, trace
// or .npy this project handles, and a clear error instead of exhausting memory on a huge file.
constexpr size_t kMaxInputFileBytes = size_t{4} << 30;

// Reads a whole regular file. FIFOs, devices, sockets and directories are refused with an
// Error(kIo) naming the path and what it is, without blocking (the open is non-blocking and the
// type is checked with fstat on the opened descriptor, so there is no check-then-open race).
// A symlink is followed to its target, which must be a regular file.
std::string readFile(const std::string& path, size_t maxBytes = kMaxInputFileBytes);
// Opens `path` read-only after the same checks; returns the descriptor (the caller closes it).
// `what` names the file in errors ("model", "kernel file", ...; "" for just the path).
int openRegularFile(const std::string& path, const char* what);
// "a directory", "a FIFO", "a character device", ... for a st_mode.
const char* fileTypeName(unsigned mode);

// What an output path names, and so which rules checkOutputPath applies.
enum class OutputKind {
  // One file the tool writes (a report, a page, -o): not a directory, and its folder exists and
  // is writable. Checked before anything runs, so a long run never ends in an unwritable path.
  kFile,
  // A directory tree the tool creates files under (--record-op-info): no '..' component and no
  // existing component that is a symlink, Ascend's rule for its build dir; it keeps a recorder
  // from being pointed outside the tree it was given.
  kTree,
};
// The one check of an output path; both kinds refuse an empty path and a NUL byte. Errors name
// `option` ("--json", "-o") and the path: Error(kIo) for a kFile that cannot be written,
// Error(kConfig) for a kTree rule.
void checkOutputPath(std::string_view option, const std::string& path,
                     OutputKind kind = OutputKind::kFile);

}  // namespace gearbox
