"""Helpers of the scientist's-view tests: settings in a tmp dir, process checks."""

from __future__ import annotations

import time
from pathlib import Path

import psutil

from biopb_mcp.config import Settings, load_settings


def make_settings(root: Path, extra: str = "") -> Settings:
    """A config.toml under ``root`` with state and runtime dirs there (plus ``extra`` TOML)."""
    cdir = root / "config"
    cdir.mkdir(parents=True, exist_ok=True)
    text = f'[server]\nstate_dir = "{root / "state"}"\nruntime_dir = "{root / "rt"}"\n' + extra
    (cdir / "config.toml").write_text(text, encoding="utf-8")
    return load_settings(cdir)


def gone(pid: int) -> bool:
    """The process has exited (a zombie counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pid: int, within: float) -> bool:
    """Poll until ``pid`` is gone or ``within`` seconds passed; whether it went."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.05)
    return gone(pid)
