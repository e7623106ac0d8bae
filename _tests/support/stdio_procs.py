"""Helpers for tests that spawn the real server: isolated env, and the raw JSON-RPC line client.

The raw client (shared with ``python -m bench soak``) exists for what an SDK session hides: the
exact bytes on stdout (corruption), and killing the server under a live session.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp import StdioServerParameters

from bench.soak.servers import RawServer, result_text

__all__ = ["RawServer", "make_env", "result_text", "stdio_params"]

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

