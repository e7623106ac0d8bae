"""Serving streamable HTTP on loopback, behind a Host/Origin allowlist and a bearer token.

A loopback port is reachable by every user of the machine and by any web page the user opens
(DNS rebinding), and ``execute_code`` runs code as the user. So every HTTP request must name an
allowed Host, carry an allowed Origin when it carries one, and present the bearer token written
0600 in the runtime dir; anything else is refused before it reaches the MCP app.
:func:`serve_http` runs the guarded app under uvicorn until a signal or a stop.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

from biopb_mcp.config.settings import Settings
from biopb_mcp.errors import ConfigError, ConfigProblem, UnsafeRuntimeDir
from biopb_mcp.fs import nofollow
from biopb_mcp.fs.runtime import private_runtime_dir, read_private_text
from biopb_mcp.server.app import log_level
from biopb_mcp.server.protocol import RefuseBatches
from biopb_mcp.server.state import AppState
from biopb_mcp.server.transports.exit import shutdown_and_exit, stderr_line

logger = logging.getLogger(__name__)

__all__ = [
    "STABLE_TOKEN_FILE_NAME",
    "TOKEN_FILE_NAME",
    "GuardMiddleware",
    "HttpGuard",
    "RefusalLog",
    "allowlists",
    "bind_loopback",
    "client_config_lines",
    "http_token",
    "new_token",
    "serve_http",
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
    ``biopb_mcp.fs.runtime``). Returns the file's path.
    """
    directory = private_runtime_dir(runtime_dir)
    assert directory is not None  # create=True either returns a dir or raises
    path = directory / TOKEN_FILE_NAME.format(pid=os.getpid())
    _write_private(path, token)
    return path


def _write_private(path: Path, token: str) -> None:
    """Write ``token`` to ``path`` through the package's one atomic write: a temp file created
    0600 (no window with a wider mode), renamed over whatever was there (a link or a FIFO is
    replaced, never written through or waited on)."""
    nofollow.write_atomic(path.parent, path.name, (token + "\n").encode("ascii"), mode=0o600)


STABLE_TOKEN_FILE_NAME = "http-token"
"""File name of the stable bearer token inside the state dir (``http.token = "stable"``)."""

_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_TOKEN_MAX_BYTES = 4096
"""Most bytes read from a stored token file (a token is 43)."""


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
            text = read_private_text(path, _TOKEN_MAX_BYTES).strip()
        except FileNotFoundError:
            pass
        except OSError as exc:  # a link, a FIFO, another user's or an unreadable file: never trusted
            logger.warning("the stored HTTP token is not used: %s; made a new one", exc)
            how = "replaced"
        else:
            if len(text) >= 32 and set(text) <= _TOKEN_CHARS:
                return text, path, "reused"
            logger.warning("the stored HTTP token %s is not a token; made a new one", path)
            how = "replaced"
    token = new_token()
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    _write_private(path, token)  # a reader never sees a half-written token
    return token, path, how


def client_config_lines(url: str, token: str | None) -> list[str]:
    """Lines for stderr that show how a client connects (with the token, when there is one)."""
    entry: dict[str, Any]
    if token is None:
        entry = {"mcpServers": {"biopb": {"type": "http", "url": url}}}
        return [f"MCP client config: {json.dumps(entry)}"]
    entry = {"mcpServers": {"biopb": {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}}}
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
            sent = headers.get("authorization")
            scheme, _, presented = (sent or "").partition(" ")
            # Compared as bytes: compare_digest refuses a str with non-ASCII characters, and a
            # client may send any byte in a header.
            given = presented.strip().encode("utf-8", "surrogatepass")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given, self.token.encode("utf-8")):
                return 401, _token_refusal(sent, scheme)
        return None


def _token_refusal(sent: str | None, scheme: str) -> str:
    """Why a request's token was refused, and where the right one is."""
    where = (
        "The server printed its token when it started; it is kept in the file http-token in its "
        'state dir (http-token-<pid> in its runtime dir with http.token = "per-start"); '
        "`biopb-mcp config show` prints both dirs."
    )
    if sent is None:
        return f"No bearer token: this server needs the header 'Authorization: Bearer <token>'. {where}"
    if scheme.lower() != "bearer":
        return f"The Authorization header is not 'Bearer <token>' (it names {_shown(scheme)}). {where}"
    return (
        "Wrong bearer token: it is not this server's (a token from before --rotate-token, or "
        f"from another server?). {where}"
    )


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
            logger.warning(
                "%d more HTTP requests were refused in the last %.0f s (not logged one by one)",
                suppressed,
                self._window,
            )
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
        await send({"type": "http.response.start", "status": status, "headers": refusal_headers(status, reason)})
        await send({"type": "http.response.body", "body": refusal_body(reason)})


REFUSAL_CODE = -32600
"""JSON-RPC code of a refused request (invalid request): MCP defines none for HTTP-level refusals."""


def refusal_body(reason: str) -> bytes:
    """A refusal as a JSON-RPC error: MCP clients (the SDK's among them) show a JSON-RPC error
    body of a 4xx reply to the user, and only a generic "error response" for any other body."""
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": REFUSAL_CODE, "message": reason}}).encode()


def refusal_headers(status: int, reason: str) -> list[tuple[bytes, bytes]]:
    """Headers of a refusal; a 401 names its reason in WWW-Authenticate too (RFC 6750)."""
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(refusal_body(reason))).encode())]
    if status == 401:
        description = reason.replace("\\", "").replace('"', "'").encode("ascii", "replace")
        headers.append(
            (
                b"www-authenticate",
                b'Bearer realm="biopb-mcp", error="invalid_token", error_description="' + description + b'"',
            )
        )
    return headers


def bind_loopback(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK_HOST, port))
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


def http_token(settings: Settings, rotate: bool = False) -> tuple[str, Path, tuple[Path, str] | None]:
    """The bearer token, this server's 0600 file holding it, and (path, how) of the stable token.

    With ``http.token = "stable"`` (the default) the token is the one kept in the state dir,
    reused across restarts (``rotate`` renews it); with ``"per-start"`` it is new every start
    and the third item is None. An unwritable dir is a ConfigError.
    Done before the event loop starts, so the failure is one ``error:`` line and exit 2, not a traceback.
    """
    if settings.http.token == "stable":
        try:
            token, stable_path, how = stable_token(settings.state_dir, rotate=rotate)
        except OSError as exc:
            raise ConfigError(
                f"cannot keep the HTTP token in {settings.state_dir}: {exc.strerror or exc}",
                key="server.state_dir",
                kind=ConfigProblem.TOKEN_UNKEPT,
                config_file=str(settings.config_file),
            ) from None
        stable: tuple[Path, str] | None = (stable_path, how)
    else:
        token, stable = new_token(), None
    try:
        return token, write_token_file(settings.runtime_dir, token), stable
    except OSError as exc:
        raise ConfigError(
            f"cannot write the HTTP token file in {settings.runtime_dir}: {exc.strerror or exc}",
            key="server.runtime_dir",
            kind=ConfigProblem.TOKEN_FILE_UNWRITABLE,
            config_file=str(settings.config_file),
            refused=exc if isinstance(exc, UnsafeRuntimeDir) else None,
        ) from None


def _token_lines(token: str, token_file: Path, stable: tuple[Path, str] | None) -> list[str]:
    """What the person who started the server reads about the token; the token on its own line."""
    if stable is not None:
        path, how = stable
        kept = {"reused": "the stable token, reused", "rotated": "a new stable token (rotated)"}.get(
            how, "a new stable token"
        )
        return [f"Bearer token ({kept}; kept in {path}, mode 0600; renew it with --rotate-token):", token]
    return [f"Bearer token (new at every start; also in {token_file}, mode 0600):", token]


async def serve_http(
    mcp: MCPServer,
    state: AppState,
    sock: socket.socket,
    token: str | None,
    token_file: Path | None,
    stable: tuple[Path, str] | None = None,
) -> None:
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from biopb_mcp.server.transports.http_limits import (
        ACCEPT_BACKLOG,
        LimitedH11Protocol,
        accept_error_handler,
        connection_cap,
    )

    settings = state.settings
    port = sock.getsockname()[1]
    hosts, origins = allowlists(port, settings.http.allowed_hosts, settings.http.allowed_origins)
    app = mcp.streamable_http_app(
        host="127.0.0.1",
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=sorted(hosts), allowed_origins=sorted(origins)
        ),
    )
    guarded = GuardMiddleware(RefuseBatches(app), HttpGuard(allowed_hosts=hosts, allowed_origins=origins, token=token))
    url = f"http://127.0.0.1:{port}/mcp"
    state.extra_status["http"] = {
        "url": url,
        "auth": token is not None,
        "token_file": str(token_file) if token_file else None,
    }
    stderr_line(f"biopb-mcp serving streamable HTTP at {url} (loopback only)")
    if token_file is not None and token is not None:
        for line in _token_lines(token, token_file, stable):
            stderr_line(line)
        if stable is not None:
            state.extra_status["http"]["stable_token_file"] = str(stable[0])
    else:
        warning = (
            "WARNING: --no-auth: any local user and any web page that reaches this port can run code as you "
            "through execute_code. Use it only on a single-user machine."
        )
        logger.warning(warning)
        stderr_line(warning)
    for line in client_config_lines(url, token):
        stderr_line(line)

    if token_file is not None:
        state.at_exit.append(lambda: token_file.unlink(missing_ok=True))

    def on_signal(signum: int, _frame: object) -> None:
        logger.info("Received signal %d; shutting the kernel down", signum)
        shutdown_and_exit(state, 0)

    # uvicorn captures SIGINT/SIGTERM while serving, then restores these handlers and re-raises
    # the signal it caught: so a signal ends in on_signal (kernel down, token removed), never in
    # the default action that would orphan the kernel.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    # No access log: one line per request is a disk-filling channel for anyone who can reach the
    # port; refusals are logged (rate-limited) by the guard. The protocol class times out a
    # request that does not arrive whole and caps open connections (see http_limits).
    protocol = type("ServedH11Protocol", (LimitedH11Protocol,), {"cap": connection_cap()})
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(accept_error_handler(loop.get_exception_handler()))
    config = uvicorn.Config(
        guarded,
        log_config=None,
        log_level=log_level(settings).lower(),
        timeout_graceful_shutdown=2,
        lifespan="on",
        access_log=False,
        http=protocol,
        backlog=ACCEPT_BACKLOG,
    )
    server = uvicorn.Server(config)
    await server.serve(sockets=[sock])
    logger.info("HTTP server stopped; shutting the kernel down")
    shutdown_and_exit(state, 0)
