"""Helpers of the scientist's-view tests: settings in a tmp dir, a recording server."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

from mcp import Client

from _tests.support.isolation import make_settings
from biopb_mcp.server.state import AppState


@contextlib.asynccontextmanager
async def recording_server(root: Path, extra: str = "") -> AsyncIterator[tuple[Client, AppState]]:
    """An in-process server recording its session under ``root``, its kernel started in
    ``root/data`` (cells read their files from there), and a client session to it."""
    from biopb_mcp.server import build_server

    mcp, state = build_server(make_settings(root, extra))
    cwd = os.getcwd()
    os.chdir(root / "data")  # the kernel inherits it
    try:
        async with Client(mcp, mode="legacy") as client:
            yield client, state
    finally:
        os.chdir(cwd)
        state.kernel.shutdown()
        assert state.kernel.recorder is not None
        state.kernel.recorder.close()
