"""Serving stdio: the JSON-RPC wire gets private descriptors; fd 0/1 stop being the wire.

Under stdio, fd 1 *is* the JSON-RPC channel, and anything in the process can write to it: a
``print`` in a plugin, a C extension writing to fd 1, a child process inheriting it. Rather than
hoping nobody does, :func:`claim_stdio` duplicates fd 0 and fd 1 to private close-on-exec
descriptors for the transport, then points fd 1 at the server log and fd 0 at the null device.
A stray write lands in the log; a stray read sees EOF; children never inherit the wire.
:func:`serve_stdio` then runs the server over those descriptors until stdin closes.
"""

from __future__ import annotations

import collections
import io
import json
import logging
import os
import sys
import threading
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

from biopb_mcp.fs.descriptors import private_dup
from biopb_mcp.server.sdk import lowlevel_server, sender_context
from biopb_mcp.server.state import AppState
from biopb_mcp.server.transports.exit import exit_on_signal, kernel_fate, shutdown_and_exit
from biopb_mcp.server.unsendable import GuardedWriteStream

logger = logging.getLogger(__name__)

__all__ = [
    "AnsweringReadStream",
    "StdioWire",
    "WireLines",
    "WireWriter",
    "claim_stdio",
    "error_reply",
    "precheck",
    "serve_stdio",
    "wire_streams",
]


@dataclass(frozen=True)
class StdioWire:
    """The private descriptors that carry JSON-RPC once fd 0/1 are diverted."""

    read_fd: int
    write_fd: int


def _private_dup(fd: int) -> int:
    """Duplicate ``fd`` above the standard range, close-on-exec (children never inherit the wire)."""
    return private_dup(fd, 3)


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
    """The SDK's stdio transport, run over the private descriptors: yields (read, write) streams.

    The SDK's own reader gets its lines through :class:`WireLines`, which answers what the SDK
    would misread before it sees it, and its writer through :class:`WireWriter`, which those
    answers share, so a line on the wire is never interleaved with another.
    """
    # closefd=False: the reader thread may still block on the fd when the transport exits.
    reader = io.TextIOWrapper(os.fdopen(wire.read_fd, "rb", closefd=False), encoding="utf-8", errors="replace")
    writer = WireWriter(io.TextIOWrapper(os.fdopen(wire.write_fd, "wb", closefd=False), encoding="utf-8"))
    lines = WireLines(reader, writer)
    async with stdio_server(stdin=lines, stdout=writer) as (read, write):  # type: ignore[arg-type]
        # The SDK's writer task ends the session on a message it cannot encode: none reaches it.
        guarded = GuardedWriteStream(write)
        yield AnsweringReadStream(read, guarded, lines.passed), guarded


PARSE_ERROR = -32700
INVALID_REQUEST = -32600

MAX_ID_DIGITS = 100
"""An integer longer than this is never taken as a request id (and parsing it costs nothing)."""


def _lenient_int(text: str) -> int | None:
    """``json`` int hook: None for an integer too long to convert (Python refuses > 4300 digits)."""
    return int(text) if len(text.lstrip("-")) <= MAX_ID_DIGITS else None


def _readable_id(message: Any) -> str | int | None:
    """The request's id when it is one the SDK can echo (a string or an integer), else None."""
    candidate = message.get("id") if isinstance(message, dict) else None
    if isinstance(candidate, str) or (isinstance(candidate, int) and not isinstance(candidate, bool)):
        return candidate
    return None


def _error_line(request_id: Any, code: int, message: str) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def precheck(line: str) -> str | None:
    """The error line answering a line the SDK would misread or drop, or None to pass it on.

    A request whose id is not a string or an integer (null, an object, a boolean, a fraction)
    would be read by the SDK as a notification and never answered, so it is answered here: with
    its own id when that is a number, else with a null id, as JSON-RPC asks when the id cannot
    be read (MCP allows no null id). Everything else is the SDK's to read (and :func:`error_reply`'s when it cannot).
    """
    # Cheap way out for most lines; a backslash may spell the key "id" with escapes.
    if not line.lstrip().startswith("{") or ('"id"' not in line and "\\" not in line):
        return None
    try:
        message = json.loads(line, parse_int=_lenient_int)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    request_id = message["id"]
    if _readable_id(message) is not None:
        return None
    echoed = request_id if isinstance(request_id, float) else None
    kind = "null" if request_id is None else type(request_id).__name__
    return _error_line(echoed, INVALID_REQUEST, f"Invalid Request: id must be a string or an integer, not {kind}")


class WireWriter:
    """The wire's writer: each ``write`` puts whole lines out under one lock, flushed at once.

    The SDK writes one JSON line per call; the answers :class:`WireLines` writes itself take the
    same lock, so two lines never interleave.
    """

    def __init__(self, file: io.TextIOWrapper) -> None:
        self._file = file
        self._lock = threading.Lock()

    def write_now(self, text: str) -> None:
        with self._lock:
            self._file.write(text)
            self._file.flush()

    async def write(self, text: str) -> None:
        await anyio.to_thread.run_sync(self.write_now, text)

    async def flush(self) -> None:
        """Every write is flushed already."""


class WireLines:
    """The lines of the wire as the SDK's reader iterates them, each checked by :func:`precheck`.

    A line answered here never reaches the SDK. Every line passed on is also kept (in order) in
    ``passed``, so the read stream can answer a line the SDK then fails to parse from the line
    itself, with its own id and the real reason.
    """

    def __init__(self, file: io.TextIOWrapper, writer: WireWriter) -> None:
        self._file = file
        self._writer = writer
        self.passed: collections.deque[str] = collections.deque()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await anyio.to_thread.run_sync(self._file.readline)
            if not line:
                raise StopAsyncIteration
            answer = precheck(line)
            if answer is None:
                self.passed.append(line)
                return line
            logger.warning("unreadable message on stdin (answered %d): %s", INVALID_REQUEST, _short(ValueError(line)))
            await self._writer.write(answer + "\n")


def error_reply(exc: Exception, line: str | None = None) -> JSONRPCError | None:
    """The JSON-RPC error answering a line the SDK could not read as a message, or None.

    -32700 when the line is not JSON, -32600 when it is JSON but not one message (a batch, a
    surrogate escape or a number the SDK's parser refuses, a missing field). The id is the
    line's own when one can be read from it, else null. None for what looks like a response
    (``result``/``error`` without ``method``): answering a response could start a loop.
    ``line`` is the raw line when known; else what the parser's error quotes is used.
    """
    raw: Any = line
    if raw is None and isinstance(exc, ValidationError):
        inputs = [e.get("input") for e in exc.errors(include_url=False)]
        raw = inputs[0] if inputs else None
    message: Any = raw
    if isinstance(raw, (str, bytes)):
        try:
            message = json.loads(raw, parse_int=_lenient_int)
        except (ValueError, RecursionError) as bad:
            return JSONRPCError(
                jsonrpc="2.0", id=None, error=ErrorData(code=PARSE_ERROR, message=f"Parse error: {_short(bad)}")
            )
    if isinstance(message, list):
        return JSONRPCError(
            jsonrpc="2.0",
            id=None,
            error=ErrorData(
                code=INVALID_REQUEST,
                message="Invalid Request: batch arrays are not supported; send one message per line",
            ),
        )
    if isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message):
        return None
    return JSONRPCError(
        jsonrpc="2.0",
        id=_readable_id(message),
        error=ErrorData(
            code=INVALID_REQUEST,
            message=f"Invalid Request: not a JSON-RPC message the server can read ({_reason(exc)})",
        ),
    )


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
    ``passed`` holds the raw lines the SDK got, in order (one item comes out per line), so an
    answer quotes the line's own id and reason.
    """

    def __init__(self, inner: Any, write: Any, passed: collections.deque[str] | None = None) -> None:
        self._inner = inner
        self._write = write
        self._passed = passed

    @property
    def last_context(self) -> Any:
        """The sender's context snapshot of the last message (the dispatcher reads it)."""
        return sender_context(self._inner)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            line = self._passed.popleft() if self._passed else None
            if not isinstance(item, Exception):
                return item
            reply = error_reply(item, line)
            logger.warning(
                "unreadable message on stdin%s: %s",
                "" if reply is None else f" (answered {reply.error.code})",
                _short(item),
            )
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
