"""In the kernel: import the heavy imaging packages in the background right after start.

Importing scikit-image, scipy and matplotlib takes seconds (over ten on a loaded machine), so a
first analysis cell that pays for them outlives ``kernel.promote_after`` and becomes a job. A
thread imports them while the agent is still reading docs; a cell that needs one finds it loaded.

The thread never makes a cell wait longer than it would have: it starts no new import while a
cell runs (``pre_run_cell`` pauses it, ``post_run_cell`` resumes it), so a cell competes with it
for at most the one module it is in the middle of, and a cell that needs that very module waits
on its import lock only for the rest of work the cell would have done itself. Python's import
locks are per module, so nothing else is held.

Loaded by the kernel bootstrap from this file's path, standard library only. The host passes
the module list as JSON in ``BIOPB_MCP_WARM_IMPORTS`` (config ``kernel.warm_imports``); none
given (a notebook re-run, a kernel joined without the server's config) means no thread.
"""

from __future__ import annotations

import importlib
import json
import os
import threading
import time
from typing import Any

CONFIG_ENV = "BIOPB_MCP_WARM_IMPORTS"
"""Named in the server's ``biopb_mcp.kernel.env`` (the kernel's environment contract), which sets it."""

state: dict[str, Any] = {"modules": [], "done": [], "failed": {}, "seconds": None}
"""What the thread did: the modules asked for, those imported, those that failed (name -> error),
and the seconds it took once finished (None while running or off)."""

_idle = threading.Event()
"""Set while no cell runs: the thread imports only then."""


def status_json() -> str:
    """The thread's progress as JSON (read by the server as a silent expression)."""
    return json.dumps(state)


def _warm(modules: list[str]) -> None:
    start = time.monotonic()
    for name in modules:
        _idle.wait()
        try:
            importlib.import_module(name)
        except Exception as exc:  # a missing package is the agent's to meet, not the start's
            state["failed"][name] = f"{type(exc).__name__}: {exc}"
        else:
            state["done"].append(name)
    state["seconds"] = round(time.monotonic() - start, 3)


def install(ns: dict[str, Any]) -> None:
    """Bootstrap entry: start the warm-up thread; adds no name to the namespace."""
    raw = os.environ.pop(CONFIG_ENV, "")
    modules = [m for m in (json.loads(raw) if raw else []) if isinstance(m, str) and m]
    state["modules"] = modules
    if not modules:
        return
    _idle.set()
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        shell = None
    if shell is not None:
        shell.events.register("pre_run_cell", lambda _info: _idle.clear())
        shell.events.register("post_run_cell", lambda _result: _idle.set())
    threading.Thread(target=_warm, args=(modules,), name="biopb-warm-imports", daemon=True).start()
