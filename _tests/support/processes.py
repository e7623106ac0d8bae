"""Process checks shared by tests that start kernels and servers."""

from __future__ import annotations

import time

import psutil


def gone(pid: int) -> bool:
    """The process has exited (a zombie waiting to be reaped counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pid: int, within: float) -> bool:
    """Poll until ``pid`` is gone or ``within`` seconds passed; whether it went."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.05)
    return gone(pid)
