"""In the kernel: ``viewer()``, the napari window the scientist watches and the agent fills.

Loaded by the kernel bootstrap from this file's path (the kernel may be another Python without
biopb_mcp), so it imports only the standard library until ``viewer()`` is first called: a
kernel start pays nothing for napari or Qt.

``viewer()`` turns on IPython's Qt event loop integration (``%gui qt``): between executions the
kernel runs Qt's loop, so the window stays live, the scientist can pan, paint and draw, and
layers the agent adds appear at once. Qt ends the whole process when it cannot reach a display,
so before the first QApplication exists a child process tries one (with an OpenGL context,
which napari's canvas needs); only when it succeeds does this process create its own.

The server's ``look_at_viewer`` tool sends this file's source in a silent user expression and
calls :func:`look_json`, which works with or without the plugin loaded (a joined notebook kernel
may not have it): it uses the viewer ``viewer()`` opened, else ``napari.current_viewer()``.

Its module state (``_state``) is the kernel's own: this file is loaded once per kernel
process, so a module global here lives and dies with that kernel.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import io
import json
import os
import shlex
import subprocess
import sys
from typing import Any

MODULE_NAME = "biopb_mcp_builtin_viewer"
"""The name the bootstrap loads this file under (``biopb_mcp_builtin_`` + the file's stem)."""

QT_BINDINGS = ("PyQt6", "PySide6", "PyQt5", "PySide2")
"""Qt bindings napari runs on (through qtpy)."""

PROBE_TIMEOUT = 30.0
"""Seconds the display probe may take; a display that hangs is reported, not waited on."""

WAKE_INTERVAL_MS = 50
"""How often the idle kernel checks, from Qt's loop, for a request its socket notifier missed."""

MAX_COUNTED_LABELS = 16_777_216
"""Labels layers up to this many pixels (in memory) have their labels counted for the layer list."""

_PROBE = """\
import sys
from qtpy.QtGui import QOffscreenSurface, QOpenGLContext
from qtpy.QtWidgets import QApplication
app = QApplication(["biopb-display-probe"])
context = QOpenGLContext()
surface = QOffscreenSurface()
surface.create()
ok = context.create() and context.makeCurrent(surface)
print(app.platformName())
sys.exit(0 if ok else 3)
"""
"""Run in a child process: can Qt open this display, with OpenGL? Exit 3: no OpenGL."""

X_LIBRARIES = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libfontconfig.so.1": "libfontconfig1",
    "libdbus-1.so.3": "libdbus-1-3",
}
"""The system libraries Qt 6's X11 platform plugin (xcb) loads that minimal Linux images lack, each
with its Debian/Ubuntu package (Qt wheels carry Qt, not these)."""

XCB_LOAD_FAILURES = ("xcb-cursor0 or libxcb-cursor0 is needed", 'Could not load the Qt platform plugin "xcb"')
"""What Qt prints when its xcb plugin is there but a library it links to is not (since Qt 6.5 it
names libxcb-cursor0 whichever one is missing). It prints the second for a display it cannot
connect to as well, after saying so."""

NO_CONNECTION = "could not connect to display"
"""Qt's words for a display that is not there: a display problem, whatever follows."""

_LIBRARY_CHECK = """\
import ctypes, sys
for name in sys.argv[1:]:
    try:
        ctypes.CDLL(name)
    except OSError:
        print(name)
"""
"""Run in a child process: which of the named libraries the dynamic loader cannot load. A child,
because a process reads its loader path (LD_LIBRARY_PATH) once, at start."""

_state: dict[str, Any] = {"viewer": None, "display_ok": False}


class ViewerUnavailable(RuntimeError):
    """napari or a display is missing; the message says which and what the user can do."""


def viewer() -> Any:
    """The napari viewer shared with the user: opens one, or returns the one already open.

    The window shows on the user's screen and stays live between calls. Add layers with
    ``v.add_image(img, name="raw")``, ``v.add_labels(labels, name="nuclei")``; what the user
    draws or corrects is in ``v.layers["name"].data``. A window the user closed is noticed: the
    next call opens a new one. Keep the result in a variable such as ``v`` (not ``viewer``).

    Raises:
        ViewerUnavailable: napari (or a Qt binding) is not installed in this kernel's Python, or
            there is no display to show a window on; the message says what the user can do.
    """
    found = _find_open()
    if found is not None:
        _state["viewer"] = found
        return found
    _require_napari()
    _require_display()
    _enable_qt_loop()
    import napari

    opened = napari.Viewer(title="napari (shared with the agent)")
    _state["viewer"] = opened
    return opened


def _own_state() -> dict[str, Any]:
    """The loaded plugin's state, so a fresh copy of this source (the tool's query) sees its viewer."""
    module = sys.modules.get(MODULE_NAME)
    state = getattr(module, "_state", None)
    return state if isinstance(state, dict) else _state


def _is_open(candidate: Any) -> bool:
    """Is this viewer's window still there and shown? (closed by the user, or by ``close()``)."""
    try:
        return bool(candidate.window._qt_window.isVisible())
    except (AttributeError, RuntimeError):  # window deleted by close(), or its Qt object is gone
        return False


def _find_open() -> Any:
    """The viewer ``viewer()`` opened if still open, else napari's current one, else None.

    napari is never imported here: only a kernel that already uses it can have a viewer.
    """
    state = _own_state()
    tracked = state.get("viewer")
    if tracked is not None:
        if _is_open(tracked):
            return tracked
        state["viewer"] = None
        _close_quietly(tracked)
    napari = sys.modules.get("napari")
    if napari is None:
        return None
    try:
        current = napari.current_viewer()
    except Exception:
        return None
    return current if current is not None and _is_open(current) else None


def _close_quietly(closed: Any) -> None:
    """Release what a window the user closed still holds (its layers, its canvas)."""
    try:
        closed.close()
    except Exception:
        pass


VIEWER_INSTALL_ENV = "BIOPB_MCP_VIEWER_INSTALL"
"""The pip requirement of biopb-mcp's viewer extra, set by the server that started the kernel
(named in its ``biopb_mcp.kernel.env``): the bare name on PyPI is another project's until this
one is published."""


def _viewer_install() -> str:
    target = os.environ.get(VIEWER_INSTALL_ENV) or "<your biopb-mcp checkout>[viewer]"
    return "pip install " + shlex.quote(target)


def napari_problem() -> str | None:
    """Why napari cannot run in this Python (not installed, no Qt binding), or None."""
    if importlib.util.find_spec("napari") is None:
        return (
            f"napari is not installed in this kernel's Python ({sys.executable}). Ask the user to "
            f"install it there: {_viewer_install()} (napari with PyQt6), then restart the kernel."
        )
    if not any(importlib.util.find_spec(name) is not None for name in QT_BINDINGS):
        return (
            f"napari is installed in this kernel's Python ({sys.executable}) but no Qt binding is. "
            f"Ask the user to install one there: pip install PyQt6 (or {_viewer_install()}), then "
            "restart the kernel."
        )
    return None


def _require_napari() -> None:
    problem = napari_problem()
    if problem is not None:
        raise ViewerUnavailable(problem)


def _qt_app_exists() -> bool:
    """A QApplication already runs in this process, so Qt has its display."""
    for name in QT_BINDINGS:
        widgets = sys.modules.get(f"{name}.QtWidgets")
        if widgets is not None and widgets.QApplication.instance() is not None:
            return True
    return False


_WHERE_TO_SHOW = (
    "The user can start the MCP server from a desktop session, wrap it in a virtual display "
    "(xvfb-run -a biopb-mcp: the window is seen by nobody, but look_at_viewer screenshots "
    "work), or use a remote desktop (VNC, X2Go). Meanwhile show images as PNGs: "
    "show(image, labels)."
)


def display_facts() -> dict[str, str]:
    """The display settings Qt reads (empty strings when unset)."""
    return {name: os.environ.get(name, "") for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}


def display_problem() -> str | None:
    """Why no window can be shown from this process, or None (checked without touching Qt here)."""
    facts = display_facts()
    if facts["QT_QPA_PLATFORM"].split(":")[0] in ("offscreen", "minimal"):
        return (
            f"QT_QPA_PLATFORM={facts['QT_QPA_PLATFORM']} gives Qt no screen and no OpenGL, which "
            "napari's canvas needs. " + _WHERE_TO_SHOW
        )
    needs_env = sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd"))
    if needs_env and not facts["DISPLAY"] and not facts["WAYLAND_DISPLAY"] and not facts["QT_QPA_PLATFORM"]:
        return (
            "No display for a napari window: this kernel has neither DISPLAY nor WAYLAND_DISPLAY "
            "set (it runs outside a desktop session, e.g. on a server or over SSH). " + _WHERE_TO_SHOW
        )
    return None


def missing_x_packages(env: dict[str, str] | None = None) -> list[str]:
    """The Debian/Ubuntu packages of `X_LIBRARIES` whose library a process started with ``env``
    (default: this one's) cannot load, checked as Qt loads them: with the dynamic loader."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _LIBRARY_CHECK, *X_LIBRARIES],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [X_LIBRARIES[name] for name in done.stdout.split() if name in X_LIBRARIES]


def xcb_load_problem(stderr: str, env: dict[str, str] | None = None) -> str | None:
    """When ``stderr`` (a Qt process's) says the xcb platform plugin could not load: which X
    libraries are missing and the packages that install them; else None."""
    if NO_CONNECTION in stderr or not any(failure in stderr for failure in XCB_LOAD_FAILURES):
        return None
    packages = missing_x_packages(env)
    if not packages and XCB_LOAD_FAILURES[0] not in stderr:
        return None  # not a library of ours: Qt's own words say more
    named = " ".join(packages or X_LIBRARIES.values())
    which = f"missing: {', '.join(packages)}" if packages else "one of those below is missing"
    return (
        f"Qt's X11 platform plugin (xcb) cannot load: a system library it needs is not installed ({which}). "
        f"Ask the user to install them (Debian/Ubuntu: sudo apt-get install {named}), then restart the "
        "kernel. A display is not the problem, so xvfb-run would not help. Meanwhile show images as "
        "PNGs: show(image, labels)."
    )


def _probe_display() -> str | None:
    """Open the display with Qt in a child process; None when it worked, else why not."""
    where = display_facts()
    named = ", ".join(f"{k}={v}" for k, v in where.items() if v) or "no display variables"
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"Qt did not open the display ({named}) within {PROBE_TIMEOUT:g} s. " + _WHERE_TO_SHOW
    except OSError as exc:
        return f"Could not test the display ({named}): {exc}. " + _WHERE_TO_SHOW
    if done.returncode == 0:
        return None
    if done.returncode == 3:
        return (
            f"Qt opened the display ({named}, platform {done.stdout.strip()}) but could not create "
            "an OpenGL context, which napari's canvas needs. " + _WHERE_TO_SHOW
        )
    xcb = xcb_load_problem(done.stderr)
    if xcb is not None:
        return xcb
    said = [line for line in done.stderr.strip().splitlines() if line.strip()][:4]
    detail = "; ".join(said) if said else f"exit status {done.returncode}"
    return f"Qt cannot open a window on this display ({named}): {detail}. " + _WHERE_TO_SHOW


def _require_display() -> None:
    """Raise unless a window can be opened; Qt's own failure would end the kernel process."""
    state = _own_state()
    if state.get("display_ok") or _qt_app_exists():
        return
    problem = display_problem() or _probe_display()
    if problem is not None:
        raise ViewerUnavailable(problem)
    state["display_ok"] = True


def _shell() -> Any:
    """The IPython shell this runs in, or None (plain Python)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def _enable_qt_loop() -> None:
    """``%gui qt``: the kernel runs Qt's event loop while idle, so the window stays live.

    It sets no matplotlib backend: figures keep coming back as images.
    """
    shell = _shell()
    if shell is None:
        return
    if getattr(shell, "active_eventloop", None) != "qt":
        shell.run_line_magic("gui", "qt")
    _keep_waking(getattr(shell, "kernel", None))


def _asyncio_has_work() -> bool:
    """Tasks besides the one running Qt's loop wait on the kernel's asyncio loop (a request's handler)."""
    try:
        current = asyncio.current_task()
        return any(task is not current for task in asyncio.all_tasks())
    except RuntimeError:  # no running asyncio loop: nothing of the kernel's can be waiting on it
        return False


def _keep_waking(kernel: Any) -> None:
    """Every ``WAKE_INTERVAL_MS`` while the idle kernel runs Qt's loop, hand its own loop a turn.

    ipykernel leaves Qt's loop only when a socket notifier sees a new request on the shell
    socket. Two ways a request is then left waiting (an execute_code that never starts): the
    kernel's asyncio loop took the request in (its handler is a task not yet run) just before
    ipykernel re-entered Qt's loop, which blocks that asyncio loop; or pyzmq's stream saw the
    request waiting (reading the socket's events, which uses up zmq's one readability signal)
    and left reading it to an asyncio callback that Qt's loop then blocks. In the second case
    zmq signals no later message either while that one is unread, so a client's further
    requests cannot wake the kernel: it hangs for good. So the timer takes in any waiting
    request (as the notifier would, asking the socket itself) and leaves Qt's loop when it took
    one in or a task waits on the asyncio loop; ipykernel re-enters Qt's loop a millisecond
    later, so the window stays live.
    """
    app = getattr(kernel, "app", None)
    if kernel is None or app is None or getattr(kernel, "_biopb_wake_timer", None) is not None:
        return
    try:  # the binding ipykernel made ``kernel.app`` with (qtpy may pick another, or be absent)
        from ipykernel import eventloops
        from IPython.external.qt_for_kernel import QtCore
    except ImportError:
        return

    # ipykernel 7 reads requests through a per-subshell stream; earlier versions had one shell stream
    shell_stream = (
        eventloops.get_shell_stream(kernel) if hasattr(eventloops, "get_shell_stream") else kernel.shell_stream
    )

    def wake() -> None:
        loop = getattr(app, "qt_event_loop", None)
        if loop is None or not getattr(app, "_in_event_loop", False):
            return  # a cell is running (napari processing events): requests wait their turn
        took_in = shell_stream.flush(limit=1)
        if not took_in and not _asyncio_has_work():
            return
        notifier = getattr(kernel, "_qt_notifier", None)
        if notifier is not None:
            notifier.setEnabled(False)
        loop.quit()

    timer = QtCore.QTimer(app)
    timer.setInterval(WAKE_INTERVAL_MS)
    timer.timeout.connect(wake)
    timer.start()
    kernel._biopb_wake_timer = timer


# -- what look_at_viewer reads ------------------------------------------------------------------


def look_json(canvas_only: bool = True) -> str:
    """The open viewer as JSON: a PNG screenshot and its layers; or why there is none."""
    try:
        return json.dumps(look(canvas_only), default=str)
    except Exception as exc:  # a status must come back whatever napari did
        return json.dumps({"state": "error", "error": f"{type(exc).__name__}: {exc}"})


def look(canvas_only: bool = True) -> dict[str, Any]:
    """Facts about the viewer for the tool: ``state`` is ``open``, ``no_viewer`` or ``error``."""
    found = _find_open()
    if found is None:
        return {"state": "no_viewer", **_environment()}
    out: dict[str, Any] = {
        "state": "open",
        "title": str(found.title),
        "canvas_only": canvas_only,
        "opened_by": "viewer()" if found is _own_state().get("viewer") else "napari",
        "layers": [_layer_facts(layer, found) for layer in found.layers],
        "dims": _dims(found),
        **_environment(),
    }
    try:
        shot = found.screenshot(canvas_only=canvas_only, flash=False)
        out["png"] = base64.b64encode(_png(shot)).decode("ascii")
    except Exception as exc:
        out.update(state="error", error=f"the screenshot failed: {type(exc).__name__}: {exc}")
    return out


def _environment() -> dict[str, Any]:
    shell = _shell()
    ns = shell.user_ns if shell is not None else {}
    own = sys.modules.get(MODULE_NAME)
    return {
        "napari_problem": napari_problem(),
        "display_problem": display_problem(),
        "display": display_facts(),
        "viewer_function": own is not None and ns.get("viewer") is getattr(own, "viewer", None),
        "python": sys.executable,
    }


def _png(rgba: Any) -> bytes:
    from PIL import Image  # napari depends on it (through imageio)

    buf = io.BytesIO()
    Image.fromarray(rgba[..., :3]).save(buf, format="PNG")
    return buf.getvalue()


def _dims(shown: Any) -> dict[str, Any]:
    dims = shown.dims
    sliders = [
        {
            "axis": int(axis),
            "label": str(dims.axis_labels[axis]),
            "at": int(dims.current_step[axis]),
            "of": int(dims.nsteps[axis]),
        }
        for axis in dims.not_displayed
        if int(dims.nsteps[axis]) > 1
    ]
    return {"ndim": int(dims.ndim), "ndisplay": int(dims.ndisplay), "sliders": sliders}


def _layer_facts(layer: Any, shown: Any) -> dict[str, Any]:
    kind = type(layer).__name__.lower()
    facts: dict[str, Any] = {
        "name": str(layer.name),
        "type": kind,
        "visible": bool(layer.visible),
        "selected": layer is shown.layers.selection.active,
    }
    data = layer.data
    if kind == "points":
        facts["count"] = len(data)
    elif kind == "shapes":
        facts["count"] = int(layer.nshapes)
        kinds: dict[str, int] = {}
        for shape_type in layer.shape_type:
            kinds[str(shape_type)] = kinds.get(str(shape_type), 0) + 1
        facts["shape_types"] = kinds
    multiscale = bool(getattr(layer, "multiscale", False))
    shape = getattr(data, "shape", None)
    if shape is not None and kind not in ("shapes",):
        facts["shape"] = [int(n) for n in shape]
    if getattr(data, "dtype", None) is not None:
        facts["dtype"] = str(data.dtype)
    if multiscale:
        facts["levels"] = len(data)
    array = data[0] if multiscale else data
    module = type(array).__module__.split(".")[0]
    if module not in ("numpy", "builtins", "napari"):
        facts["array_type"] = f"{type(array).__module__}.{type(array).__name__}"
    if kind == "image":
        facts["contrast_limits"] = [float(v) for v in layer.contrast_limits]
        facts["colormap"] = str(getattr(layer.colormap, "name", layer.colormap))
        facts["rgb"] = bool(getattr(layer, "rgb", False))
    if kind == "labels":
        facts["labels"] = _count_labels(data, multiscale)
    return facts


def _count_labels(data: Any, multiscale: bool) -> int | None:
    """How many distinct non-zero labels, for an in-memory layer of bounded size; else None."""
    import numpy as np

    if multiscale or not isinstance(data, np.ndarray) or data.size > MAX_COUNTED_LABELS:
        return None
    values = np.unique(data)
    return int(np.count_nonzero(values))


def install(ns: dict[str, Any]) -> None:
    """Bootstrap entry: put ``viewer`` in the namespace, unless the user already has that name."""
    ns.setdefault("viewer", viewer)
    shell = _shell()
    if shell is None:
        return

    def restore_name(_info: Any) -> None:
        # %reset empties the namespace; the helper must outlive it like the kernel's own names
        shell.user_ns.setdefault("viewer", viewer)

    shell.events.register("pre_run_cell", restore_name)
    _wake_after_cells(shell)


def _wake_after_cells(shell: Any) -> None:
    """After every cell, the wake-up when Qt's loop is on: napari.Viewer() or %gui qt typed by
    hand turn it on without viewer(). Registered once per kernel process (each attach runs a
    fresh copy of this file)."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None or getattr(kernel, "_biopb_wake_hook", False):
        return

    def keep_qt_loop_answering(_result: Any) -> None:
        if getattr(shell, "active_eventloop", None) == "qt":
            _keep_waking(getattr(shell, "kernel", None))

    shell.events.register("post_run_cell", keep_qt_loop_answering)
    kernel._biopb_wake_hook = True


def keep_answering() -> str:
    """Entry for a kernel the server joins (its plugins loaded or not): the Qt wake-up of
    ``_keep_waking``, now when Qt's loop is on and after any later cell that turns it on.

    Without it an agent's request can hang the scientist's kernel for good (see
    ``_keep_waking``). It adds no name to the namespace: a timer and a cell hook on the kernel.
    Returns JSON: whether the wake-up runs now (Qt's loop is on).
    """
    try:
        shell = _shell()
        if shell is None:
            return json.dumps(False)
        _wake_after_cells(shell)
        if getattr(shell, "active_eventloop", None) == "qt":
            _keep_waking(getattr(shell, "kernel", None))
        return json.dumps(getattr(getattr(shell, "kernel", None), "_biopb_wake_timer", None) is not None)
    except Exception:  # the scientist's kernel is left as it was; joining goes on without the wake-up
        return json.dumps(False)
