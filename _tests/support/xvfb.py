"""A virtual X display for the viewer tests, and the rule for when they may skip.

Each test module starts its own Xvfb on a display number the server picks itself
(``-displayfd``: no race with another worker or a desktop's ``:0``) and gives its kernels that
``DISPLAY``. Without Xvfb or napari the tests skip, saying why, unless ``BIOPB_REQUIRE_VIEWER=1``
(as ``.ci/run`` sets it), where that is a failure: CI must not pass by skipping them.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import select
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

REQUIRE_ENV = "BIOPB_REQUIRE_VIEWER"

START_TIMEOUT = 30.0
"""Seconds Xvfb may take to announce its display."""


def skip_or_fail(reason: str) -> None:
    """Skip the test with ``reason``, or fail it when the viewer tests are required."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1: the viewer tests must run)")
    pytest.skip(reason)


def require_napari() -> None:
    if importlib.util.find_spec("napari") is None:
        skip_or_fail("napari is not installed (pip install -e '.[viewer]')")


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when this test process dies, even by SIGKILL."""
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


@contextmanager
def virtual_display() -> Iterator[str]:
    """Run an Xvfb for the block; yields its ``DISPLAY`` value (``:N``)."""
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        skip_or_fail("Xvfb is not installed (apt-get install xvfb)")
    assert xvfb is not None
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [xvfb, "-displayfd", str(write_fd), "-screen", "0", "1280x1024x24", "-nolisten", "tcp"],
        pass_fds=(write_fd,),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_die_with_parent if os.name == "posix" else None,
    )
    os.close(write_fd)
    try:
        ready, _, _ = select.select([read_fd], [], [], START_TIMEOUT)
        number = os.read(read_fd, 32).decode().strip() if ready else ""
        if not number.isdigit():
            pytest.fail(f"Xvfb did not announce a display within {START_TIMEOUT:g} s (exit status {proc.poll()})")
        yield f":{number}"
    finally:
        os.close(read_fd)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
