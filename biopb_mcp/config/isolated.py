"""An isolated environment: every place a server, its kernel and the libraries they load read or
write, under one root, and the variables that point a child process (or this one) there.

The demo runs the real server without touching the user's config, state or docs; the bench and
the tests start servers and kernels that must not either. ``BIOPB_CONFIG_DIR`` moves the config
and docs; the XDG variables move platformdirs' state, runtime and cache dirs (and Jupyter's, which
follows them); the Jupyter, IPython and matplotlib variables keep jupyter-client's files, the
kernel's history database and matplotlib's font cache in the tree too.

Two layouts, as the callers need them: :meth:`IsolatedDirs.side_by_side` puts the config, state,
runtime and cache dirs next to each other under a root (a throw-away tree), :meth:`IsolatedDirs.in_tree`
keeps a config dir of its own and every platform dir under one folder beside it (a prepared tree).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path

import tomli_w

from biopb_mcp.config.settings import CONFIG_DIR_ENV

__all__ = ["IsolatedDirs"]

_VARIABLES = {
    "config_dir": CONFIG_DIR_ENV,
    "config_home": "XDG_CONFIG_HOME",
    "state_home": "XDG_STATE_HOME",
    "data_home": "XDG_DATA_HOME",
    "cache_home": "XDG_CACHE_HOME",
    "runtime_dir": "XDG_RUNTIME_DIR",
    "jupyter_config": "JUPYTER_CONFIG_DIR",
    "jupyter_data": "JUPYTER_DATA_DIR",
    "jupyter_runtime": "JUPYTER_RUNTIME_DIR",
    "ipython_dir": "IPYTHONDIR",
    "matplotlib_dir": "MPLCONFIGDIR",
}
"""Each field and the variable that carries it to a child (and to this process's libraries)."""


@dataclass(frozen=True)
class IsolatedDirs:
    """Where one isolated environment keeps things; a field left None is not moved (the caller's
    environment decides it)."""

    config_dir: Path
    state_home: Path
    runtime_dir: Path
    cache_home: Path
    config_home: Path | None = None
    data_home: Path | None = None
    jupyter_config: Path | None = None
    jupyter_data: Path | None = None
    jupyter_runtime: Path | None = None
    ipython_dir: Path | None = None
    matplotlib_dir: Path | None = None
    headless_plots: bool = False
    """Matplotlib draws off-screen (``MPLBACKEND=Agg``): no child opens a window."""

    @classmethod
    def side_by_side(cls, root: Path, *, tools: bool = False) -> IsolatedDirs:
        """``root/config``, ``root/state``, ``root/runtime`` and ``root/cache``; with ``tools`` the
        IPython and matplotlib dirs too, and Jupyter's runtime files under the runtime dir."""
        runtime = root / "runtime"
        if not tools:
            return cls(root / "config", root / "state", runtime, root / "cache")
        return cls(
            root / "config",
            root / "state",
            runtime,
            root / "cache",
            jupyter_runtime=runtime / "jupyter",
            ipython_dir=root / "ipython",
            matplotlib_dir=root / "matplotlib",
        )

    @classmethod
    def in_tree(cls, config_dir: Path, *, homes: Path, runtime_dir: Path) -> IsolatedDirs:
        """``config_dir`` as the config, and every XDG, Jupyter, IPython and matplotlib dir under
        ``homes``; ``runtime_dir`` serves XDG and Jupyter alike; plots are drawn off-screen."""
        return cls(
            config_dir,
            homes / "state",
            runtime_dir,
            homes / "cache",
            config_home=homes / "config",
            data_home=homes / "data",
            jupyter_config=homes / "jupyter",
            jupyter_data=homes / "jupyter-data",
            jupyter_runtime=runtime_dir,
            ipython_dir=homes / "ipython",
            matplotlib_dir=homes / "matplotlib",
            headless_plots=True,
        )

    def variables(self) -> dict[str, str]:
        """The variables that point a process here (only those this environment moves)."""
        out = {_VARIABLES[f.name]: str(value) for f in fields(self) if isinstance(value := getattr(self, f.name), Path)}
        if self.headless_plots:
            out["MPLBACKEND"] = "Agg"
        return out

    def environ(self) -> dict[str, str]:
        """A child's whole environment: this process's, with :meth:`variables` over it."""
        return {**os.environ, **self.variables()}

    def make_dirs(self) -> None:
        """Create every dir but the config dir (:meth:`write_config` makes that one); the runtime
        dir private (0700), as platformdirs and the server require of it."""
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Path) and f.name != "config_dir":
                value.mkdir(parents=True, exist_ok=True)
        self.runtime_dir.chmod(0o700)

    def write_config(self, extra: str = "", *, log_level: str = "INFO") -> Path:
        """The config dir (private) with a ``config.toml`` that names the state and runtime dirs
        itself (the XDG variables do not move them on every platform); ``extra`` is more TOML.
        Returns the config dir."""
        self.config_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        server = {"state_dir": str(self.state_home), "runtime_dir": str(self.runtime_dir), "log_level": log_level}
        text = tomli_w.dumps({"server": server}) + extra
        (self.config_dir / "config.toml").write_text(text, encoding="utf-8")
        return self.config_dir

    @contextmanager
    def applied(self) -> Iterator[None]:
        """This process's own environment pointed here for the block (in-process servers and the
        libraries they load read it), and put back as it was after."""
        moved = self.variables()
        saved = {key: os.environ.get(key) for key in moved}
        os.environ.update(moved)
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
