"""HTTP transport guards: Host/Origin allowlist and a per-server bearer token.

A loopback port is reachable by every user of the machine and by any web page the user opens
(DNS rebinding), and ``execute_code`` runs code as the user. So every HTTP request must name an
allowed Host, carry an allowed Origin when it carries one, and present the bearer token written
0600 in the runtime dir; anything else is refused before it reaches the MCP app.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import secrets
import stat
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from biopb_mcp.runtime_files import private_runtime_dir

logger = logging.getLogger(__name__)

__all__ = [
    "STABLE_TOKEN_FILE_NAME",
    "TOKEN_FILE_NAME",
    "GuardMiddleware",
    "HttpGuard",
    "RefusalLog",
    "allowlists",
    "client_config_lines",
    "new_token",
    "stable_token",
    "write_token_file",
]

TOKEN_FILE_NAME = "http-token-{pid}"
"""File name of the bearer token inside the runtime dir: one per server process, so two HTTP
servers sharing a runtime dir never overwrite (or, on exit, delete) each other's token."""

LOOPBACK_HOST = "127.0.0.1"
"""The only address the HTTP transport binds."""

MAX_SHOWN_HEADER_CHARS = 120
"""Longest Host/Origin value quoted back in a refusal or the log: an unauthenticated client
chooses these values, and quoting 8 KB of them per request lets it fill the disk."""

REFUSAL_LOG_BURST = 20
"""Refusals logged per ``REFUSAL_LOG_WINDOW``; the rest are counted and reported once."""

REFUSAL_LOG_WINDOW = 60.0
"""Seconds of one refusal-logging window."""


def allowlists(
    port: int, extra_hosts: Iterable[str] = (), extra_origins: Iterable[str] = ()
) -> tuple[frozenset[str], frozenset[str]]:
    """Allowed Host and Origin header values: loopback names on ``port`` plus the configured extras."""
    names = ("127.0.0.1", "localhost", "[::1]")
    hosts = {f"{name}:{port}" for name in names} | set(extra_hosts)
    origins = {f"http://{name}:{port}" for name in names} | set(extra_origins)
    return frozenset(hosts), frozenset(origins)


def new_token() -> str:
    """A fresh bearer token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def write_token_file(runtime_dir: Path, token: str) -> Path:
    """Write ``token`` to ``http-token-<pid>`` mode 0600 in the private dir for ``runtime_dir``.

    That dir is ``runtime_dir`` itself when private, else a 0700 subdirectory of it (see
    ``biopb_mcp.runtime_files``). Returns the file's path.
    """
    directory = private_runtime_dir(runtime_dir)
    assert directory is not None  # create=True either returns a dir or raises
    path = directory / TOKEN_FILE_NAME.format(pid=os.getpid())
    _write_private(path, token)
    return path


def _write_private(path: Path, token: str) -> None:
    """Write ``token`` to ``path`` created 0600 from the start (a chmod after a default-mode
    create would leave a window), never through a link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (token + "\n").encode("ascii"))
    finally:
        os.close(fd)


STABLE_TOKEN_FILE_NAME = "http-token"
"""File name of the stable bearer token inside the state dir (``http.token = "stable"``)."""

_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def stable_token(state_dir: Path, *, rotate: bool = False) -> tuple[str, Path, str]:
    """The bearer token kept in ``<state_dir>/http-token`` (0600), made when missing or rotated.

    A stored token is reused only when the file is a regular file of this user that nobody else
    can read (opened without following links); otherwise, or with ``rotate``, a new one replaces
    it atomically. Returns ``(token, path, how)`` with ``how`` one of ``reused``, ``new``,
    ``rotated`` or ``replaced`` (an unsafe or unreadable file).

    Raises:
        OSError: the state dir or the file cannot be written.
    """
    path = state_dir / STABLE_TOKEN_FILE_NAME
    how = "rotated" if rotate else "new"
    if not rotate:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            fd = -1
        except OSError:  # a link or unreadable: never trusted
            fd, how = -1, "replaced"
        if fd >= 0:
            try:
                st = os.fstat(fd)
                text = os.read(fd, 4096).decode("ascii", "replace").strip()
            finally:
                os.close(fd)
            private = stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077
            if private and len(text) >= 32 and set(text) <= _TOKEN_CHARS:
                return text, path, "reused"
            how = "replaced"
    token = new_token()
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = state_dir / f".{STABLE_TOKEN_FILE_NAME}.{os.getpid()}.tmp"
    _write_private(tmp, token)
    os.replace(tmp, path)  # a reader never sees a half-written token; a planted link is replaced
    return token, path, how


def client_config_lines(url: str, token: str | None) -> list[str]:
    """Lines for stderr that show how a client connects (with the token, when there is one)."""
    entry: dict[str, Any]
    if token is None:
        entry = {"mcpServers": {"biopb": {"type": "http", "url": url}}}
        return [f"MCP client config: {json.dumps(entry)}"]
    entry = {
        "mcpServers": {"biopb": {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}}
    }
    return [
        f"MCP client config: {json.dumps(entry)}",
        f'Claude Code: claude mcp add --transport http biopb {url} --header "Authorization: Bearer {token}"',
    ]


@dataclass(frozen=True)
class HttpGuard:
    """What a request must satisfy: an allowed Host, an allowed Origin if any, the token if set."""

    allowed_hosts: frozenset[str]
    allowed_origins: frozenset[str]
    token: str | None

    def check(self, headers: dict[str, str]) -> tuple[int, str] | None:
        """``None`` when the request may pass, else ``(status, reason)``."""
        host = headers.get("host")
        if host is None or host.lower() not in self.allowed_hosts:
            return 421, f"Host {_shown(host)} is not allowed; connect to http://127.0.0.1:<port>/mcp."
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in self.allowed_origins:
            return 403, f"Origin {_shown(origin)} is not allowed (add it to http.allowed_origins to allow it)."
        if self.token is not None:
            scheme, _, presented = headers.get("authorization", "").partition(" ")
            # Compared as bytes: compare_digest refuses a str with non-ASCII characters, and a
            # client may send any byte in a header.
            given = presented.strip().encode("utf-8", "surrogatepass")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given, self.token.encode("utf-8")):
                return 401, "Missing or wrong bearer token; send 'Authorization: Bearer <token from the http-token file>'."
        return None


def _shown(value: str | None) -> str:
    """``repr`` of a client-chosen header value, cut to ``MAX_SHOWN_HEADER_CHARS``."""
    if value is None or len(value) <= MAX_SHOWN_HEADER_CHARS:
        return repr(value)
    return f"{value[:MAX_SHOWN_HEADER_CHARS]!r}... ({len(value)} chars)"


class RefusalLog:
    """Logs refused requests, at most ``burst`` per ``window`` seconds; the rest are counted.

    A client without the token can send refusals as fast as the loop answers them; each one
    logged in full would grow the log without bound, so a flood becomes one summary line.
    """

    def __init__(self, burst: int = REFUSAL_LOG_BURST, window: float = REFUSAL_LOG_WINDOW) -> None:
        self._burst, self._window = burst, window
        self._lock = threading.Lock()
        self._window_start = time.monotonic()
        self._logged = 0
        self._suppressed = 0

    def refused(self, status: int, reason: str) -> None:
        """Record one refusal: log it, or count it when this window's burst is spent."""
        now = time.monotonic()
        with self._lock:
            if now - self._window_start >= self._window:
                suppressed, self._suppressed = self._suppressed, 0
                self._window_start, self._logged = now, 0
            else:
                suppressed = 0
            log_this = self._logged < self._burst
            if log_this:
                self._logged += 1
            else:
                self._suppressed += 1
        if suppressed:
            logger.warning("%d more HTTP requests were refused in the last %.0f s (not logged one by one)",
                           suppressed, self._window)
        if log_this:
            logger.warning("HTTP request refused (%d): %s", status, reason)


class GuardMiddleware:
    """ASGI middleware that applies an :class:`HttpGuard` to every HTTP request."""

    def __init__(self, app: ASGIApp, guard: HttpGuard) -> None:
        self.app = app
        self.guard = HttpGuard(
            allowed_hosts=frozenset(h.lower() for h in guard.allowed_hosts),
            allowed_origins=frozenset(o.lower() for o in guard.allowed_origins),
            token=guard.token,
        )
        self.refusals = RefusalLog()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # MCP has no websocket transport here; refuse outright
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refused = self.guard.check(headers)
        if refused is None:
            await self.app(scope, receive, send)
            return
        status, reason = refused
        self.refusals.refused(status, reason)
        response_headers = [(b"content-type", b"text/plain; charset=utf-8")]
        if status == 401:
            response_headers.append((b"www-authenticate", b'Bearer realm="biopb-mcp"'))
        body = reason.encode("utf-8")
        response_headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": response_headers})
        await send({"type": "http.response.body", "body": body})
