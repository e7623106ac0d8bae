"""Helpers for tests that spawn the real server: isolated env, and a raw JSON-RPC line client.

The raw client exists for what an SDK session hides: the exact bytes on stdout (corruption), and
killing the server under a live session (SIGKILL, SIGTERM, stdin EOF).
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

SERVER_ARGS = ["-m", "biopb_mcp"]


def make_env(root: Path, *, config: str = "", plugins: dict[str, str] | None = None) -> dict[str, str]:
    """Env vars that give a spawned server its own config, state, runtime and cache dirs under root."""
    config_dir = root / "config"
    config_dir.mkdir(parents=True, exist_ok=True)
    if config:
        (config_dir / "config.toml").write_text(config)
    for name, source in (plugins or {}).items():
        (config_dir / "kernel").mkdir(exist_ok=True)
        (config_dir / "kernel" / name).write_text(source)
    return {
        "BIOPB_CONFIG_DIR": str(config_dir),
        "XDG_STATE_HOME": str(root / "state"),
        "XDG_RUNTIME_DIR": str(root / "runtime"),
        "XDG_CACHE_HOME": str(root / "cache"),
    }


def stdio_params(env: dict[str, str], *extra_args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[*SERVER_ARGS, *extra_args], env=env)


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
        """The next line on stdout, which must be one JSON-RPC message (anything else fails)."""
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
        message = json.loads(line)  # a stray byte on the wire fails here
        assert message.get("jsonrpc") == "2.0", line
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
        result = self.response(rid)["result"]
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def call(self, name: str, arguments: dict[str, Any] | None = None, timeout: float = 60.0) -> dict[str, Any]:
        rid = self.request("tools/call", {"name": name, "arguments": arguments or {}})
        return self.response(rid, timeout)["result"]

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
