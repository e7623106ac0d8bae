"""``viewer()`` in real kernels: napari on the kernel's Qt loop under Xvfb, and the clear refusals.

Two kernels for the module: one started with no display at all (the refusals: no display, a
display Qt cannot open, napari missing; it never imports Qt itself), and one on a virtual
display of its own, where napari really opens.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import biopb_mcp
from _tests.support.isolation import make_settings
from _tests.support.runner import finish
from _tests.support.xvfb import qt_xcb_problem, require_napari, require_qt_xcb, virtual_display
from biopb_mcp.kernel import KernelHost
from biopb_mcp.kernel.inside.viewer import missing_x_packages
from biopb_mcp.kernel.viewer import ViewerState, look_expression, parse_look
from biopb_mcp.text.kernel import rendered_text
from biopb_mcp.text.viewer import look_text

pytestmark = pytest.mark.slow

CHECKOUT = Path(biopb_mcp.__file__).resolve().parents[1]
"""The checkout the server runs from, which its install hints name."""

CELL_BOUND = 60.0
"""Seconds any one cell may take here; far more than any needs, yet it ends a hung kernel's test."""


def _host(root: Path) -> KernelHost:
    return KernelHost(make_settings(root, kernel="request_timeout = 60.0\n"))


@pytest.fixture(scope="module")
def headless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelHost]:
    """A kernel whose environment names no display (as on a server or over SSH)."""
    root = Path(tmp_path_factory.mktemp("headless"))
    mp = pytest.MonkeyPatch()
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        mp.delenv(name, raising=False)
    mp.setenv("XDG_CONFIG_HOME", str(root / "xdg-config"))
    host = _host(root)
    try:
        host.start()
        yield host
    finally:
        host.shutdown()
        mp.undo()


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelHost]:
    """A kernel on a virtual display of its own, with a viewer open."""
    require_napari()
    root = Path(tmp_path_factory.mktemp("shown"))
    with virtual_display() as display:
        mp = pytest.MonkeyPatch()
        mp.setenv("DISPLAY", display)
        mp.delenv("WAYLAND_DISPLAY", raising=False)
        mp.delenv("QT_QPA_PLATFORM", raising=False)
        mp.setenv("XDG_CONFIG_HOME", str(root / "xdg-config"))  # napari's settings file
        host = _host(root)
        try:
            host.start()
            run(host, "import numpy as np\nv = viewer()")
            yield host
        finally:
            host.shutdown()
            mp.undo()


def run(host: KernelHost, code: str, *, ok: bool = True) -> tuple[str, list[bytes]]:
    ex, r = finish(host, code, CELL_BOUND)
    if ok:
        assert ex.status == "ok", rendered_text(r)
    return rendered_text(r), r.images


# -- no display, a display Qt cannot open, no napari: a clear message, and the kernel lives on ----


def test_no_display_is_a_clear_message_naming_the_ways_to_get_one(headless: KernelHost) -> None:
    require_napari()
    text, _ = run(headless, "viewer()", ok=False)
    assert "ViewerUnavailable" in text and "neither DISPLAY nor WAYLAND_DISPLAY" in text, text
    assert "xvfb-run" in text and "remote desktop" in text and "show(image, labels)" in text, text
    assert run(headless, "import sys; print('alive', 'PyQt6.QtWidgets' in sys.modules)")[0] == "alive False"


def test_a_display_qt_cannot_open_is_reported_and_does_not_kill_the_kernel(headless: KernelHost) -> None:
    # Qt aborts the whole process when it cannot connect: the check happens in a child process
    require_napari()
    require_qt_xcb()  # else Qt fails to load before it tries the display
    text, _ = run(
        headless,
        "import os\nos.environ['DISPLAY'] = ':4091'\ntry:\n    viewer()\nfinally:\n    del os.environ['DISPLAY']",
        ok=False,
    )
    assert "ViewerUnavailable" in text and "Qt cannot open a window on this display (DISPLAY=:4091)" in text, text
    assert "could not connect to display" in text, text
    assert run(headless, "print('alive')")[0] == "alive"


def _without_library(where: Path, soname: str = "libxcb-icccm.so.4") -> dict[str, str]:
    """An environment whose processes cannot load ``soname``: an empty file of that name comes
    first on the loader's path, so the loader finds it and fails, as if the package were not
    installed (a test cannot remove the machine's packages)."""
    where.mkdir(exist_ok=True)
    (where / soname).write_bytes(b"")
    before = os.environ.get("LD_LIBRARY_PATH")
    return {**os.environ, "LD_LIBRARY_PATH": str(where) + (os.pathsep + before if before else "")}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Qt's xcb platform and its libraries are Linux's")
def test_missing_x_libraries_are_detected_as_qt_loads_them(tmp_path: Path) -> None:
    """The rule the viewer tests skip by (the README's test command on a machine without the X
    libraries): Qt itself fails to load its xcb plugin, and the missing package is named."""
    require_napari()
    with virtual_display() as display:  # skips here (or fails under CI) when the libraries are missing
        assert qt_xcb_problem(display) is None
        assert missing_x_packages() == []
        env = _without_library(tmp_path / "lib")
        assert missing_x_packages(env) == ["libxcb-icccm4"]
        problem = qt_xcb_problem(display, env)
    assert problem is not None and "apt-get install libxcb-icccm4" in problem, problem


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Qt's xcb platform and its libraries are Linux's")
def test_a_missing_x_library_names_the_packages_not_a_virtual_display(headless: KernelHost, tmp_path: Path) -> None:
    """Under xvfb-run on a fresh Debian the display is there and Qt's xcb plugin cannot load: the
    advice is the packages to install, not another xvfb-run."""
    require_napari()
    env = _without_library(tmp_path / "lib")
    with virtual_display() as display:
        code = (
            "import os\n"
            f"saved = dict(os.environ)\nos.environ.update(DISPLAY={display!r}, LD_LIBRARY_PATH={env['LD_LIBRARY_PATH']!r})\n"
            "try:\n    viewer()\nfinally:\n    os.environ.clear()\n    os.environ.update(saved)"
        )
        text, _ = run(headless, code, ok=False)
    assert "ViewerUnavailable" in text and "xcb) cannot load" in text, text
    assert "missing: libxcb-icccm4" in text and "sudo apt-get install libxcb-icccm4" in text, text
    assert "xvfb-run -a biopb-mcp" not in text, text
    assert run(headless, "print('alive')")[0] == "alive"


def test_the_offscreen_platform_is_refused_as_napari_needs_opengl(headless: KernelHost) -> None:
    require_napari()
    text, _ = run(
        headless,
        "import os\nos.environ['QT_QPA_PLATFORM'] = 'offscreen'\ntry:\n    viewer()\n"
        "finally:\n    del os.environ['QT_QPA_PLATFORM']",
        ok=False,
    )
    assert "QT_QPA_PLATFORM=offscreen" in text and "OpenGL" in text and "xvfb-run" in text, text


def test_napari_missing_names_the_extra_to_install(headless: KernelHost) -> None:
    # sys.modules[name] = None makes the import system report the package as absent
    text, _ = run(
        headless,
        "import sys\nsys.modules['napari'] = None\ntry:\n    viewer()\nfinally:\n    del sys.modules['napari']",
        ok=False,
    )
    assert "napari is not installed in this kernel's Python" in text, text
    assert f"pip install '{CHECKOUT}[viewer]'" in text, text  # the bare name on PyPI is another project


def test_the_look_query_says_why_no_viewer_can_open(headless: KernelHost) -> None:
    require_napari()
    look = parse_look(headless.probes.query(look_expression(canvas_only=True)))
    assert look.state == ViewerState.NO_VIEWER and look.viewer_function, look
    assert "neither DISPLAY nor WAYLAND_DISPLAY" in look_text(look), look_text(look)
    run(headless, "import sys\nsys.modules['napari'] = None")
    try:
        hidden = parse_look(headless.probes.query(look_expression(canvas_only=True)))
    finally:
        run(headless, "del sys.modules['napari']")
    assert f"pip install '{CHECKOUT}[viewer]'" in look_text(hidden), look_text(hidden)


def test_the_helper_survives_reset_and_never_replaces_a_users_name(headless: KernelHost) -> None:
    run(headless, "%reset -f")
    assert run(headless, "print(viewer.__module__)")[0] == "biopb_mcp_builtin_viewer"
    run(headless, "viewer = 'my own'")
    assert run(headless, "print(viewer)")[0] == "my own"
    run(headless, "del viewer")


# -- on a display -----------------------------------------------------------------------------------


def test_the_window_stays_live_between_executions(shown: KernelHost) -> None:
    # A Qt timer fires only while Qt's loop runs: here, between the agent's calls
    run(shown, "from qtpy.QtCore import QTimer\nfired = []\nQTimer.singleShot(100, lambda: fired.append(1))")
    deadline = time.monotonic() + 30
    while run(shown, "print(len(fired))")[0] != "1":
        assert time.monotonic() < deadline, "the Qt loop never ran between executions"


def test_requests_never_wait_behind_an_idle_qt_loop(shown: KernelHost) -> None:
    # Back-to-back short cells, as an agent sends them: without the wake-up poll a request the
    # kernel took in just as it re-entered Qt's loop sat there, and the cell never started
    for i in range(8):
        run(shown, "from qtpy.QtCore import QTimer\nticks = []\nQTimer.singleShot(50, lambda: ticks.append(1))")
        for _ in range(4):
            run(shown, "n = len(ticks)")
        run(shown, f"v.add_image(np.full((32, 32), {i}, np.uint8), name='frame{i}')")
    assert run(shown, "print(len(v.layers))")[0] == "8"
    run(shown, "v.layers.clear()")


def test_a_qt_loop_turned_on_without_viewer_gets_the_wake_up_too(shown: KernelHost) -> None:
    # napari.Viewer() or %gui qt typed by hand: the next cell's end installs the same poll
    run(shown, "k = get_ipython().kernel\nk._biopb_wake_timer.stop()\ndel k._biopb_wake_timer")
    assert run(shown, "print(k._biopb_wake_timer.isActive())")[0] == "True"


def test_matplotlib_keeps_its_backend_and_figures_still_come_back(shown: KernelHost) -> None:
    text, images = run(
        shown,
        "import matplotlib, matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\n"
        "print(matplotlib.get_backend(), get_ipython().active_eventloop)",
    )
    assert text.splitlines()[0] == "module://matplotlib_inline.backend_inline qt", text
    assert len(images) == 1 and images[0].startswith(b"\x89PNG")


def test_a_window_closed_by_hand_is_noticed_and_a_new_one_opens(shown: KernelHost) -> None:
    run(shown, "old = viewer()\nold.add_points([[1, 2]], name='seeds')\nold.window._qt_window.close()")
    text, _ = run(shown, "new = viewer()\nprint(new is old, len(new.layers), new.window._qt_window.isVisible())")
    assert text == "False 0 True", text
    assert run(shown, "print(viewer() is new)")[0] == "True"
    run(shown, "v = new")


def test_a_viewer_the_user_opened_is_the_one_viewer_returns(shown: KernelHost) -> None:
    run(shown, "import napari\nviewer().close()\nmine = napari.Viewer()")
    assert run(shown, "print(viewer() is mine)")[0] == "True"
    run(shown, "v = mine")
