"""Every reach into the MCP SDK's private parts, in one place, with the version they were tested on.

The SDK offers no public handle for a few things this server needs: the low-level server (to run
it over our own stdio streams and to replace request handlers) and the subscription bus
``MCPServer`` creates, the connection behind a session. An SDK release may move them without notice, so each access goes through
here, and :func:`check_sdk` runs when a server is built: an untested ``mcp`` version is a log
warning, a missing hook a clear :class:`SdkMismatch` before any client connects.
"""

from __future__ import annotations

import logging
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.session import ServerSession
from mcp.server.subscriptions import SubscriptionBus

from biopb_mcp.errors import SdkMismatch

logger = logging.getLogger(__name__)

__all__ = [
    "TESTED_MCP",
    "check_sdk",
    "installed_mcp",
    "lowlevel_server",
    "sender_context",
    "session_connection",
    "subscription_bus",
]

TESTED_MCP = ((2, 3), (2, 4))
"""``mcp`` versions the private hooks below were tested on: from the first, up to (not including) the second."""

_PRIVATE_HOOKS = ("_lowlevel_server", "_subscriptions")
"""``MCPServer`` attributes read here; the SDK has no public accessor for them."""


def installed_mcp() -> str:
    """The installed ``mcp`` distribution's version string ("unknown" if its metadata is missing)."""
    try:
        return version("mcp")
    except PackageNotFoundError:
        return "unknown"


def _release(text: str) -> tuple[int, ...] | None:
    """``"2.3.0rc1"`` -> ``(2, 3, 0)``; None when the string does not start with a number."""
    parts: list[int] = []
    for piece in text.split("."):
        digits = ""
        for char in piece:
            if not char.isdigit():
                break
            digits += char
        if not digits:
            break
        parts.append(int(digits))
        if len(digits) != len(piece):
            break
    return tuple(parts) or None


def check_sdk(mcp: MCPServer[Any], installed: str | None = None) -> None:
    """Warn when ``mcp`` is outside :data:`TESTED_MCP`; raise :class:`SdkMismatch` when a hook is gone.

    Args:
        mcp: the server whose private attributes are about to be used.
        installed: the version to judge (the installed one when None).
    """
    found = installed_mcp() if installed is None else installed
    low, high = TESTED_MCP
    release = _release(found)
    if release is None or not (low <= release[:2] < high):
        logger.warning(
            "mcp %s is installed; biopb-mcp was tested with mcp >=%s,<%s (it reaches into the SDK's "
            "private hooks %s). If tools or resources misbehave, install a tested version.",
            found,
            ".".join(map(str, low)),
            ".".join(map(str, high)),
            ", ".join(_PRIVATE_HOOKS),
        )
    missing = [name for name in _PRIVATE_HOOKS if not hasattr(mcp, name)]
    if missing:
        raise SdkMismatch(
            f"the installed mcp {found} has no MCPServer.{', MCPServer.'.join(missing)}, which biopb-mcp needs",
            installed=found,
            missing=missing,
            tested=f">={'.'.join(map(str, low))},<{'.'.join(map(str, high))}",
        )


def lowlevel_server(mcp: MCPServer[Any]) -> Server[Any]:
    """The low-level server under ``mcp``: runs over our own stdio streams, takes replaced handlers."""
    return mcp._lowlevel_server


def subscription_bus(mcp: MCPServer[Any]) -> SubscriptionBus:
    """The bus ``MCPServer`` created for modern-era ``subscriptions/listen`` streams."""
    return mcp._subscriptions


def session_connection(session: ServerSession) -> Any:
    """The connection a session belongs to: the only per-connection handle that outlives a request."""
    return session._connection


def sender_context(stream: Any) -> Any:
    """The context snapshot the SDK's dispatcher reads off a read stream (None when it carries none)."""
    return getattr(stream, "last_context", None)
