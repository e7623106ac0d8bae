"""Kernel-test fixtures: one real kernel per test module, from a real config.toml in a tmp dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from _tests.support.isolation import make_settings
from biopb_mcp.kernel import KernelHost


@pytest.fixture(scope="module")
def module_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kernel")


@pytest.fixture(scope="module")
def host(module_root: Path) -> Iterator[KernelHost]:
    """One real kernel shared by a test module (each test calls start(), which is idempotent)."""
    h = KernelHost(make_settings(module_root, kernel="request_timeout = 20.0\n"))
    h.start()
    try:
        yield h
    finally:
        h.shutdown()
