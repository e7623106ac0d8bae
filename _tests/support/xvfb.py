"""A virtual X display for the viewer tests, and the rule for when they may skip.

Each test module starts its own Xvfb on a display number the server picks itself
(``-displayfd``: no race with another worker or a desktop's ``:0``) and gives its kernels that
``DISPLAY``. Without Xvfb, napari, or the X libraries Qt's xcb platform loads (a fresh Debian
lacks some), the tests skip, saying why and what installs it, unless ``BIOPB_REQUIRE_VIEWER=1`` (as
``.ci/run`` sets it, after installing them), where that is a failure: CI must not pass by skipping.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import pytest

from biopb_mcp.kernel.inside.viewer import missing_x_packages, xcb_load_problem

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


_QT_CHECK = "from qtpy.QtWidgets import QApplication\nQApplication(['biopb-test-probe'])\n"
"""Start Qt on the display, as a napari window does (in a child: Qt aborts a process it cannot start in)."""

_xcb_verdict: list[str | None] = []
"""This worker's verdict, once: the libraries do not change while the suite runs."""


def qt_xcb_problem(display: str, env: Mapping[str, str] | None = None) -> str | None:
    """Why Qt's xcb platform cannot load in a process started with ``env`` (default: this one's)
    on ``display``: the X libraries missing and what installs them; None when it loads (or when Qt
    itself is not installed, which `require_napari` reports)."""
    child = {**(env if env is not None else os.environ), "DISPLAY": display, "QT_QPA_PLATFORM": "xcb"}
    child.pop("WAYLAND_DISPLAY", None)
    done = subprocess.run(
        [sys.executable, "-c", _QT_CHECK], env=child, capture_output=True, text=True, timeout=START_TIMEOUT
    )
    if done.returncode == 0 or xcb_load_problem(done.stderr, child) is None:
        return None
    packages = " ".join(missing_x_packages(child)) or "(see .ci/run for the list)"
    return f"Qt's xcb platform plugin cannot load its X libraries here: apt-get install {packages}"


def require_qt_xcb(display: str = ":4091") -> None:
    """Skip (or fail under CI) unless Qt's xcb plugin loads its libraries; ``display`` need not
    exist (Qt loads them before it connects)."""
    if not _xcb_verdict:
        _xcb_verdict.append(qt_xcb_problem(display))
    if _xcb_verdict[0] is not None:
        skip_or_fail(_xcb_verdict[0])


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
        require_qt_xcb(f":{number}")
        yield f":{number}"
    finally:
        os.close(read_fd)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
