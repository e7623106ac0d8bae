"""Attacks on the HTTP transport that need no token: idle half-sent requests and malformed ones.

Any local user can open connections to the loopback port. ``slowloris`` opens many connections
that send half a request and wait, under a low descriptor limit, and checks that a real client
is still answered, that the server closes the idle connections and that the log holds no
``Too many open files`` tracebacks. ``malformed_flood`` sends thousands of requests that are not
HTTP and measures what the server log and stderr grow by (each used to take a line in both, so a
flood rotated the real log away). Both run the real server in a subprocess.
"""

from __future__ import annotations

import asyncio
import os
import resource
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from _tests.support.http_start import started
from _tests.support.raw_server import write_config

__all__ = ["LOG_GROWTH_BOUND", "HttpServer", "malformed_flood", "slowloris"]

LOG_GROWTH_BOUND = 64 * 1024
"""Most bytes the server log or stderr may grow by during a flood: a few dozen lines, not one per request."""

_INIT = (
    b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", '
    b'"capabilities": {}, "clientInfo": {"name": "soak", "version": "0"}}}'
)


class HttpServer:
    """``biopb-mcp --transport http`` in a config tree of its own, optionally under a descriptor limit."""

    def __init__(self, root: Path, *, nofile: int | None = None, log_level: str = "INFO") -> None:
        self.root = root
        env = {**os.environ, **write_config(root, log_level=log_level)}
        self.stderr_path = root / "stderr.log"
        self.log_path = root / "state" / "server.log"

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        with self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "biopb_mcp", "--transport", "http", "--port", "0"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
                preexec_fn=limit,
            )
        deadline = time.monotonic() + 120
        while (found := started(self.stderr())) is None:  # the token line follows the serving line
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the HTTP server did not start: {self.stderr()[-2000:]}")
            time.sleep(0.05)
        url, self.token = found
        self.port = int(url.rsplit(":", 1)[1].split("/")[0])

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def log_bytes(self) -> int:
        """Bytes of the server log and its rotated copies."""
        return sum(p.stat().st_size for p in self.log_path.parent.glob("server.log*"))

    def initialize(self, timeout: float = 30.0) -> bool:
        """One real client request (initialize, with the token); True when answered 200."""
        request = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nAuthorization: Bearer {self.token}\r\n"
            f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            f"Content-Length: {len(_INIT)}\r\nConnection: close\r\n\r\n"
        ).encode() + _INIT
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
                sock.sendall(request)
                reply = sock.recv(64)
        except OSError:
            return False
        return reply.startswith(b"HTTP/1.1 200")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def slowloris(
    server: HttpServer, connections: int, *, real_requests: int = 5, close_wait: float | None = 40.0
) -> Counter[str]:
    """Open ``connections`` idle half-sent requests, send real ones meanwhile, then wait for the
    server to close the idle ones (its read deadline), at most ``close_wait`` seconds (None: no wait)."""
    counts: Counter[str] = Counter()
    partial = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nX-Slow: ".encode()
    idle: list[socket.socket] = []
    try:
        for _ in range(connections):
            try:
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
                sock.sendall(partial)
            except OSError:
                counts["slowloris: connections the server refused at once"] += 1
                continue
            idle.append(sock)
        counts["slowloris: idle half-sent requests opened"] += connections
        for _ in range(real_requests):
            counts["slowloris: real requests sent meanwhile"] += 1
            if not server.initialize():
                counts["slowloris: real requests unanswered"] += 1
        if close_wait is not None:
            deadline = time.monotonic() + close_wait
            still_open = list(idle)
            while still_open and time.monotonic() < deadline:
                still_open = [s for s in still_open if not _closed_by_peer(s)]
                time.sleep(0.5)
            counts["slowloris: idle connections still open after the wait"] += len(still_open)
    finally:
        for sock in idle:
            sock.close()
    log = server.log_path.read_text(errors="replace") if server.log_path.exists() else ""
    text = log + server.stderr()
    counts["slowloris: tracebacks or 'Too many open files' lines logged"] += text.count("Traceback") + text.count(
        "Too many open files"
    )
    return counts


def _closed_by_peer(sock: socket.socket) -> bool:
    """The server has closed (or reset) this connection: a read returns EOF or fails at once."""
    sock.setblocking(False)
    try:
        while sock.recv(4096):
            pass
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def malformed_flood(server: HttpServer, requests: int, *, workers: int = 32) -> Counter[str]:
    """Send ``requests`` requests that are not HTTP, ``workers`` at a time; count what the log
    and stderr grew by."""
    counts: Counter[str] = Counter()
    log_before, err_before = server.log_bytes(), server.stderr_path.stat().st_size
    rotated_before = len(list(server.log_path.parent.glob("server.log.*")))
    started = time.monotonic()
    answered = asyncio.run(_flood(server.port, requests, workers))
    seconds = time.monotonic() - started
    grown_log = server.log_bytes() - log_before
    grown_err = server.stderr_path.stat().st_size - err_before
    counts["malformed flood: requests sent"] += requests
    counts["malformed flood: answered 400"] += answered
    counts["malformed flood: requests per second"] += round(requests / max(seconds, 1e-3))
    counts["malformed flood: server log grew by (bytes)"] += grown_log
    counts["malformed flood: stderr grew by (bytes)"] += grown_err
    counts["malformed flood: log or stderr grew past the bound"] += int(max(grown_log, grown_err) > LOG_GROWTH_BOUND)
    counts["malformed flood: log rotations"] += len(list(server.log_path.parent.glob("server.log.*"))) - rotated_before
    return counts


async def _flood(port: int, requests: int, workers: int) -> int:
    answered = 0
    left = requests

    async def one() -> None:
        nonlocal answered, left
        while left > 0:
            left -= 1
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"NOT HTTP AT ALL \x00\x01\r\n\r\n")
                await writer.drain()
                reply = await asyncio.wait_for(reader.read(32), 30)
                answered += reply.startswith(b"HTTP/1.1 400")
                writer.close()
            except (TimeoutError, OSError):
                continue

    await asyncio.gather(*(one() for _ in range(workers)))
    return answered
