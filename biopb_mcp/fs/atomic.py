"""Crash-safe writes and the cross-process lock of the local tier.

A write goes to a temp file in the target's own directory (named with a leading `.`, so it is
never an id and never listed), is fsynced, then renamed over the target: a crash leaves the old
file or the new one, never half of either. Two server processes (one per agent host under stdio)
may write the same local tier, so every read-modify-write holds an exclusive lock on
`<local>/.lock` (`file_locks`: flock on POSIX, msvcrt's on Windows).
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Final

from biopb_mcp.fs import file_locks, nofollow

LOCK_NAME = ".lock"

TEMP_SUFFIX = nofollow.TEMP_SUFFIX
"""Temp files are `.<name>.<pid>.<hex>.tmp`: hidden, so never a doc id even when a crash leaves one."""

STALE_TEMP_SECONDS = 600.0
"""A temp file this old belongs to a writer that died (a write takes milliseconds)."""

_TEMP_NAME = re.compile(r"\..+\.[0-9]+\.[0-9a-f]{8}" + re.escape(TEMP_SUFFIX) + r"\Z")


def sweep_stale_temps(root: Path, *, older_than: float = STALE_TEMP_SECONDS) -> int:
    """Remove temp files that crashed writers left under `root`; returns how many went.

    They are never surfaced as docs (hidden names), but each can be megabytes, and repeated
    crashes would otherwise fill the disk slowly.
    """
    removed = 0
    if not hasattr(os, "fwalk"):  # Windows: the store does not run there (see `nofollow`)
        return removed
    cutoff = time.time() - older_than
    # fwalk hands each directory as an fd it opened without following links, and the unlink is
    # relative to that fd: a folder swapped for a link mid-walk cannot steer it outside the tier
    with contextlib.suppress(OSError):
        for _directory, _dirs, files, dir_fd in os.fwalk(root, follow_symlinks=False):
            for name in files:
                if not _TEMP_NAME.match(name):
                    continue
                with contextlib.suppress(OSError):
                    # A file a write swapped out to a temp name keeps its old mtime, so a sweep may
                    # take it mid-write: the write treats that unlink (and that read) as best effort.
                    if os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mtime < cutoff:
                        os.unlink(name, dir_fd=dir_fd)
                        removed += 1
    return removed


def write_atomic(
    path: Path,
    data: str | bytes,
    *,
    durable: bool = True,
    around_replace: Callable[[nofollow.Replacing], AbstractContextManager[object]] | None = None,
    root: Path | None = None,
) -> None:
    """Replace `path` with `data` atomically; a new file gets mode 0600, an existing one keeps its mode.

    `durable=False` skips the fsync, for the store's own bookkeeping (history) where losing the
    last entry in a power cut is acceptable and the latency is not. The replace runs inside
    `around_replace` (see `nofollow.write_atomic`), after the data is on disk: the store uses it
    to keep a hand edit that landed while the temp file was being written (the fsync is the
    widest window there is), or at the replace itself.
    With `root` (a tier), no link below it is followed on the way to `path` (see nofollow).
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    base = path.parent if root is None else root
    rel = path.name if root is None else path.relative_to(root).as_posix()
    nofollow.write_atomic(base, rel, payload, durable=durable, around_replace=around_replace)


class TierLocks:
    """The local tiers' locks held by this process: one re-entrant thread lock per tier, plus the
    file lock across processes.

    Process-wide by nature: a file lock (``flock``, or msvcrt's) belongs to an open file, so two
    stores of one process that each opened ``.lock`` would block each other, and a thread that
    re-entered through a second descriptor would wait on itself. Every holder in the process
    therefore goes through the one registry, :data:`TIER_LOCKS`, keyed by the tier's real path.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.RLock] = {}
        self._held = threading.local()
        """Per thread: how deep it holds each tier (the file lock is taken at depth 1 only)."""

    @contextlib.contextmanager
    def hold(self, local_dir: Path) -> Iterator[None]:
        """Hold the local tier's exclusive lock: a thread lock in-process, a file lock across processes.

        Re-entrant within a thread, so a write that also refreshes the manifest or appends to the
        index takes it once.
        """
        key = os.path.realpath(local_dir)
        with self._guard:
            rlock = self._locks.setdefault(key, threading.RLock())
        with rlock:
            depth: dict[str, int] = self._held.__dict__.setdefault("depth", {})
            if depth.get(key, 0) > 0:
                depth[key] += 1
                try:
                    yield
                finally:
                    depth[key] -= 1
                return
            with nofollow.open_dir(local_dir, create=True) as dir_fd:
                fd = nofollow.open_file(dir_fd, LOCK_NAME, os.O_RDWR | os.O_CREAT)
            try:
                file_locks.lock(fd)
                depth[key] = 1
                try:
                    yield
                finally:
                    depth[key] = 0
                    file_locks.unlock(fd)
            finally:
                os.close(fd)


TIER_LOCKS: Final = TierLocks()
"""The process's one registry of tier locks (see :class:`TierLocks` for why there is one)."""


def tier_lock(local_dir: Path) -> AbstractContextManager[None]:
    """Hold the local tier's exclusive lock (:meth:`TierLocks.hold` of :data:`TIER_LOCKS`)."""
    return TIER_LOCKS.hold(local_dir)
