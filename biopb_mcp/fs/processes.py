"""Whether a process lives, and whose it is, asked without signalling it.

``os.kill(pid, 0)`` is the POSIX idiom, but on Windows ``os.kill`` with any value terminates the
process; psutil answers on both by looking the process up (``/proc`` on Linux, ``OpenProcess`` on
Windows). Owner: the user name psutil reports, compared with this process's.
"""

from __future__ import annotations

import psutil

__all__ = ["pid_alive"]


def pid_alive(pid: int, *, mine: bool = False) -> bool:
    """Whether ``pid`` is a live process (a zombie not yet reaped counts); with ``mine``, a live
    process of this user.

    Another user's process counts as alive by default (a sweep must not take files of a pid
    that may still be their server's); ``mine`` asks whether it can be this user's server, as
    a console attaching to it must (another user's process there is a reused pid).
    """
    if pid <= 0:
        return False
    try:
        process = psutil.Process(pid)  # reads /proc (Linux) or opens it (Windows); no signal
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # exists, and not ours to look at
        return not mine
    if not mine:
        return True
    try:
        return bool(process.username() == psutil.Process().username())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
