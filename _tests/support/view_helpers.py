"""Helpers of the scientist's-view tests: settings in a tmp dir, process checks."""

from __future__ import annotations

from pathlib import Path

from biopb_mcp.config import Settings, load_settings


def make_settings(root: Path, extra: str = "") -> Settings:
    """A config.toml under ``root`` with state and runtime dirs there (plus ``extra`` TOML)."""
    cdir = root / "config"
    cdir.mkdir(parents=True, exist_ok=True)
    text = f'[server]\nstate_dir = "{root / "state"}"\nruntime_dir = "{root / "rt"}"\n' + extra
    (cdir / "config.toml").write_text(text, encoding="utf-8")
    return load_settings(cdir)

