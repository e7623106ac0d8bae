"""Which files in a set of folders changed since the last look, from Linux inotify.

A search must see a doc edited by hand on its very next query. Stat'ing every doc file per query
does that, at a syscall per file (about 28 ms for 5,000 docs on a VM disk). The kernel can say
instead: a watch per folder queues one event per write, touch, create, rename or delete, and
reading that queue before a query costs one syscall however large the corpus.

The queue is read in the caller's thread, at the moment it asks, through ctypes: a library that
delivers events from an observer thread (watchdog) could still be carrying a write completed just
before the query. Where inotify is missing (not Linux) or refused (the per-user watch limit),
`DirWatch()` raises `WatchUnavailable` and the caller stats every file as before.

What inotify cannot see, the caller must catch another way: a write through `mmap`, or a change
made on another machine to a network filesystem.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import struct
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["Changes", "DirWatch", "WatchUnavailable"]

logger = logging.getLogger(__name__)

# <sys/inotify.h>
IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_ISDIR = 0x40000000
# inotify's flags are the open flags of the same names (Linux only); read where present, so that
# importing this module needs no POSIX name
IN_NONBLOCK = getattr(os, "O_NONBLOCK", 0o4000)
IN_CLOEXEC = getattr(os, "O_CLOEXEC", 0o2000000)

# No IN_DONT_FOLLOW: a tier root may be a link (the user's configured place); the folders below
# it are watched only when the walk found no link among them.
_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
)
_SELF = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len; then `len` bytes of NUL-padded name
_READ_BYTES = 64 * 1024


class WatchUnavailable(OSError):
    """This system cannot watch folders (not Linux, or the inotify limits are reached)."""


@dataclass
class Changes:
    """What happened in the watched folders since the last `DirWatch.changes()`."""

    paths: set[str] = field(default_factory=set)
    """Files written, touched, created, removed or renamed, as ``folder + "/" + name``."""
    created: set[str] = field(default_factory=set)
    """Those of them that appeared (created, or renamed to that name)."""
    removed: set[str] = field(default_factory=set)
    """Those of them that went away (deleted, or renamed from that name)."""
    folders: set[str] = field(default_factory=set)
    """Folders created, removed or renamed inside a watched one: the set to watch may be out of date."""
    complete: bool = True
    """False when events were lost (the queue overflowed, a watched folder went away): anything
    may have changed."""


def _libc() -> ctypes.CDLL:
    if sys.platform != "linux":
        raise WatchUnavailable(errno.ENOSYS, "inotify is Linux only")
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    for name in ("inotify_init1", "inotify_add_watch", "inotify_rm_watch"):
        if not hasattr(libc, name):
            raise WatchUnavailable(errno.ENOSYS, f"this C library has no {name}")
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    return libc


def parse_events(buffer: bytes, folders: dict[int, str], into: Changes) -> None:
    """Add the events in ``buffer`` (as read from an inotify fd) to ``into``; ``folders`` maps
    watch descriptors to folder paths and loses those the kernel dropped."""
    offset = 0
    while offset + _HEADER.size <= len(buffer):
        wd, mask, _cookie, length = _HEADER.unpack_from(buffer, offset)
        raw = buffer[offset + _HEADER.size : offset + _HEADER.size + length]
        offset += _HEADER.size + length
        if mask & IN_Q_OVERFLOW:
            into.complete = False
            continue
        folder = folders.get(wd)
        if folder is None:
            continue  # a watch removed since the event was queued
        if mask & _SELF:
            into.complete = False
            if mask & IN_IGNORED:
                del folders[wd]
            continue
        name = os.fsdecode(raw.rstrip(b"\0"))
        path = f"{folder}/{name}"
        into.paths.add(path)
        if mask & IN_ISDIR:
            into.folders.add(path)
        if mask & (IN_CREATE | IN_MOVED_TO):
            into.created.add(path)
        if mask & (IN_DELETE | IN_MOVED_FROM):
            into.removed.add(path)


class DirWatch:
    """An inotify instance watching some folders (not their subfolders: each is named).

    Not thread-safe: one caller at a time.
    """

    def __init__(self) -> None:
        self._libc = _libc()
        fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            code = ctypes.get_errno()
            raise WatchUnavailable(code, f"inotify_init1: {os.strerror(code)}")
        self._fd: int | None = fd
        self._folders: dict[int, str] = {}  # watch descriptor -> folder path

    def watch(self, folders: Iterable[str]) -> bool:
        """Watch exactly ``folders`` from now on; True when any is newly watched (what happened
        in it before now was not seen) or could not be watched (vanished or unreadable since it
        was listed: its files must be checked another way).

        Raises:
            WatchUnavailable: the kernel refused a watch (the per-user limit): stop relying on it.
        """
        if self._fd is None:
            raise WatchUnavailable(errno.EBADF, "closed")
        wanted: dict[int, str] = {}
        added = False
        for folder in folders:
            wd = self._libc.inotify_add_watch(self._fd, os.fsencode(folder), _MASK)
            if wd < 0:
                code = ctypes.get_errno()
                if code in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                    added = True  # gone or unreadable since the walk: say so, the caller checks all
                    continue
                raise WatchUnavailable(code, f"inotify_add_watch {folder}: {os.strerror(code)}")
            if self._folders.get(wd) != folder:
                added = True  # a new folder, or one renamed: its watch now reports under this name
            wanted[wd] = folder
        for wd in set(self._folders) - set(wanted):
            self._libc.inotify_rm_watch(self._fd, wd)  # failure means the kernel already dropped it
        self._folders = wanted
        return added

    def changes(self) -> Changes:
        """Everything queued since the last call (one read syscall when nothing happened)."""
        found = Changes()
        if self._fd is None:
            found.complete = False
            return found
        while True:
            try:
                buffer = os.read(self._fd, _READ_BYTES)
            except BlockingIOError:
                return found
            if not buffer:
                return found
            parse_events(buffer, self._folders, found)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
