"""Giving a plain kernel what the agent's kernel had, for a re-run of a session notebook.

The session notebook's setup cell calls :func:`load_plugins` in whatever kernel re-runs it: the
same bootstrap the server runs in a kernel it joins, so the built-in plugins (``show``, the save
helpers, ``dask_client``), the plugin files and the ``biopb_mcp.namespace`` entry points give the namespace
the names the agent's cells used. Nothing of the server's own machinery comes with it: no parent-death watcher (no
server is the parent) and no shutdown guard (the re-run's client owns this kernel).
"""

from __future__ import annotations

from typing import Any

from biopb_mcp.kernel.attached import bootstrap_code
from biopb_mcp.kernel.env import replay_env
from biopb_mcp.kernel.process import BOOTSTRAP_FILE

__all__ = ["load_plugins"]


def load_plugins(ns: dict[str, Any], *, plugins_dir: str = "", compute: str = "", outputs: str = "") -> dict[str, Any]:
    """Load the kernel plugins into ``ns`` (a cell's ``globals()``) as the agent's kernel did.

    Args:
        ns: the namespace to fill.
        plugins_dir: the plugin files' folder (``<config dir>/kernel``); missing is fine.
        compute: the ``[compute]`` settings as JSON, as the server passes them to its kernel.
        outputs: the ``[outputs]`` settings as JSON (where the save helpers write, the table format).

    Returns:
        The bootstrap's record: what loaded, what failed and why.
    """
    env = replay_env(plugins_dir, compute, outputs)
    exec(bootstrap_code(BOOTSTRAP_FILE.read_text(encoding="utf-8"), env), ns)
    record = ns.get("__biopb_bootstrap__")
    return record if isinstance(record, dict) else {}
