"""Exclusive locks on an open file, across processes: the one place that knows how each OS does it.

POSIX: ``flock`` (whole file, released when the descriptor closes). Windows: ``msvcrt.locking`` on
the file's first byte (the lock files here are empty or never read through the lock, so a byte
lock excludes as a whole-file one would). Elsewhere (neither module): no cross-process lock; the
callers still hold their in-process locks, and a warning says two servers on one config tree
could then interleave their writes.
"""

from __future__ import annotations

import logging
import os
from types import ModuleType
from typing import Final

__all__ = ["FILE_LOCKS", "FileLocks", "lock", "unlock"]

logger = logging.getLogger(__name__)


def _flock() -> ModuleType | None:
    try:
        import fcntl
    except ImportError:
        return None
    return fcntl


def _msvcrt() -> ModuleType | None:
    try:
        import msvcrt
    except ImportError:
        return None
    return msvcrt


class FileLocks:
    """Takes and releases the locks through whichever API the platform has.

    Process-wide (:data:`FILE_LOCKS`): the platform is, so the warning that it has no file locks
    is given once per process, not once per lock.
    """

    def __init__(self) -> None:
        self._warned = False

    def lock(self, fd: int, *, wait: bool = True) -> None:
        """Take the exclusive lock on ``fd``'s file; with ``wait=False`` raise `BlockingIOError` (an
        `OSError`) at once if another process holds it."""
        fcntl = _flock()
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        msvcrt = _msvcrt()
        if msvcrt is not None:
            os.lseek(fd, 0, os.SEEK_SET)
            try:
                msvcrt.locking(fd, msvcrt.LK_LOCK if wait else msvcrt.LK_NBLCK, 1)
            except PermissionError as exc:  # held by another process
                raise BlockingIOError(exc.errno, str(exc)) from exc
            return
        if not self._warned:
            self._warned = True
            logger.warning("No file locks on this platform: run one server per config tree")

    def unlock(self, fd: int) -> None:
        """Release the lock `lock` took on ``fd`` (closing the descriptor releases it too)."""
        fcntl = _flock()
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return
        msvcrt = _msvcrt()
        if msvcrt is not None:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)


FILE_LOCKS: Final = FileLocks()
"""This process's file locks (one, as the platform is one)."""


def lock(fd: int, *, wait: bool = True) -> None:
    """Take the exclusive lock on ``fd``'s file (:meth:`FileLocks.lock` of :data:`FILE_LOCKS`)."""
    FILE_LOCKS.lock(fd, wait=wait)


def unlock(fd: int) -> None:
    """Release the lock `lock` took on ``fd`` (:meth:`FileLocks.unlock` of :data:`FILE_LOCKS`)."""
    FILE_LOCKS.unlock(fd)
