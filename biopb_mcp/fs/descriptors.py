"""Descriptor calls whose POSIX form has no Windows twin, each beside its portable path.

A private duplicate of a standard descriptor (``F_DUPFD_CLOEXEC`` on POSIX; elsewhere ``os.dup``,
non-inheritable since Python 3.4, repeated until it lands above the standard range), the
open-files limit (``RLIMIT_NOFILE``; None where there is none to read), and a data sync
(``fdatasync``, else ``fsync``, which also writes the metadata).
"""

from __future__ import annotations

import os

__all__ = ["data_sync", "open_files_limit", "private_dup"]


def private_dup(fd: int, lowest: int = 3) -> int:
    """A close-on-exec duplicate of ``fd`` numbered ``lowest`` or above (children never inherit it)."""
    try:
        import fcntl
    except ImportError:
        below: list[int] = []
        dup = os.dup(fd)
        while dup < lowest:
            below.append(dup)
            dup = os.dup(fd)
        for extra in below:
            os.close(extra)
        return dup
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, lowest)


def open_files_limit() -> int | None:
    """The soft limit on this process's open descriptors, or None when unlimited or unknown."""
    try:
        import resource
    except ImportError:
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def data_sync(fd: int) -> None:
    """Flush ``fd``'s data and size to the disk (enough for a rename over the old file to be safe)."""
    sync = getattr(os, "fdatasync", None) or os.fsync
    sync(fd)
