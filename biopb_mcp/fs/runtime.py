"""The runtime dir: where kernel connection files, IPC sockets and HTTP tokens live.

These files are secrets (a connection file's key runs code in the kernel), so they go into a
directory only this user can enter. The configured ``server.runtime_dir`` may be a directory we
do not own the mode of, a shared ``/tmp`` (1777) say: changing its mode would break every other
user of it, so a directory we did not create is never chmod-ed. When it is not already private
(owned by this user, no group/other access), the files go into a subdirectory
``biopb-mcp-<uid>`` that we create 0700 inside it.

A server killed with SIGKILL cannot remove its files; :func:`sweep_stale` removes those of dead
servers (named by pid) when the next server starts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import stat
import tempfile
from pathlib import Path

from biopb_mcp.errors import UnsafeRuntimeDir
from biopb_mcp.fs.processes import pid_alive

logger = logging.getLogger(__name__)

__all__ = [
    "CONFIG_DIR_KEY",
    "CONNECTION_FILE",
    "KERNEL_STEM",
    "UnsafeFile",
    "connection_file_pid",
    "kernel_stem",
    "pid_alive",
    "private_runtime_dir",
    "read_private_text",
    "sweep_stale",
]

CONFIG_DIR_KEY = "biopb_config_dir"
"""Key in a server's kernel connection file naming the server's config dir: ``biopb-mcp console``
joins only the kernels of its own config, even where two configs share one runtime dir."""

KERNEL_STEM = "kernel-{pid}-{token}"
"""A server's kernel files: its connection file ``<stem>.json`` and IPC sockets ``<stem>-<n>``,
named by the server's pid (so a sweep knows whose they are) and a random hex token."""

CONNECTION_FILE = re.compile(r"kernel-(?P<pid>\d+)-[0-9a-f]+\.json")
"""A server's kernel connection file: ``KERNEL_STEM`` + ``.json``."""

STALE_NAME = re.compile(r"(?:kernel-(?P<kpid>\d+)-[0-9a-f]+(?:\.json|-\d+)|http-token-(?P<tpid>\d+))")
"""Runtime files named by their server's pid: connection files and IPC sockets (``KERNEL_STEM``
with ``.json`` or ``-<n>``) and per-server token files."""


def kernel_stem(pid: int) -> str:
    """A new, unique stem for this server's kernel files (see ``KERNEL_STEM``)."""
    return KERNEL_STEM.format(pid=pid, token=secrets.token_hex(4))


def connection_file_pid(name: str) -> int | None:
    """The server pid a connection file's name carries, or None when the name is not one of ours."""
    match = CONNECTION_FILE.fullmatch(name)
    return int(match.group("pid")) if match else None


SOCKET_DIR_NAME = re.compile(r"biopb-(?P<pid>\d+)-[A-Za-z0-9_]+")
"""Short socket dirs in the system temp dir, used when the runtime dir's path is too long for
an AF_UNIX socket path (``biopb-<pid>-<random>``, made by ``tempfile.mkdtemp``)."""


def _subdir(runtime_dir: Path) -> Path:
    return runtime_dir / f"biopb-mcp-{os.getuid()}"


def _is_private(st: os.stat_result) -> bool:
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def _make_private(path: Path) -> bool:
    """Create ``path`` 0700 (parents as needed); True when this call created it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        return False
    os.chmod(path, 0o700)  # ours, just made: mkdir's mode was narrowed by the umask only
    return True


def private_runtime_dir(runtime_dir: Path, *, create: bool = True) -> Path | None:
    """The private directory to hold runtime files for the configured ``runtime_dir``.

    ``runtime_dir`` itself when it is private or this call creates it; else its subdirectory
    ``biopb-mcp-<uid>``, created 0700. Returns None when ``create`` is false and neither exists.

    Raises:
        UnsafeRuntimeDir: the subdirectory exists but is not a private directory of this user (a
            link, another owner, group/other access); nothing is changed. A PermissionError.
        OSError: a directory cannot be created.
    """
    if create and _make_private(runtime_dir):
        return runtime_dir
    try:
        st = os.stat(runtime_dir)
    except FileNotFoundError:
        return None
    if _is_private(st):
        return runtime_dir
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(f"{runtime_dir} is not a directory")
    sub = _subdir(runtime_dir)
    if create and _make_private(sub):
        return sub
    try:
        sub_st = os.lstat(sub)
    except FileNotFoundError:
        return None
    if not _is_private(sub_st):
        raise UnsafeRuntimeDir(
            f"{sub} exists but is not a private directory of this user (a link, another owner, or "
            "open to group/others)",
            path=str(sub),
            runtime_dir=str(runtime_dir),
        )
    return sub


class UnsafeFile(OSError):
    """A secret's file that must not be trusted: a link, not a regular file, another user's, open
    to others, or too big; the message says which."""


def read_private_text(path: Path, max_bytes: int) -> str:
    """The text of a secret's file (a token): a regular file of this user that nobody else can
    read, opened without following a link and without blocking (a FIFO planted at the name would
    hang an open for reading until a writer came), at most ``max_bytes`` long.

    Raises:
        FileNotFoundError: nothing at ``path``.
        UnsafeFile: something is there that must not be trusted; the message says what.
        OSError: it cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafeFile(f"{path} is a symbolic link") from None
        raise UnsafeFile(f"{path} cannot be opened: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = (
                "a FIFO"
                if stat.S_ISFIFO(st.st_mode)
                else "a socket"
                if stat.S_ISSOCK(st.st_mode)
                else "not a regular file"
            )
            raise UnsafeFile(f"{path} is {kind}")
        if st.st_uid != os.getuid():
            raise UnsafeFile(f"{path} belongs to another user (uid {st.st_uid})")
        if st.st_mode & 0o077:
            raise UnsafeFile(f"{path} is readable by others (mode {stat.S_IMODE(st.st_mode):o})")
        if st.st_size > max_bytes:
            raise UnsafeFile(f"{path} is {st.st_size:,} bytes, more than a token's {max_bytes:,}")
        return os.read(fd, max_bytes + 1)[:max_bytes].decode("ascii", "replace")
    finally:
        os.close(fd)


def sweep_stale(runtime_dir: Path) -> list[Path]:
    """Remove runtime files left by servers that are no longer running; returns what went.

    Only files named by a pid (see ``STALE_NAME``), owned by this user, whose pid is not alive.
    A live server's files are never touched; a pid reused by another process keeps its files
    (the safe side). Never raises: a sweep that cannot run is logged and skipped.
    """
    try:
        directory = private_runtime_dir(runtime_dir, create=False)
        entries = list(os.scandir(directory)) if directory is not None else []
    except OSError as exc:
        logger.warning("could not sweep the runtime dir %s: %s", runtime_dir, exc)
        return []
    removed: list[Path] = []
    uid, own = os.getuid(), os.getpid()
    for entry in entries:
        match = STALE_NAME.fullmatch(entry.name)
        if match is None:
            continue
        pid = int(match.group("kpid") or match.group("tpid"))
        with contextlib.suppress(OSError):
            if pid == own or entry.is_dir(follow_symlinks=False) or pid_alive(pid):
                continue
            if entry.stat(follow_symlinks=False).st_uid != uid:
                continue
            os.unlink(entry.path)
            removed.append(Path(entry.path))
    removed.extend(_sweep_socket_dirs(uid, own))
    if removed:
        logger.info("removed %d runtime files of servers that are no longer running from %s", len(removed), directory)
    return removed


def _sweep_socket_dirs(uid: int, own: int) -> list[Path]:
    """Remove the temp-dir socket dirs (see ``SOCKET_DIR_NAME``) of dead servers of this user."""
    removed: list[Path] = []
    with contextlib.suppress(OSError), os.scandir(tempfile.gettempdir()) as entries:
        for entry in entries:
            match = SOCKET_DIR_NAME.fullmatch(entry.name)
            if match is None or int(match.group("pid")) == own:
                continue
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or pid_alive(int(match.group("pid"))):
                    continue
                for child in os.scandir(entry.path):
                    if not child.is_dir(follow_symlinks=False):
                        os.unlink(child.path)
                os.rmdir(entry.path)
                removed.append(Path(entry.path))
    return removed
