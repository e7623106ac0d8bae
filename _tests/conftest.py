"""Shared fixtures: every test runs against its own config, state and runtime dirs."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every platform dir the package uses at tmp_path so no test touches the real ones."""
    config = tmp_path / "config"
    monkeypatch.setenv("BIOPB_CONFIG_DIR", str(config))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return config


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
