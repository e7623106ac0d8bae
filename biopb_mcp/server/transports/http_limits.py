"""Connection-level limits of the HTTP transport: a deadline for reading a request, a cap on
open connections, and accept errors logged without a traceback.

Any local user can open connections to the loopback port without the token. One that sends half
a request and waits holds a file descriptor for as long as it likes; a thousand of them exhaust
the process's descriptors, after which nobody is answered and every failed ``accept()`` logs a
traceback. uvicorn (0.54) times out only idle keep-alive connections, so the h11 protocol class
here adds the rest: a request must arrive whole within :data:`REQUEST_READ_TIMEOUT_S` of its first
byte (of the connection, for the first one), and past :func:`connection_cap` open connections the
one that has waited longest for a request is closed to make room (a connection busy with a request
is never closed; with none idle, the new one is answered 503).
"""

from __future__ import annotations

import asyncio
import errno
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from biopb_mcp.fs.descriptors import open_files_limit

__all__ = [
    "ACCEPT_BACKLOG",
    "MAX_CONNECTIONS",
    "REQUEST_READ_TIMEOUT_S",
    "LimitedH11Protocol",
    "accept_error_handler",
    "connection_cap",
]

logger = logging.getLogger(__name__)

REQUEST_READ_TIMEOUT_S = 10.0
"""Seconds a request may take to arrive whole (headers and body) from its first byte; a client on
loopback sends an MCP request in milliseconds."""

MAX_CONNECTIONS = 256
"""Most HTTP connections open at once: an MCP client uses a handful."""

FD_RESERVE = 128
"""Descriptors kept for everything but HTTP connections (the kernel's sockets, the log, the search
index, docs being read), so the connection cap never starves them."""

ACCEPT_BACKLOG = 64
"""The listen backlog, which is also how many connections asyncio accepts in one go: the cap is
applied when a connection is set up, an event-loop turn or two after its accept, so a burst of
connections overshoots the cap by a few such batches before any is closed."""

_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def _closing_response(status: str, text: str) -> bytes:
    """A whole HTTP/1.1 response that ends the connection, written before any request was parsed."""
    body = text.encode("ascii")
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode("ascii") + body


_REFUSAL_503 = _closing_response("503 Service Unavailable", "Too many open connections; try again later.\n")
_TIMEOUT_408 = _closing_response("408 Request Timeout", "The request did not arrive whole in time.\n")


def connection_cap(soft_limit: int | None = None) -> int:
    """Open connections allowed: MAX_CONNECTIONS, lowered to fit the descriptor limit."""
    if soft_limit is None:
        soft_limit = open_files_limit()
    if soft_limit is None:  # unlimited, or no such limit on this platform
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft_limit - FD_RESERVE - 3 * ACCEPT_BACKLOG))


class LimitedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a whole-request read deadline and a cap on connections.

    ``cap`` and ``read_timeout`` are class attributes so that a subclass (or a test) sets them;
    :func:`biopb_mcp.server.http.serve_http` makes one with the cap for this process.
    """

    cap = MAX_CONNECTIONS
    read_timeout = REQUEST_READ_TIMEOUT_S

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._read_timer: asyncio.TimerHandle | None = None
        self._waiting_since = self.loop.time()
        super().connection_made(transport)
        if len(self.connections) > self.cap and not self._make_room():
            logger.warning(
                "HTTP connection refused: %d connections are open, all busy with requests", len(self.connections) - 1
            )
            self.connections.discard(self)
            transport.write(_REFUSAL_503)
            transport.close()
            return
        self._follow_read_state()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow_read_state()

    def on_response_complete(self) -> None:
        self._waiting_since = self.loop.time()
        super().on_response_complete()
        self._follow_read_state()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_read_timer()
        super().connection_lost(exc)

    # ------------------------------------------------------------------ the read deadline

    def _reading(self) -> bool:
        """A request has begun (or the connection is new) and has not arrived whole."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            return True
        # IDLE: a new connection (no request cycle yet), or part of the next request on a
        # kept-alive one; uvicorn's keep-alive timer covers a kept-alive one that sends nothing.
        return state is h11.IDLE and (self.cycle is None or bool(self.conn.trailing_data[0]))

    def _follow_read_state(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        if self._reading():
            if self._read_timer is None:
                self._read_timer = self.loop.call_later(self.read_timeout, self._read_timed_out)
        else:
            self._cancel_read_timer()

    def _cancel_read_timer(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        if self.transport.is_closing() or not self._reading():
            return
        logger.warning("HTTP connection closed: no whole request within %g s", self.read_timeout)
        if self.cycle is None or not self.cycle.response_started:
            self.transport.write(_TIMEOUT_408)
        self.transport.close()

    # ------------------------------------------------------------------ the cap

    def _waiting_for_request(self) -> bool:
        """Nothing of this connection is being answered: closing it loses no request."""
        return self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)

    def _make_room(self) -> bool:
        """Close the connection that has waited longest for a request; False when none waits."""
        waiting = [
            c
            for c in self.connections
            if c is not self and isinstance(c, LimitedH11Protocol) and c._waiting_for_request()
        ]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda c: c._waiting_since)
        logger.warning("HTTP connection cap (%d) reached: closed the connection idle longest", self.cap)
        oldest._cancel_read_timer()
        oldest.connections.discard(oldest)
        oldest.transport.abort()
        return True


def accept_error_handler(default: Any) -> Any:
    """An event-loop exception handler that logs a failed ``accept()`` for lack of descriptors
    as one line (the log's rate limit keeps a flood of them short), never a traceback each."""

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in _RESOURCE_ERRNOS:
            logger.warning(
                "HTTP cannot accept connections for now: %s (accepting again in a second)", exc.strerror or exc
            )
            return
        if default is not None:
            default(loop, context)
        else:
            loop.default_exception_handler(context)

    return handler
