"""The server's side of Dask in the kernel: what the kernel's plugin is told, and its status.

The plugin itself (``inside/compute.py``) runs inside the kernel and is passed the ``[compute]``
settings by ``kernel.env``; this module reads back its status through a silent expression.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any

from biopb_mcp.kernel.inside import INSIDE_DIR

if TYPE_CHECKING:
    from biopb_mcp.config.settings import Settings

PLUGIN_FILE = INSIDE_DIR / "compute.py"
"""Loaded by the kernel bootstrap as a built-in plugin (it defines ``dask_client``)."""

STATUS_EXPRESSION = "__import__('sys').modules['biopb_mcp_builtin_compute'].status_json()"
"""Evaluated in the kernel (as a user expression: no history, no output) for server_status."""


def mode(scheduler: str) -> str:
    """``none`` | ``local`` | ``attached`` (an address)."""
    return scheduler if scheduler in ("none", "local") else "attached"


class Reported(StrEnum):
    """Where the ``compute`` section's live facts came from, or why there are none."""

    LIVE = "live"
    """The kernel's plugin answered: its facts are in the section."""
    NO_KERNEL = "no_kernel"
    BUSY = "busy"
    """Code was running, so the kernel was not asked (a status never waits behind user code)."""
    NO_ANSWER = "no_answer"


def status_section(settings: Settings, live: Any, kernel_state: str, busy: bool) -> dict[str, Any]:
    """The facts of the ``compute`` section of server_status (``kernel_text`` words them).

    Args:
        settings: the server's settings (the configured scheduler is shown even with no kernel).
        live: the plugin's ``status()`` as the kernel reported it, or None when the kernel was
            not asked (not ready, busy) or did not answer.
        kernel_state: the host's state, to say why there is no live answer.
        busy: code was running, so the kernel was not asked.

    Returns:
        ``mode``, ``scheduler``, ``reported`` (a ``Reported``), and with a live answer the
        plugin's own facts (``started``, ``error``, and once started the client's ``status``,
        ``address``, ``workers``, ``threads``, ``memory_limit_bytes``, ``dashboard``,
        ``dashboard_pages``, ``tasks_in_flight``): the kernel's own mode wins over the
        settings', which may have changed in the file since it started.
    """
    scheduler = settings.compute.scheduler
    out: dict[str, Any] = {"mode": mode(scheduler), "scheduler": scheduler}
    if isinstance(live, dict):
        out.update(live)
        out["reported"] = Reported.LIVE
    elif kernel_state != "ready":
        out["reported"] = Reported.NO_KERNEL
    else:
        out["reported"] = Reported.BUSY if busy else Reported.NO_ANSWER
    return out
