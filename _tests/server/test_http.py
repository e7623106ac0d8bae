"""The HTTP transport as a real process: loopback only, Host/Origin allowlist, bearer token, 401s."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import psutil
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from _tests.support.stdio_procs import make_env

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


class HttpServer:
    def __init__(self, root: Path, *args: str) -> None:
        self.root = root
        self.stderr_path = root / f"stderr{len(args)}.log"
        env = {**os.environ, **make_env(root)}
        with self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "biopb_mcp", "--transport", "http", "--port", "0", *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
            )
        # The start block ends with the client config line (after the token or the --no-auth
        # warning): wait for the whole line, not for the serving line and a moment.
        match = self.wait_for(r"serving streamable HTTP at (http://\S+)[^\n]*\n(?:.*\n)*?MCP client config: [^\n]*\n")
        self.url = match.group(1)
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 60.0) -> re.Match[str]:
        """The first match of ``pattern`` in the server's stderr, once it is there."""
        deadline = time.monotonic() + timeout
        while not (match := re.search(pattern, self.stderr())):
            assert self.proc.poll() is None, self.stderr()
            assert time.monotonic() < deadline, self.stderr()
            time.sleep(0.05)
        return match

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(30)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    running = HttpServer(tmp_path_factory.mktemp("http"))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def token(server: HttpServer) -> str:
    return token_file_of(server.root, server.proc.pid).read_text().strip()


def token_file_of(root: Path, pid: int) -> Path:
    """One token file per server process: two HTTP servers sharing a runtime dir keep their own."""
    return root / "config" / "run" / f"http-token-{pid}"


def post(server: HttpServer, headers: dict[str, str]) -> httpx2.Response:
    return httpx2.post(f"http://127.0.0.1:{server.port}/mcp", json=INIT, headers={**HEADERS, **headers}, timeout=30)


def test_binds_loopback_only(server: HttpServer) -> None:
    listening = [
        c.laddr for c in psutil.Process(server.proc.pid).net_connections("inet") if c.status == psutil.CONN_LISTEN
    ]
    assert listening and {addr.ip for addr in listening} == {"127.0.0.1"}
    assert server.url.startswith("http://127.0.0.1:")


def test_token_file_and_runtime_dir_modes_and_stderr_config_line(server: HttpServer, token: str) -> None:
    token_file = token_file_of(server.root, server.proc.pid)
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
    assert f"Bearer {token}" in server.stderr()


def test_loopback_with_token_is_served(server: HttpServer, token: str) -> None:
    response = post(server, {"authorization": f"Bearer {token}", "origin": f"http://localhost:{server.port}"})
    assert response.status_code == 200, response.text
    assert "start_kernel" in response.text


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", "Basic abc"])
def test_no_or_wrong_token_is_401(server: HttpServer, authorization: str | None) -> None:
    response = post(server, {} if authorization is None else {"authorization": authorization})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_foreign_origin_is_refused(server: HttpServer, token: str) -> None:
    response = post(server, {"authorization": f"Bearer {token}", "origin": "http://evil.example"})
    assert response.status_code == 403


def test_foreign_host_is_refused(server: HttpServer, token: str) -> None:
    response = post(server, {"authorization": f"Bearer {token}", "host": f"evil.example:{server.port}"})
    assert response.status_code == 421


def server_log(server: HttpServer) -> Path:
    return server.root / "config" / "state" / "server.log"


def test_a_non_ascii_bearer_token_is_401_without_a_traceback(server: HttpServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer \xff\xfe\r\n"
            b"Content-Length: 2\r\nConnection: close\r\n\r\n{}" % server.port
        )
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 401"), reply[:200]
    assert "Traceback" not in server_log(server).read_text(errors="replace")


def test_a_flood_of_refused_requests_with_8kb_origins_leaves_the_log_bounded(server: HttpServer) -> None:
    before = server_log(server).stat().st_size
    origin = "http://" + "o" * 8192
    with httpx2.Client(timeout=30) as http:
        for _ in range(300):
            response = http.post(
                f"http://127.0.0.1:{server.port}/mcp", json=INIT, headers={**HEADERS, "origin": origin}
            )
            assert response.status_code == 403
            assert len(response.content) < 1000
    grown = server_log(server).stat().st_size - before
    assert grown < 20 * 1024, grown  # unbounded, the 300 quoted Origins alone would be 2.4 MB


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ({"authorization": "Bearer wrong-token"}, "Wrong bearer token"),
        ({}, "No bearer token"),
        ({"authorization": "Basic abc"}, "is not 'Bearer <token>'"),
    ],
)
async def test_the_sdk_client_shows_why_its_token_was_refused(
    server: HttpServer, headers: dict[str, str], said: str
) -> None:
    """The SDK client said only "Server returned an error response": the 401 body is a JSON-RPC
    error whose message it shows, and WWW-Authenticate says the same."""
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        with anyio.fail_after(60), pytest.raises(BaseExceptionGroup) as caught:
            async with Client(streamable_http_client(server.url, http_client=http), mode="legacy"):
                pass
    errors = [exc for exc in _leaves(caught.value) if isinstance(exc, MCPError)]
    assert errors and said in str(errors[0]) and "http-token" in str(errors[0]), repr(caught.value)
    response = post(server, headers)
    assert response.status_code == 401 and said in response.json()["error"]["message"]
    assert (
        'error="invalid_token"' in response.headers["www-authenticate"] and said in response.headers["www-authenticate"]
    )


def _leaves(exc: BaseException) -> list[BaseException]:
    """Every exception inside nested exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


@pytest.mark.anyio
async def test_an_mcp_client_with_the_token_works_and_sigterm_cleans_up(server: HttpServer, token: str) -> None:
    """Last test of the module: it stops the shared server."""
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=90) as http:
        with anyio.fail_after(150):  # past kernel.startup_timeout (60 s): the server's own bound decides
            async with Client(streamable_http_client(server.url, http_client=http), mode="legacy") as client:
                assert "start_kernel" in (client.instructions or "")
                assert not (await client.call_tool("start_kernel", {})).is_error
                status_part = (await client.call_tool("server_status", {})).content[0]
                assert isinstance(status_part, TextContent)
                status = json.loads(status_part.text)
    assert status["server"]["transport"] == "http"
    kernel_pid = status["kernel"]["pid"]
    assert psutil.pid_exists(kernel_pid)
    assert server.stop() == 0
    try:
        psutil.Process(kernel_pid).wait(timeout=5)
    except psutil.NoSuchProcess:
        pass
    assert not psutil.pid_exists(kernel_pid)
    assert not token_file_of(server.root, server.proc.pid).exists()


def test_no_auth_opts_out_with_a_warning(tmp_path: Path) -> None:
    unguarded = HttpServer(tmp_path, "--no-auth")
    try:
        assert "WARNING" in unguarded.stderr() and "--no-auth" in unguarded.stderr()
        assert post(unguarded, {}).status_code == 200
        assert post(unguarded, {"origin": "http://evil.example"}).status_code == 403
        assert not list((tmp_path / "config" / "run").glob("http-token*"))
    finally:
        unguarded.stop()


def test_an_unwritable_runtime_dir_is_one_error_line_and_exit_2(tmp_path: Path) -> None:
    """The token file cannot be written: one line naming the key, exit 2, no traceback."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the runtime dir should go")
    env = {**os.environ, **make_env(tmp_path, config=f'[server]\nruntime_dir = "{blocker}/biopb"\n')}
    done = subprocess.run(
        [sys.executable, "-m", "biopb_mcp", "--transport", "http", "--port", "0"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "server.runtime_dir" in errors[0], done.stderr
    assert done.stdout == ""


def token_line(server: HttpServer) -> str:
    """The token, printed on a line of its own right after the line that introduces it."""
    lines = server.stderr().splitlines()
    intro = next(i for i, line in enumerate(lines) if line.startswith("Bearer token ("))
    return lines[intro + 1]


def test_the_stable_token_survives_a_restart_and_rotate_token_renews_it(tmp_path: Path) -> None:
    first = HttpServer(tmp_path)
    try:
        token = token_line(first)
        assert "stable token" in first.stderr() and token == token_file_of(tmp_path, first.proc.pid).read_text().strip()
    finally:
        first.stop()
    again = HttpServer(tmp_path)
    try:
        assert token_line(again) == token and "reused" in again.stderr()
        assert post(again, {"authorization": f"Bearer {token}"}).status_code == 200
    finally:
        again.stop()
    rotated = HttpServer(tmp_path, "--rotate-token")
    try:
        renewed = token_line(rotated)
        assert renewed != token and "rotated" in rotated.stderr()
        assert post(rotated, {"authorization": f"Bearer {token}"}).status_code == 401
        assert post(rotated, {"authorization": f"Bearer {renewed}"}).status_code == 200
        stable_file = tmp_path / "config" / "state" / "http-token"
        assert stable_file.read_text().strip() == renewed and stat.S_IMODE(stable_file.stat().st_mode) == 0o600
    finally:
        rotated.stop()


def test_a_per_start_token_is_not_kept(tmp_path: Path) -> None:
    make_env(tmp_path, config='[http]\ntoken = "per-start"\n')
    server = HttpServer(tmp_path)
    try:
        token = token_line(server)
        assert "new at every start" in server.stderr()
        assert post(server, {"authorization": f"Bearer {token}"}).status_code == 200
    finally:
        server.stop()
    assert not (tmp_path / "config" / "state" / "http-token").exists()
