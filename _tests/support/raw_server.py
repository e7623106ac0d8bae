"""Real servers for the soak and the reliability tests: isolated config trees, a raw JSON-RPC client.

Everything here is real: files under a temp root, ``python -m biopb_mcp`` subprocesses. The raw
client exists for what an SDK session hides: the exact bytes on stdout (a stray line is wire
corruption), and killing the server under a live session.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

from biopb_mcp.config.isolated import IsolatedDirs

__all__ = ["RawServer", "WireError", "processes_under", "result_text", "server_params", "write_config"]

SERVER_ARGS = ["-m", "biopb_mcp"]


def write_config(root: Path, extra: str = "", *, log_level: str = "INFO") -> dict[str, str]:
    """A config tree under ``root`` (config, state, runtime dirs) and the env that points at it.

    Every path the server uses is spelled out in config.toml, so the server touches nothing
    outside ``root`` whatever the caller's environment says.
    """
    dirs = IsolatedDirs.side_by_side(root)
    dirs.write_config(extra, log_level=log_level)
    return dirs.variables()


def server_params(env: dict[str, str]) -> StdioServerParameters:
    """The real server over stdio in its own config tree (the rest of the environment kept)."""
    return StdioServerParameters(command=sys.executable, args=list(SERVER_ARGS), env={**os.environ, **env})


class WireError(ValueError):
    """A line on the server's stdout that is not one JSON-RPC message."""


class RawServer:
    """The server as a subprocess spoken to in raw JSON-RPC lines (handshake era)."""

    def __init__(self, env: dict[str, str], stderr_path: Path, *extra_args: str) -> None:
        self._stderr = stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, *SERVER_ARGS, *extra_args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={**os.environ, **env},
        )
        self._next_id = 0
        self._buffer = b""
        self.raw_lines: list[bytes] = []
        self._selector = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        self._selector.register(self.proc.stdout, selectors.EVENT_READ)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params or {}})
        return self._next_id

    def read_message(self, timeout: float = 60.0) -> dict[str, Any]:
        """The next line on stdout, which must be one JSON-RPC message (anything else: WireError)."""
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no message from the server")
            if self._selector.select(remaining):
                chunk = self.proc.stdout.read(65536)
                if chunk == b"":
                    raise EOFError("server closed stdout")
                if chunk:
                    self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        self.raw_lines.append(line)
        try:
            message = json.loads(line)
        except ValueError as exc:
            raise WireError(f"not JSON on the wire: {line[:200]!r}") from exc
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            raise WireError(f"not a JSON-RPC message: {line[:200]!r}")
        return message

    def response(self, request_id: int, timeout: float = 60.0) -> dict[str, Any]:
        while True:
            message = self.read_message(timeout)
            if message.get("id") == request_id:
                return message

    def initialize(self) -> dict[str, Any]:
        rid = self.request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
        )
        result: dict[str, Any] = self.response(rid)["result"]
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def call(self, name: str, arguments: dict[str, Any] | None = None, timeout: float = 60.0) -> dict[str, Any]:
        rid = self.request("tools/call", {"name": name, "arguments": arguments or {}})
        result: dict[str, Any] = self.response(rid, timeout)["result"]
        return result

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._selector.close()
        self._stderr.close()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


def result_text(result: dict[str, Any]) -> str:
    return "\n".join(block["text"] for block in result.get("content", []) if block.get("type") == "text")


def processes_under(root: Path) -> list[int]:
    """Pids of live processes that belong to a config tree under ``root``: orphans once its runs end.

    A server carries the tree in its environment, a kernel in its command line (the connection
    file lives in the tree's runtime dir); a zombie waiting to be reaped is not alive.
    """
    import psutil

    mark = str(root)
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        if proc.pid == os.getpid() or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            env = proc.environ() if mark not in cmdline else {}
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        if mark in cmdline or env.get("BIOPB_CONFIG_DIR", "").startswith(mark):
            found.append(proc.pid)
    return found
