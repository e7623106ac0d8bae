"""Shared fixtures: every test runs against its own config, state and runtime dirs."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from _tests.support.isolation import isolated_vars


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every platform dir the package uses at tmp_path so no test touches the real ones."""
    for name, value in isolated_vars(tmp_path).items():
        monkeypatch.setenv(name, value)
    return tmp_path / "config"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def root_handlers() -> Iterator[None]:
    """Restore the root logger after a test that sets up logging (no global state leaks)."""
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield
    for handler in [h for h in root.handlers if h not in before]:
        root.removeHandler(handler)
        handler.close()
    root.setLevel(level)
