"""Opening files inside a tier without ever following a link below the tier's root.

Every path is walked one component at a time from a directory fd of the tier root, each step
opened `O_NOFOLLOW` relative to the one before (`openat`-style). A symlink planted anywhere below
the root, or a directory swapped for one between a check and a write, then makes the open fail
instead of leading out of the tier: a shared or synced docs folder can hold links its owner did
not make. The root itself is the user's configured location and may be a link.

Per platform: on Linux every guarantee holds, and a swap of a file for another at the instant of
a write is detected with ``renameat2(RENAME_EXCHANGE)``; on macOS and the BSDs the walk holds (they
have ``O_NOFOLLOW``, ``O_DIRECTORY`` and ``dir_fd``) and the exchange falls back to a plain rename;
on Windows there is no ``dir_fd`` (``os.supports_dir_fd`` is empty), so the store cannot walk a
tier without following links and does not run there: it imports (the CLI and the server load),
and its first open says so.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import secrets
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from biopb_mcp.fs.descriptors import data_sync

DIR_MODE = 0o700
FILE_MODE = 0o600
TEMP_SUFFIX = ".tmp"

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
"""Windows has none of the three (this module imports there, but its walk needs ``dir_fd``)."""
_ROOT_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
"""The root may be a link (the user's configured location): no O_NOFOLLOW."""
_LINK_ERRNOS = (errno.ELOOP, errno.ENOTDIR)


class LinkRefused(OSError):
    """A path below a tier's root is (or passes through) a symlink; the store does not follow it."""


class TooBig(OSError):
    """A file over the caller's size bound: refused before any byte is read."""

    def __init__(self, path: str, size: int) -> None:
        super().__init__(errno.EFBIG, f"{path} is {size:,} bytes")
        self.size = size


def _refused(root: Path, parts: Sequence[str]) -> LinkRefused:
    shown = "/".join(parts)
    return LinkRefused(
        errno.ELOOP,
        f"{shown} in {root} is a symbolic link (or passes through one); the store never follows "
        "links for its own files. Replace it with a regular file or folder",
    )


def split(rel: str) -> list[str]:
    """Components of a `/`-separated path relative to a tier root."""
    return [part for part in rel.split("/") if part]


def make_dirs(path: Path) -> None:
    """Create `path` and missing parents with mode 0700 (the umask may make it stricter)."""
    if path.is_dir():
        return
    missing: list[Path] = []
    cur = path
    while not cur.exists():
        missing.append(cur)
        if cur.parent == cur:
            break
        cur = cur.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=DIR_MODE)


@contextlib.contextmanager
def open_dir(root: Path, parts: Sequence[str] = (), *, create: bool = False) -> Iterator[int]:
    """A directory fd of `root/parts…`, each component below `root` opened with O_NOFOLLOW.

    `create` makes missing components (mode 0700), relative to their parent's fd.

    Raises:
        LinkRefused: a component is a symlink (or not a directory).
        FileNotFoundError: a component is missing and `create` is false.
    """
    if os.open not in os.supports_dir_fd:
        raise OSError(
            errno.ENOSYS,
            "The docs store opens its files relative to a folder (dir_fd), which this platform "
            "lacks, so it cannot refuse links: on Windows, run biopb-mcp under WSL2",
        )
    if create:
        make_dirs(root)
    fd = os.open(root, _ROOT_FLAGS)
    try:
        for i, part in enumerate(parts):
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, DIR_MODE, dir_fd=fd)
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in _LINK_ERRNOS:
                    raise _refused(root, parts[: i + 1]) from exc
                raise
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def open_file(dir_fd: int, name: str, flags: int, mode: int = FILE_MODE) -> int:
    """`os.open(name, flags | O_NOFOLLOW, dir_fd=dir_fd)`; a link there raises LinkRefused."""
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkRefused(
                errno.ELOOP,
                f"{name} is a symbolic link; the store never follows links for its own files. "
                "Replace it with a regular file",
            ) from exc
        raise


def read_bytes(root: Path, rel: str, *, max_bytes: int) -> tuple[bytes, os.stat_result]:
    """The bytes of `root/rel` (no link followed) and its stat, read at most `max_bytes + 1`.

    Opened non-blocking and checked to be a regular file before any read: a FIFO or device
    planted there would otherwise block or never end.

    Raises:
        FileNotFoundError: nothing there.
        LinkRefused: a link on the way.
        IsADirectoryError: a directory there.
        TooBig: over `max_bytes` by its size.
        OSError: not a regular file (EINVAL), or unreadable.
    """
    parts = split(rel)
    with open_dir(root, parts[:-1]) as dir_fd:
        return read_bytes_at(dir_fd, parts[-1], f"{rel} in {root}", max_bytes=max_bytes)


def read_bytes_at(dir_fd: int, name: str, shown: str, *, max_bytes: int) -> tuple[bytes, os.stat_result]:
    """`read_bytes` of the file `name` in an open directory (no link followed); `shown` names it
    in errors. Raises as `read_bytes`."""
    fd = open_file(dir_fd, name, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, f"{shown} is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{shown} is not a regular file")
        if st.st_size > max_bytes:
            raise TooBig(shown, st.st_size)
        return _read_from_start(fd, st.st_size, max_bytes), st
    finally:
        os.close(fd)


def pread_all(fd: int, *, max_bytes: int) -> bytes:
    """The bytes of an open regular file from its start, at most `max_bytes + 1`, whatever its
    read offset (it may be read again later through the same fd).

    Raises:
        OSError: not a regular file (EINVAL), or unreadable.
    """
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file")
    return _read_from_start(fd, st.st_size, max_bytes)


def _read_from_start(fd: int, size: int, max_bytes: int) -> bytes:
    """At most `max_bytes + 1` bytes of a regular file from offset 0. One read of the stat'ed
    `size` plus a byte shows EOF at once for a file that did not grow; one that did is read on,
    up to the bound."""
    chunks: list[bytes] = []
    offset, want = 0, min(max_bytes + 1, size + 1)
    while offset <= max_bytes:
        chunk = os.pread(fd, want, offset)
        chunks.append(chunk)
        offset += len(chunk)
        if len(chunk) < want:
            break
        want = min(max_bytes + 1 - offset, 65536)
    return b"".join(chunks)


@dataclass
class Replacing:
    """What `write_atomic` tells its `around_replace` hook about the replace under way."""

    dir_fd: int
    """The open folder of the file."""
    name: str
    """The file's name in it."""
    displaced: str | None = None
    """After the replace, until the hook's block ends: the name in `dir_fd` of the file the
    replace displaced (swapped there atomically), whatever it was at that instant; None where
    this system cannot swap (the displaced file is then gone)."""


_RENAME_EXCHANGE = 2  # <linux/fs.h>


def _renameat2() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        call = libc.renameat2  # glibc 2.28 and later
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return call


_renameat2_call = _renameat2()


def _exchange(dir_fd: int, a: str, b: str) -> bool:
    """Swap the names `a` and `b` in one folder atomically; False where the system or the
    filesystem cannot (the caller renames instead)."""
    if _renameat2_call is None:
        return False
    if _renameat2_call(dir_fd, os.fsencode(a), dir_fd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOENT):
        return False  # no such flag here, or nothing at `b` to swap with: a plain rename will do
    raise OSError(code, os.strerror(code))


def write_atomic(
    root: Path,
    rel: str,
    data: bytes | Iterable[bytes],
    *,
    durable: bool = True,
    mode: int | None = None,
    around_replace: Callable[[Replacing], AbstractContextManager[object]] | None = None,
) -> None:
    """Replace `root/rel` with `data` through a temp file renamed over it, all relative to one dir fd.

    `data` may be an iterable of chunks, written as they come (a big image decoded piece by
    piece is never whole in memory).

    Missing parent folders are made. A link at `rel` itself is replaced (the rename swaps the
    name, never writes through it); a link among the parents refuses the write. A new file gets
    mode 0600, an existing one keeps its mode, unless `mode` says what the file must have (a
    secret stays private whatever mode the file it replaces had). `durable` fsyncs the data and
    the directory.
    The replace runs inside `around_replace(Replacing(...))` when given, after the data is on
    disk: the old file is swapped out to the temp name (`Replacing.displaced`), so the hook can
    read whatever was there at the very instant of the replace, and unlinked after its block.
    """
    parts = split(rel)
    name = parts[-1]
    with open_dir(root, parts[:-1], create=True) as dir_fd:
        kept: int | None = None
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            kept = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None
        except FileNotFoundError:
            pass
        regular = kept is not None
        if mode is not None:
            kept = mode
        tmp = f".{name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
        fd = open_file(dir_fd, tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            with os.fdopen(fd, "wb") as fh:
                if isinstance(data, (bytes, bytearray, memoryview)):
                    fh.write(data)
                else:
                    for chunk in data:
                        fh.write(chunk)
                fh.flush()
                if kept is not None:
                    os.fchmod(fh.fileno(), kept)
                if durable:
                    data_sync(fh.fileno())  # data + size: enough for rename-over safety
            if around_replace is None:
                os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            else:
                replacing = Replacing(dir_fd, name)
                with around_replace(replacing):
                    # Only a regular file is swapped out: a rename onto a folder must still fail.
                    if regular and _exchange(dir_fd, tmp, name):
                        try:
                            out: int | None = os.stat(tmp, dir_fd=dir_fd, follow_symlinks=False).st_mode
                        except FileNotFoundError:  # a temp sweep took it already: nothing to read
                            out = None
                        if out is not None and stat.S_ISDIR(out):  # became a folder since the stat: undo, fail
                            _exchange(dir_fd, tmp, name)
                            raise IsADirectoryError(errno.EISDIR, f"{rel} in {root} is a folder")
                        replacing.displaced = tmp if out is not None else None
                    else:
                        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                if replacing.displaced is not None:
                    try:
                        os.unlink(tmp, dir_fd=dir_fd)
                    except OSError:  # replaced already; a temp left behind is swept at a later start
                        pass
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
        if durable:
            with contextlib.suppress(OSError):
                os.fsync(dir_fd)


def write_new(root: Path, rel: str, data: bytes) -> None:
    """Write `root/rel` as a fresh file: whatever was at that name (a link included) is unlinked first."""
    parts = split(rel)
    with open_dir(root, parts[:-1], create=True) as dir_fd:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(parts[-1], dir_fd=dir_fd)
        fd = open_file(dir_fd, parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)


def append(root: Path, rel: str, data: bytes) -> None:
    """Append `data` to `root/rel` (created 0600 if missing); a link there is refused."""
    parts = split(rel)
    with open_dir(root, parts[:-1], create=True) as dir_fd:
        fd = open_file(dir_fd, parts[-1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        with os.fdopen(fd, "ab") as fh:
            fh.write(data)


def unlink(root: Path, rel: str) -> None:
    """Remove `root/rel` (a link itself, never its target); missing is fine."""
    parts = split(rel)
    with open_dir(root, parts[:-1]) as dir_fd, contextlib.suppress(FileNotFoundError):
        os.unlink(parts[-1], dir_fd=dir_fd)


def listdir(root: Path, rel: str) -> list[str]:
    """Names in the folder `root/rel`, no link followed on the way."""
    with open_dir(root, split(rel)) as dir_fd:
        return os.listdir(dir_fd)


def lstat(root: Path, rel: str) -> os.stat_result:
    """`lstat` of `root/rel`, no link followed among its parents."""
    parts = split(rel)
    with open_dir(root, parts[:-1]) as dir_fd:
        return os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
