"""The one builder of an isolated environment: a config tree, its state and runtime dirs, and
the variables that point a server, a kernel or the settings loader at them, all under one root.

Every test that needs a config (in-process settings, a spawned server, a notebook kernel beside
a server, the autouse fixture) builds it here, so they agree on where the state, runtime and
link files are.
"""

from __future__ import annotations

from pathlib import Path

from biopb_mcp.config.isolated import IsolatedDirs
from biopb_mcp.config.settings import Settings, load_settings

__all__ = ["NO_WARM_IMPORTS", "config_text", "isolated_vars", "make_settings", "without_warm_imports", "write_config"]


NO_WARM_IMPORTS = "warm_imports = []\n"
"""The suite's kernels skip the background imports (a second of CPU each, hundreds of kernels);
the tests of the warm-up itself set them."""


def config_text(root: Path, extra: str = "", *, kernel: str = "", runtime_dir: Path | None = None) -> str:
    """A config.toml whose state and runtime dirs sit under ``root``; ``extra`` is more TOML, and
    ``kernel`` the body of a ``[kernel]`` table (``warm_imports = []`` unless it sets them)."""
    runtime = runtime_dir or root / "rt"
    text = f'[server]\nstate_dir = "{root / "state"}"\nruntime_dir = "{runtime}"\n' + extra
    if kernel:
        text += ("" if text.endswith("\n") else "\n") + "[kernel]\n" + kernel
    return without_warm_imports(text)


def without_warm_imports(text: str) -> str:
    """``text`` (a config.toml) with ``warm_imports = []`` in its ``[kernel]`` table, unless it sets them."""
    if "warm_imports" in text:
        return text
    if "[kernel]\n" in text:
        return text.replace("[kernel]\n", "[kernel]\n" + NO_WARM_IMPORTS, 1)
    return text + ("" if text.endswith("\n") or not text else "\n") + "[kernel]\n" + NO_WARM_IMPORTS


def write_config(root: Path, text: str | None = None, *, plugins: dict[str, str] | None = None) -> Path:
    """``<root>/config`` with ``text`` as its config.toml (none when None) and the given kernel
    plugin files (name -> source); returns the config dir."""
    config = root / "config"
    config.mkdir(parents=True, exist_ok=True)
    if text is not None:
        (config / "config.toml").write_text(text, encoding="utf-8")
    for name, source in (plugins or {}).items():
        (config / "kernel").mkdir(exist_ok=True)
        (config / "kernel" / name).write_text(source, encoding="utf-8")
    return config


def isolated_vars(root: Path) -> dict[str, str]:
    """The variables that keep the config, the platform dirs and the caches under ``root``."""
    return IsolatedDirs.side_by_side(root).variables()


def make_settings(root: Path, extra: str = "", *, kernel: str = "", runtime_dir: Path | None = None) -> Settings:
    """Settings loaded from a config tree written under ``root`` (see :func:`config_text`)."""
    return load_settings(write_config(root, config_text(root, extra, kernel=kernel, runtime_dir=runtime_dir)))
