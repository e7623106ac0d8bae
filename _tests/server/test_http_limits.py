"""Connection limits of the HTTP transport: the read deadline, the connection cap, accept errors,
and the bounded log under a flood of malformed requests.

The protocol class is tested under a real uvicorn on a loopback socket, with a small deadline and
cap so each case takes a moment; the whole server is tested as a subprocess under a low
descriptor limit, with the soak's own attacks at small counts.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from _tests.support.soak.http_flood import LOG_GROWTH_BOUND, HttpServer, malformed_flood, slowloris
from biopb_mcp.server.transports.http_limits import LimitedH11Protocol, accept_error_handler, connection_cap


async def _hello(scope: Scope, receive: Receive, send: Send) -> None:
    """A plain ASGI app: reads the whole body, answers 200."""
    assert scope["type"] in ("http", "lifespan")
    if scope["type"] == "lifespan":
        return
    while True:
        message = await receive()
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


class _Served:
    """uvicorn with a LimitedH11Protocol of the given cap and deadline, in a thread of its own."""

    def __init__(self, cap: int, read_timeout: float) -> None:
        protocol = type("TestH11", (LimitedH11Protocol,), {"cap": cap, "read_timeout": read_timeout})
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(_hello, log_config=None, lifespan="off", http=protocol, access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=asyncio.run, args=(self.server.serve(sockets=[self.sock]),), daemon=True)
        self.thread.start()
        while not self.server.started:
            self.thread.join(0.01)

    def connect(self, partial: bytes = b"") -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        if partial:
            sock.sendall(partial)
        return sock

    def get(self) -> bytes:
        with self.connect(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") as sock:
            return _read_all(sock)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


def _read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a reset counts as closed)."""
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except ConnectionResetError:
        pass
    return out


@pytest.fixture
def served() -> Iterator[_Served]:
    running = _Served(cap=4, read_timeout=0.5)
    yield running
    running.stop()


def test_a_half_sent_request_is_answered_408_and_closed(served: _Served) -> None:
    with served.connect(b"POST / HTTP/1.1\r\nHost: x\r\nX-Slow: ") as sock:
        assert _read_all(sock).startswith(b"HTTP/1.1 408")  # the socket's 30 s timeout never fires


def test_a_body_that_never_arrives_whole_is_closed(served: _Served) -> None:
    with served.connect(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly part") as sock:
        assert _read_all(sock).startswith(b"HTTP/1.1 408")


def test_a_silent_new_connection_is_closed_too(served: _Served) -> None:
    with served.connect() as sock:
        assert _read_all(sock).startswith(b"HTTP/1.1 408")


def test_past_the_cap_the_connection_idle_longest_makes_room() -> None:
    # A read deadline far past the test: the idle connections can only be closed by the cap, however
    # slowly the machine opens them (with the fixture's 0.5 s, a slow one met the deadline first).
    served = _Served(cap=4, read_timeout=60)
    idle = [served.connect(b"GET / HTTP/1.1\r\nHost: x\r\n") for _ in range(4)]
    try:
        assert served.get().endswith(b"ok")  # a fifth connection: the oldest idle one is closed
        assert _read_all(idle[0]) == b""
    finally:
        for sock in idle:
            sock.close()
        served.stop()


def test_with_every_connection_busy_a_new_one_is_answered_503() -> None:
    busy_app_started = threading.Event()
    release = threading.Event()

    async def slow(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        busy_app_started.set()
        await asyncio.get_running_loop().run_in_executor(None, release.wait, 30)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    served = _Served(cap=2, read_timeout=30)
    served.server.config.app = slow
    served.server.config.loaded_app = slow
    busy = []
    try:
        for _ in range(2):
            busy_app_started.clear()
            busy.append(served.connect(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
            assert busy_app_started.wait(30)
        with served.connect() as sock:
            assert _read_all(sock).startswith(b"HTTP/1.1 503")
    finally:
        release.set()
        for sock in busy:
            sock.close()
        served.stop()


def test_the_cap_leaves_room_under_the_descriptor_limit() -> None:
    assert connection_cap(1024) == 256
    assert connection_cap(512) < 512 - 128
    assert connection_cap(64) == 8


def test_a_failed_accept_for_lack_of_descriptors_is_one_line_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handler = accept_error_handler(None)
    loop = asyncio.new_event_loop()
    try:
        with caplog.at_level("WARNING"):
            handler(
                loop,
                {"message": "socket.accept() out of system resource", "exception": OSError(24, "Too many open files")},
            )
    finally:
        loop.close()
    assert len(caplog.records) == 1 and caplog.records[0].exc_info is None
    assert "Too many open files" in caplog.records[0].getMessage()


def test_idle_connections_past_the_descriptor_limit_leave_real_clients_answered(tmp_path: Path) -> None:
    """The server under a 512-descriptor limit with 600 idle half-sent requests open."""
    server = HttpServer(tmp_path, nofile=512)
    try:
        counts = slowloris(server, 600, real_requests=2, close_wait=None)
    finally:
        server.stop()
    assert counts["slowloris: real requests unanswered"] == 0, counts
    assert counts["slowloris: tracebacks or 'Too many open files' lines logged"] == 0, server.stderr()[-3000:]


def test_a_flood_of_malformed_requests_grows_the_log_and_stderr_by_a_few_lines(tmp_path: Path) -> None:
    server = HttpServer(tmp_path)
    try:
        counts = malformed_flood(server, 1500, workers=8)
    finally:
        server.stop()
    assert counts["malformed flood: answered 400"] == 1500
    assert counts["malformed flood: server log grew by (bytes)"] < LOG_GROWTH_BOUND / 4, counts
    assert counts["malformed flood: stderr grew by (bytes)"] < LOG_GROWTH_BOUND / 4, counts
