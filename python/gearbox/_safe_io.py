"""File rules for gearbox's Python side (the ONNX importer), the same as the C++ readers and
writers follow (graph/file_io.h, docs/hardening.md "Files"):

- Reading: regular files only. The open is non-blocking, so a FIFO with no writer is refused
  instead of hanging, and the type is checked with fstat on the opened descriptor (no
  check-then-open race); the size is checked against a limit before a byte is read, so
  /dev/zero or a huge file fails at once instead of filling memory.
- Data a model points at (ONNX external data) must be a regular file inside the model's own
  folder: absolute locations, ".." and symlinks that lead out of the folder are refused, so a
  model cannot make the importer copy /etc/passwd into a .npy file.
- Writing: every file of one output (the .gbx and its .npy files) is staged first and then put
  in place together; if any step fails, the files already replaced get their old contents back
  and the new ones are removed, so nothing is left half-way. A path that is a symlink is
  followed and its target replaced (the link stays); a character device or FIFO is written in
  place (a FIFO with no reader is an error, not a hang); anything else that is not a regular
  file, or an existing directory, is refused.

Every refusal is a FileRuleError, a gearbox.Error of kind "io" naming the path.
"""

import errno
import os
import stat
import tempfile

from . import _gearbox

# As graph/file_io.h kMaxInputFileBytes: well above any model this project handles.
MAX_INPUT_FILE_BYTES = 4 << 30


class FileRuleError(_gearbox.Error):
    """A file gearbox will not read or write; kind "io" like gearbox.Error's I/O errors."""

    def __init__(self, message, kind="io"):
        super().__init__(message)
        self.kind = kind
        self.label = "I/O error" if kind == "io" else f"{kind} error"


def file_type_name(mode):
    """'a FIFO', 'a directory', ... for an st_mode, worded as the C++ fileTypeName."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"),
                       (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "not a regular file"


def _why(e):
    return e.strerror or str(e)


def open_regular(path, what="", nofollow=False):
    """Opens `path` read-only, refusing anything but a regular file without blocking (and,
    with `nofollow`, a symlink as the last component). Returns (fd, size); the caller closes
    fd."""
    label = f"{what} '{path}'" if what else f"'{path}'"
    flags = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_NOCTTY", 0) | (getattr(os, "O_NOFOLLOW", 0) if nofollow else 0))
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise FileRuleError(f"cannot read {label}: {_why(e)}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRuleError(
                f"cannot read {label}: it is {file_type_name(st.st_mode)}, not a regular file")
        return fd, st.st_size
    except BaseException:
        os.close(fd)
        raise


def _read_exactly(fd, offset, length, label):
    chunks, done = [], 0
    while done < length:
        piece = os.pread(fd, min(1 << 24, length - done), offset + done)
        if not piece:
            raise FileRuleError(f"cannot read {label}: it ended after {offset + done} bytes "
                                f"(expected {offset + length})")
        chunks.append(piece)
        done += len(piece)
    return b"".join(chunks)


def read_file(path, what="", limit=None):
    """The whole of a regular file, its size checked against `limit` (default
    MAX_INPUT_FILE_BYTES) before reading."""
    label = f"{what} '{path}'" if what else f"'{path}'"
    limit = MAX_INPUT_FILE_BYTES if limit is None else limit
    fd, size = open_regular(path, what)
    try:
        if size > limit:
            raise FileRuleError(
                f"cannot read {label}: it is {size} bytes, above the limit of {limit} bytes")
        # A file that grows while read is read as long as it was when opened.
        return _read_exactly(fd, 0, size, label)
    finally:
        os.close(fd)


def _inside(path, folder):
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def read_beside(folder, location, offset, length, what):
    """`length` bytes at `offset` of the file `location` names relative to `folder` (None:
    to the end). The file must resolve, symlinks and all, to a regular file inside `folder`."""
    if not location or os.path.isabs(location) or "\0" in location:
        raise FileRuleError(f"{what}: location '{location}' must be a relative file name "
                            "inside the model's folder")
    real_folder = os.path.realpath(folder)
    real = os.path.realpath(os.path.join(folder, location))
    if not _inside(real, real_folder) or real == real_folder:
        raise FileRuleError(f"{what}: location '{location}' leads outside the model's folder "
                            f"{real_folder} (to {real})")
    label = f"{what} '{location}'"
    # The resolved path is opened, so a symlink swapped in after the check is not followed
    # out of the folder; O_NOFOLLOW refuses a last component replaced by a link meanwhile.
    fd, size = open_regular(real, label, nofollow=True)
    try:
        if offset < 0 or (length is not None and length < 0):
            raise FileRuleError(f"cannot read {label}: negative offset or length")
        if offset > size:
            raise FileRuleError(
                f"cannot read {label}: offset {offset} is past its end ({size} bytes)")
        n = size - offset if length is None else length
        if offset + n > size:
            raise FileRuleError(f"cannot read {label}: {n} bytes at offset {offset} run past "
                                f"its end ({size} bytes)")
        if n > MAX_INPUT_FILE_BYTES:
            raise FileRuleError(f"cannot read {label}: {n} bytes, above the limit of "
                                f"{MAX_INPUT_FILE_BYTES} bytes")
        return _read_exactly(fd, offset, n, label)
    finally:
        os.close(fd)


def resolve_symlinks(path):
    """The path a write to `path` lands on: symlinks followed (up to 40 hops), like the C++
    writers, so the link is kept and its target replaced."""
    p = path
    for _ in range(40):
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            return p
        except OSError as e:
            raise FileRuleError(f"cannot write '{path}': {_why(e)}") from None
        if not stat.S_ISLNK(st.st_mode):
            return p
        target = os.readlink(p)
        p = target if os.path.isabs(target) else os.path.join(os.path.dirname(p), target)
    raise FileRuleError(f"cannot write '{path}': too many levels of symbolic links")


def check_output_path(path, what="output"):
    """Before anything is produced: `path` names a file (not a directory, not 'dir/') in a
    directory that exists."""
    if not path:
        raise FileRuleError(f"{what}: empty path")
    if path.endswith(os.sep) or os.path.basename(path) in ("", ".", ".."):
        raise FileRuleError(f"cannot write '{path}': it names a directory, not a file")
    if os.path.isdir(path):
        raise FileRuleError(f"cannot write '{path}': it is a directory")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileRuleError(f"cannot write '{path}': no directory {folder}")


def _write_all(fd, data, path):
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError as e:
            raise FileRuleError(f"cannot write '{path}': {_why(e)}") from None
        view = view[n:]


class AtomicFileSet:
    """Files written together or not at all. `add(path, data)` stages bytes; `commit()` puts
    every file in place; on any failure the targets are left as they were."""

    def __init__(self):
        self._files = []  # (requested path, bytes)

    def add(self, path, data):
        self._files.append((path, bytes(data)))

    def commit(self):
        # Resolve and classify every target before touching any of them.
        plan = []  # (requested, target, data, special)
        for requested, data in self._files:
            check_output_path(requested)
            target = resolve_symlinks(requested)
            name = os.fsencode(os.path.basename(target))
            if len(name) > 255:  # NAME_MAX: found before anything is written
                raise FileRuleError(f"cannot write '{requested[:120]}...': the file name is "
                                    f"{len(name)} bytes, above the limit of 255")
            special = False
            try:
                st = os.stat(target)
                if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
                    special = True
                elif not stat.S_ISREG(st.st_mode):
                    raise FileRuleError(f"cannot write '{requested}': it is "
                                        f"{file_type_name(st.st_mode)}, not a regular file")
            except FileNotFoundError:
                pass
            plan.append((requested, target, data, special))
        staged, specials, done = [], [], []
        try:
            # 1. Every regular target gets a complete, synced temp file beside it (same
            #    directory, so the rename below is atomic).
            for requested, target, data, special in plan:
                if special:
                    continue
                fd, tmp = _mkstemp_beside(target, requested)
                staged.append((requested, target, tmp))
                try:
                    _write_all(fd, data, requested)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            # 2. Special targets are opened now, non-blocking: a FIFO with no reader fails
            #    before anything is replaced.
            for requested, target, data, special in plan:
                if not special:
                    continue
                flags = (os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
                         | getattr(os, "O_NOCTTY", 0))
                try:
                    fd = os.open(target, flags)
                except OSError as e:
                    if e.errno == errno.ENXIO:
                        raise FileRuleError(f"cannot write '{requested}': it is a FIFO and "
                                            "nothing is reading it") from None
                    raise FileRuleError(f"cannot write '{requested}': {_why(e)}") from None
                os.set_blocking(fd, True)
                specials.append((requested, fd, data))
            # 3. Renames, each old file kept as a hard link until all are in place.
            for requested, target, tmp in staged:
                backup = None
                if os.path.exists(target):
                    backup = tmp + ".old"
                    os.link(target, backup)
                os.replace(tmp, target)
                done.append((target, backup))
            for requested, fd, data in specials:
                _write_all(fd, data, requested)
        except BaseException as e:
            # Put back what was replaced; remove what was new.
            for target, backup in reversed(done):
                try:
                    if backup:
                        os.replace(backup, target)
                    else:
                        os.unlink(target)
                except OSError:
                    pass
            for _, _, tmp in staged:
                for p in (tmp, tmp + ".old"):
                    try:
                        os.unlink(p)
                    except OSError:
                        pass
            if isinstance(e, OSError):
                raise FileRuleError(f"cannot write '{e.filename or '?'}': {_why(e)}") from None
            raise
        finally:
            for _, fd, _ in specials:
                os.close(fd)
        for target, backup in done:
            if backup:
                try:
                    os.unlink(backup)
                except OSError:
                    pass
        _sync_dirs({os.path.dirname(os.path.abspath(t)) for t, _ in done})
        return [requested for requested, _ in self._files]


def _mkstemp_beside(target, requested):
    folder = os.path.dirname(os.path.abspath(target))
    name = os.path.basename(target)
    try:
        return tempfile.mkstemp(prefix=f".{name[:200]}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise FileRuleError(f"cannot write '{requested}': {_why(e)}") from None


def _sync_dirs(folders):
    # Persist the renames; best effort, as in the C++ writer.
    for d in folders:
        try:
            fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError:
            continue
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)
