"""Helpers for tests that spawn the real server: isolated env, and the raw JSON-RPC line client.

The raw client (shared with ``python -m bench soak``) exists for what an SDK session hides: the
exact bytes on stdout (corruption), and killing the server under a live session.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

from bench.soak.servers import RawServer, result_text
from biopb_mcp.text.kernel import parse_job_line

__all__ = ["RawServer", "make_env", "result_text", "run_to_end_raw", "stdio_params"]

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



def run_to_end_raw(server: RawServer, code: str, bound: float = 120.0) -> dict[str, Any]:
    """execute_code over the raw wire, then poll_job by the job line until the job ended: on a
    loaded machine any call may outlive ``kernel.promote_after``."""
    deadline = time.monotonic() + bound
    result = server.call("execute_code", {"code": code}, timeout=bound)
    while (line := parse_job_line(result_text(result))) is not None and line.running:
        assert time.monotonic() < deadline, f"{line.job_id} still running after {bound:g} s"
        time.sleep(0.1)
        result = server.call("poll_job", {"job_id": line.job_id})
    return result
