"""The one isolated-environment builder: the variables each layout sets, the config it writes, the
dirs it makes, and this process's environment put back after :meth:`IsolatedDirs.applied`."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from biopb_mcp.config.isolated import IsolatedDirs
from biopb_mcp.config.settings import load_settings
from biopb_mcp.server import demo


def test_side_by_side_moves_the_config_state_runtime_and_cache_under_the_root(tmp_path: Path) -> None:
    assert IsolatedDirs.side_by_side(tmp_path).variables() == {
        "BIOPB_CONFIG_DIR": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_RUNTIME_DIR": str(tmp_path / "runtime"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }


def test_the_demos_child_gets_the_tools_dirs_too_and_no_debug_switch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIOPB_DEBUG", "1")
    monkeypatch.setenv("SOMETHING_OF_THE_USERS", "kept")
    env = demo._demo_env(tmp_path)
    moved = {
        "BIOPB_CONFIG_DIR": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_RUNTIME_DIR": str(tmp_path / "runtime"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "MPLCONFIGDIR": str(tmp_path / "matplotlib"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime" / "jupyter"),
    }
    assert {key: env[key] for key in moved} == moved
    kept = {key: value for key, value in os.environ.items() if key not in moved and key != "BIOPB_DEBUG"}
    assert {key: value for key, value in env.items() if key not in moved} == kept
    assert env["SOMETHING_OF_THE_USERS"] == "kept"


def test_in_tree_keeps_every_platform_dir_under_its_homes(tmp_path: Path) -> None:
    homes, run = tmp_path / "xdg", tmp_path / "run"
    assert IsolatedDirs.in_tree(tmp_path, homes=homes, runtime_dir=run).variables() == {
        "BIOPB_CONFIG_DIR": str(tmp_path),
        "XDG_CONFIG_HOME": str(homes / "config"),
        "XDG_STATE_HOME": str(homes / "state"),
        "XDG_DATA_HOME": str(homes / "data"),
        "XDG_CACHE_HOME": str(homes / "cache"),
        "XDG_RUNTIME_DIR": str(run),
        "JUPYTER_CONFIG_DIR": str(homes / "jupyter"),
        "JUPYTER_DATA_DIR": str(homes / "jupyter-data"),
        "JUPYTER_RUNTIME_DIR": str(run),
        "IPYTHONDIR": str(homes / "ipython"),
        "MPLCONFIGDIR": str(homes / "matplotlib"),
        "MPLBACKEND": "Agg",
    }


def test_the_written_config_names_the_state_and_runtime_dirs_the_settings_then_use(tmp_path: Path) -> None:
    """A root with a space and a quote in its name: the paths are TOML strings, not pasted text."""
    root = tmp_path / 'a "tree" of mine'
    dirs = IsolatedDirs.side_by_side(root)
    config = dirs.write_config('[kernel]\nname = "python3"\n', log_level="WARNING")
    assert config == root / "config" and stat.S_IMODE(config.stat().st_mode) == 0o700
    settings = load_settings(config)
    assert settings.state_dir == root / "state" and settings.runtime_dir == root / "runtime"
    assert settings.server.log_level == "WARNING" and settings.kernel.name == "python3"


def test_make_dirs_makes_all_but_the_config_dir_and_the_runtime_dir_private(tmp_path: Path) -> None:
    dirs = IsolatedDirs.in_tree(tmp_path / "config", homes=tmp_path / "xdg", runtime_dir=tmp_path / "xdg" / "run")
    dirs.make_dirs()
    made = sorted(p.name for p in (tmp_path / "xdg").iterdir())
    assert made == ["cache", "config", "data", "ipython", "jupyter", "jupyter-data", "matplotlib", "run", "state"]
    assert not (tmp_path / "config").exists()
    assert stat.S_IMODE((tmp_path / "xdg" / "run").stat().st_mode) == 0o700


def test_applied_moves_this_process_for_the_block_and_puts_everything_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "/the/users/cache")
    monkeypatch.delenv("MPLBACKEND", raising=False)
    before = dict(os.environ)
    dirs = IsolatedDirs.in_tree(tmp_path, homes=tmp_path / "xdg", runtime_dir=tmp_path / "run")
    with dirs.applied():
        assert os.environ["XDG_CACHE_HOME"] == str(tmp_path / "xdg" / "cache")
        assert os.environ["MPLBACKEND"] == "Agg"
    assert dict(os.environ) == before
