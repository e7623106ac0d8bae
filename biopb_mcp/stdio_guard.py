"""Stdio hygiene: the JSON-RPC wire gets private descriptors; fd 0/1 stop being the wire.

Under stdio, fd 1 *is* the JSON-RPC channel, and anything in the process can write to it: a
``print`` in a plugin, a C extension writing to fd 1, a child process inheriting it. Rather than
hoping nobody does, :func:`claim_stdio` duplicates fd 0 and fd 1 to private close-on-exec
descriptors for the transport, then points fd 1 at the server log and fd 0 at the null device.
A stray write lands in the log; a stray read sees EOF; children never inherit the wire.
"""

from __future__ import annotations

import fcntl
import io
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp.server.stdio import stdio_server

logger = logging.getLogger(__name__)

__all__ = ["StdioWire", "claim_stdio", "wire_streams"]


@dataclass(frozen=True)
class StdioWire:
    """The private descriptors that carry JSON-RPC once fd 0/1 are diverted."""

    read_fd: int
    write_fd: int


def _private_dup(fd: int) -> int:
    """Duplicate ``fd`` above the standard range, close-on-exec (children never inherit the wire)."""
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


def claim_stdio(log_file: Path) -> StdioWire:
    """Move the wire to private fds, point fd 1 at ``log_file`` and fd 0 at /dev/null.

    Also rebinds ``sys.stdout`` (to the log, line-buffered) and ``sys.stdin`` (to /dev/null), so
    Python-level prints and reads follow the descriptors. Call once, before anything else runs.
    """
    sys.stdout.flush()
    wire = StdioWire(read_fd=_private_dup(0), write_fd=_private_dup(1))
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log_fd = os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(log_fd, 1)
        os.dup2(null_fd, 0)
    finally:
        os.close(log_fd)
        os.close(null_fd)
    sys.stdout = io.TextIOWrapper(
        os.fdopen(1, "wb", closefd=False), encoding="utf-8", errors="replace", line_buffering=True
    )
    sys.stdin = io.TextIOWrapper(os.fdopen(0, "rb", closefd=False), encoding="utf-8")
    logger.info("stdio wire moved to fds %d/%d; fd 1 now writes to %s", wire.read_fd, wire.write_fd, log_file)
    return wire


@asynccontextmanager
async def wire_streams(wire: StdioWire) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport, run over the private descriptors: yields (read, write) streams."""
    # closefd=False: the reader thread may still block on the fd when the transport exits.
    reader = io.TextIOWrapper(os.fdopen(wire.read_fd, "rb", closefd=False), encoding="utf-8", errors="replace")
    writer = io.TextIOWrapper(os.fdopen(wire.write_fd, "wb", closefd=False), encoding="utf-8")
    async with stdio_server(stdin=anyio.wrap_file(reader), stdout=anyio.wrap_file(writer)) as streams:
        yield streams
