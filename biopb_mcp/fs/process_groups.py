"""Process groups: a kernel leads its own, so a signal reaches its children too (POSIX only).

Windows has no process groups in this sense (``os.getpgid`` and ``os.killpg`` are missing): there
`group_of` and `own_group` answer None, and callers signal the kernel process itself, as they do
for a kernel that leads no group of its own.
"""

from __future__ import annotations

import os
import signal

__all__ = ["group_of", "own_group", "signal_group"]


def group_of(pid: int) -> int | None:
    """The process group of ``pid``, or None where there are none.

    Raises:
        ProcessLookupError: no such process.
    """
    getpgid = getattr(os, "getpgid", None)
    return None if getpgid is None else int(getpgid(pid))


def own_group() -> int | None:
    """This process's group, or None where there are none."""
    getpgrp = getattr(os, "getpgrp", None)
    return None if getpgrp is None else int(getpgrp())


def signal_group(pgid: int, sig: signal.Signals | int) -> None:
    """Send ``sig`` to every process of group ``pgid`` (only ever a group `group_of` returned).

    Raises:
        ProcessLookupError: the group is gone.
        PermissionError: not ours to signal.
    """
    os.killpg(pgid, sig)
