"""Serving stdio: the JSON-RPC wire gets private descriptors; fd 0/1 stop being the wire.

Under stdio, fd 1 *is* the JSON-RPC channel, and anything in the process can write to it: a
``print`` in a plugin, a C extension writing to fd 1, a child process inheriting it. Rather than
hoping nobody does, :func:`claim_stdio` duplicates fd 0 and fd 1 to private close-on-exec
descriptors for the transport, then points fd 1 at the server log and fd 0 at the null device.
A stray write lands in the log; a stray read sees EOF; children never inherit the wire.
:func:`serve_stdio` then runs the server over those descriptors until stdin closes.
"""

from __future__ import annotations

import fcntl
import io
import json
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import ErrorData, JSONRPCError
from pydantic import ValidationError

from biopb_mcp.server.run import exit_on_signal, kernel_fate, shutdown_and_exit
from biopb_mcp.server.sdk import lowlevel_server, sender_context
from biopb_mcp.server.state import AppState

logger = logging.getLogger(__name__)

__all__ = ["AnsweringReadStream", "StdioWire", "claim_stdio", "error_reply", "serve_stdio", "wire_streams"]


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
    async with stdio_server(stdin=anyio.wrap_file(reader), stdout=anyio.wrap_file(writer)) as (read, write):
        yield AnsweringReadStream(read, write), write


PARSE_ERROR = -32700
INVALID_REQUEST = -32600

MAX_ID_DIGITS = 100
"""An integer longer than this is never taken as a request id (and parsing it costs nothing)."""


def _lenient_int(text: str) -> int | None:
    """``json`` int hook: None for an integer too long to convert (Python refuses > 4300 digits)."""
    return int(text) if len(text.lstrip("-")) <= MAX_ID_DIGITS else None


def error_reply(exc: Exception) -> JSONRPCError | None:
    """The JSON-RPC error answering a line the SDK could not read as a message, or None.

    -32700 when the line is not JSON, -32600 when it is JSON but not one message (a batch, a
    surrogate escape or a number the SDK's parser refuses, a missing field). The id is the
    line's own when one can be read from it, else null. None for what looks like a response
    (``result``/``error`` without ``method``): answering a response could start a loop.
    """
    raw: Any = None
    if isinstance(exc, ValidationError):
        inputs = [e.get("input") for e in exc.errors(include_url=False)]
        raw = inputs[0] if inputs else None
    message: Any = raw
    if isinstance(raw, (str, bytes)):
        try:
            message = json.loads(raw, parse_int=_lenient_int)
        except (ValueError, RecursionError) as bad:
            return JSONRPCError(jsonrpc="2.0", id=None,
                                error=ErrorData(code=PARSE_ERROR, message=f"Parse error: {_short(bad)}"))
    if isinstance(message, list):
        return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(
            code=INVALID_REQUEST, message="Invalid Request: batch arrays are not supported; send one message per line"))
    request_id: str | int | None = None
    if isinstance(message, dict):
        if "method" not in message and ("result" in message or "error" in message):
            return None
        candidate = message.get("id")
        if isinstance(candidate, str) or (isinstance(candidate, int) and not isinstance(candidate, bool)):
            request_id = candidate
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(
        code=INVALID_REQUEST, message=f"Invalid Request: not a JSON-RPC message the server can read ({_reason(exc)})"))


def _reason(exc: Exception) -> str:
    """The first validation problem, e.g. ``method: Field required``, not pydantic's whole report."""
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first.get("loc", ())[1:])
        return _short(ValueError(f"{where}: {first['msg']}" if where else first["msg"]))
    return _short(exc)


def _short(exc: BaseException, limit: int = 200) -> str:
    """One line of an exception's text, cut: pydantic quotes the offending input."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "..."


class AnsweringReadStream:
    """The transport's read stream, answering each unreadable line with a JSON-RPC error.

    The SDK's stdio transport hands such a line to the server as an exception, which the server
    drops: a client that sent a request with an id then waits forever. Over HTTP the same input
    gets an error response; this gives stdio the same. Everything else passes through untouched.
    """

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> Any:
        """The sender's context snapshot of the last message (the dispatcher reads it)."""
        return sender_context(self._inner)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            reply = error_reply(item)
            logger.warning("unreadable message on stdin%s: %s",
                           "" if reply is None else f" (answered {reply.error.code})", _short(item))
            if reply is not None:
                await self._write.send(SessionMessage(reply))

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def serve_stdio(mcp: MCPServer, state: AppState, wire: Any) -> None:
    lowlevel = lowlevel_server(mcp)
    async with anyio.create_task_group() as tg:
        tg.start_soon(exit_on_signal, state)
        async with wire_streams(wire) as (read_stream, write_stream):
            # Leave from inside the transport: its teardown may wait on a reader thread forever.
            try:
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
            except Exception:
                logger.exception("The stdio transport failed; %s", kernel_fate(state))
                shutdown_and_exit(state, 1)
            logger.info("stdin closed; %s", kernel_fate(state))
            shutdown_and_exit(state, 0)
