"""In the kernel: after the scientist's cell, say what the agent did while it ran.

The agent's code waits while the scientist's cell runs, and its ``interrupt_kernel`` then
withdraws the agent's own request instead of interrupting that cell. The server records the
withdrawal in the presence file it shares with the kernel (``agent-<id>.json``); this hook reads
it after each cell and prints one line into that cell's output, in the console or notebook
where the scientist ran it, so they learn why the agent's code did not run.

Loaded by the kernel bootstrap from this file's path (standard library only), with the file named
by ``BIOPB_MCP_AGENT_FILE`` (declared in the server's ``biopb_mcp.kernel.env``), and by
``%load_ext biopb_mcp`` in a kernel the server joined.
"""

from __future__ import annotations

import json
import os
import stat
import time
from typing import Any

MAX_BYTES = 16 * 1024
"""Largest presence file read (the server writes well under 1 kB)."""


def install(ns: dict[str, Any], path: str | None = None) -> Notes | None:
    """Register the hook for the presence file ``path`` (default: ``BIOPB_MCP_AGENT_FILE``);
    returns it (``uninstall`` takes it) or None when there is no file to read or no IPython."""
    from IPython import get_ipython

    path = path or os.environ.get("BIOPB_MCP_AGENT_FILE", "")
    shell = get_ipython()  # type: ignore[no-untyped-call,unused-ignore]  # typed from IPython 9 on
    if not path or shell is None:
        return None
    hook = Notes(path)
    shell.events.register("pre_run_cell", hook.before)
    shell.events.register("post_run_cell", hook.after)
    return hook


def uninstall(hook: Notes) -> None:
    """Unregister a hook ``install`` returned (``%unload_ext``)."""
    from IPython import get_ipython

    shell = get_ipython()  # type: ignore[no-untyped-call,unused-ignore]  # typed from IPython 9 on
    if shell is not None:
        for event, callback in (("pre_run_cell", hook.before), ("post_run_cell", hook.after)):
            try:
                shell.events.unregister(event, callback)
            except ValueError:
                pass


class Notes:
    """The hook: what the agent withdrew while the cell ran, printed once after it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.started = time.time()
        self.shown = 0.0

    def before(self, _info: Any = None) -> None:
        self.started = time.time()

    def after(self, _result: Any = None) -> None:
        record = _read(self.path)
        at = record.get("withdrawn_at")
        if not isinstance(at, (int, float)) or isinstance(at, bool) or at <= self.shown or at < self.started:
            return
        self.shown = float(at)
        job = str(record.get("withdrawn_job") or "its request")[:64]
        code = " ".join(str(record.get("withdrawn_code") or "").split())[:80]
        print(
            f"[biopb-mcp] While this cell ran, the agent's {job} ({code}) waited behind it; the agent "
            "withdrew it, so none of it ran. Your cell was not interrupted.",
            flush=True,
        )


def _read(path: str) -> dict[str, Any]:
    """The presence file as a dict; empty when missing, not a regular file, too big or not JSON."""
    try:
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags)
    except OSError:
        return {}
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return {}
        raw = os.read(fd, MAX_BYTES + 1)
    except OSError:
        return {}
    finally:
        os.close(fd)
    if len(raw) > MAX_BYTES:
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
