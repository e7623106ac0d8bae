"""Helpers for tests that spawn the real server: isolated env, and the raw JSON-RPC line client.

The raw client (shared with ``python -m bench soak``) exists for what an SDK session hides: the
exact bytes on stdout (corruption), and killing the server under a live session.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp import StdioServerParameters

from _tests.support.isolation import isolated_vars, without_warm_imports, write_config
from _tests.support.raw_server import RawServer, result_text

__all__ = ["RawServer", "make_env", "result_text", "stdio_params"]

SERVER_ARGS = ["-m", "biopb_mcp"]


def make_env(root: Path, *, config: str = "", plugins: dict[str, str] | None = None) -> dict[str, str]:
    """Env vars that give a spawned server its own config, state, runtime and cache dirs under root.

    No ``config`` keeps a config file already there (a test may have written its own first)."""
    keep = not config and (root / "config" / "config.toml").exists()
    write_config(root, None if keep else without_warm_imports(config), plugins=plugins)
    return isolated_vars(root)


def stdio_params(env: dict[str, str], *extra_args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[*SERVER_ARGS, *extra_args], env=env)
