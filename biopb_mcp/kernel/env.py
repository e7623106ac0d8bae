"""The kernel's environment contract: every ``BIOPB_MCP_*`` variable the server gives a kernel.

The server cannot import into the kernel (it may be another Python without biopb_mcp), so what
the bootstrap and the built-in plugins need from the server's settings reaches them as
environment variables, set when the server launches the kernel, or set and taken out again by
the bootstrap cell the server runs in a kernel it joined (``attached.bootstrap_code``), or by
``load_plugins`` in a re-run of a session notebook (``replay``). Every name is declared here and
every such environment is built here. The code inside the kernel (``kernel/inside/``) imports
nothing of biopb_mcp, so it reads each variable by its literal name; a test checks that the names
read there and the names declared here are the same set.

Each constant says what the variable carries, who sets it and who reads it. The readers pop the
variables that would mislead a child process or a later bootstrap (the lifeline, the umask, the
plugins' settings) and leave the rest.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Final

from biopb_mcp.fs.install_source import requirement
from biopb_mcp.kernel import compute
from biopb_mcp.kernel.plugins import BUILTIN_FILES

if TYPE_CHECKING:
    from biopb_mcp.config.settings import Settings

__all__ = [
    "AGENT_FILE_ENV",
    "ATTACHED_ENV",
    "BUILTIN_PLUGINS_ENV",
    "COMPUTE_ENV",
    "IMAGES_ENV",
    "KERNEL_LOG_ENV",
    "LIFELINE_FD_ENV",
    "NAMES",
    "OUTPUTS_ENV",
    "PLUGINS_DIR_ENV",
    "UMASK_ENV",
    "VIEWER_INSTALL_ENV",
    "WARM_IMPORTS_ENV",
    "bootstrap_env",
    "compute_config",
    "compute_env",
    "launch_env",
    "outputs_config",
    "plugin_env",
    "replay_env",
]

# -- set at launch only (a kernel the server starts) ------------------------------------------------

LIFELINE_FD_ENV: Final = "BIOPB_MCP_LIFELINE_FD"
"""The read end of the parent-death pipe (a descriptor number). Set by ``process`` at launch;
popped by ``inside/bootstrap.py``, whose watcher ends the kernel's process group at EOF."""

UMASK_ENV: Final = "BIOPB_MCP_UMASK"
"""The server's umask in octal: the kernel starts under 0o077 so its sockets are private, then
gives user code this one back. Set by :func:`launch_env`; popped by ``inside/bootstrap.py``."""

AGENT_FILE_ENV: Final = "BIOPB_MCP_AGENT_FILE"
"""The presence file the server shares with this kernel (``kernel.link``). Set by
:func:`launch_env`; read by ``inside/agent_notes.py``, whose cell hook tells the scientist what
the agent withdrew while their cell ran."""

# -- set for every bootstrap (launched or joined kernel) --------------------------------------------

PLUGINS_DIR_ENV: Final = "BIOPB_MCP_PLUGINS_DIR"
"""The user's plugin folder (``<config dir>/kernel``). Set by :func:`bootstrap_env` and
:func:`replay_env`; read by ``inside/bootstrap.py``, which loads each ``*.py`` there."""

KERNEL_LOG_ENV: Final = "BIOPB_MCP_KERNEL_LOG"
"""The kernel log file, where the bootstrap writes what failed (never to the agent's output).
Set by :func:`bootstrap_env`; read by ``inside/bootstrap.py``."""

BUILTIN_PLUGINS_ENV: Final = "BIOPB_MCP_BUILTIN_PLUGINS"
"""The built-in plugin files (``plugins.BUILTIN_FILES``), ``os.pathsep``-separated, in load order.
Set by :func:`plugin_env` and :func:`replay_env`; popped by ``inside/bootstrap.py``."""

COMPUTE_ENV: Final = "BIOPB_MCP_COMPUTE"
"""The ``[compute]`` settings as JSON (:func:`compute_config`). Set by :func:`plugin_env` and
:func:`replay_env`; popped by ``inside/compute.py`` (``dask_client()``)."""

OUTPUTS_ENV: Final = "BIOPB_MCP_OUTPUTS"
"""The ``[outputs]`` settings as JSON (:func:`outputs_config`). Set by :func:`plugin_env` and
:func:`replay_env`; popped by ``inside/outputs.py`` (the save helpers)."""

WARM_IMPORTS_ENV: Final = "BIOPB_MCP_WARM_IMPORTS"
"""``kernel.warm_imports`` as a JSON list of module names. Set by :func:`plugin_env`; popped by
``inside/warm.py``, which imports them in the background."""

IMAGES_ENV: Final = "BIOPB_MCP_IMAGES"
"""``{"lazy_above_bytes": N, "install": {extra: requirement}}`` as JSON. Set by
:func:`plugin_env`; popped by ``inside/images.py`` (``open_image``)."""

VIEWER_INSTALL_ENV: Final = "BIOPB_MCP_VIEWER_INSTALL"
"""The pip requirement of this copy's viewer extra (the bare name on PyPI is another project's
until this one is published). Set by :func:`plugin_env`; read by ``inside/viewer.py`` for its
install hint."""

# -- set in a joined kernel only ---------------------------------------------------------------------

ATTACHED_ENV: Final = "BIOPB_MCP_ATTACHED"
"""``1`` when the kernel is not the server's (it only joined it): the bootstrap then leaves the
kernel's shutdown to its frontend. Set by ``attached.bootstrap_code``; read by
``inside/bootstrap.py``."""

NAMES: Final = frozenset(
    {
        LIFELINE_FD_ENV,
        UMASK_ENV,
        AGENT_FILE_ENV,
        PLUGINS_DIR_ENV,
        KERNEL_LOG_ENV,
        BUILTIN_PLUGINS_ENV,
        COMPUTE_ENV,
        OUTPUTS_ENV,
        WARM_IMPORTS_ENV,
        IMAGES_ENV,
        VIEWER_INSTALL_ENV,
        ATTACHED_ENV,
    }
)
"""Every variable of the contract."""


def compute_config(settings: Settings) -> str:
    """The ``[compute]`` settings as the kernel's ``dask_client()`` reads them (JSON)."""
    c = settings.compute
    config = {
        "scheduler": c.scheduler,
        "workers": c.workers,
        "threads_per_worker": c.threads_per_worker,
        "memory_limit": c.memory_limit,
        "connect_timeout": c.connect_timeout,
        "config_file": str(settings.config_file),
    }
    return json.dumps(config)


def outputs_config(settings: Settings) -> str:
    """The ``[outputs]`` settings as the kernel's save helpers read them (JSON)."""
    o = settings.outputs
    names = {}
    for entry in o.names:
        step, _, name = entry.partition("=")
        names[step.strip()] = name.strip()
    config = {"path": o.path, "names": names, "delimiter": o.table_delimiter, "decimal": o.decimal_mark}
    return json.dumps(config)


def compute_env(settings: Settings) -> dict[str, str]:
    """The compute plugin alone: its file and the ``[compute]`` settings."""
    return {BUILTIN_PLUGINS_ENV: str(compute.PLUGIN_FILE), COMPUTE_ENV: compute_config(settings)}


def plugin_env(settings: Settings) -> dict[str, str]:
    """Every built-in plugin's file and what the plugins read."""
    env = compute_env(settings)
    env[OUTPUTS_ENV] = outputs_config(settings)
    env[WARM_IMPORTS_ENV] = json.dumps(list(settings.kernel.warm_imports))
    env[BUILTIN_PLUGINS_ENV] = os.pathsep.join(str(path) for path in BUILTIN_FILES)
    env[IMAGES_ENV] = json.dumps(
        {
            "lazy_above_bytes": int(settings.kernel.lazy_image_mb * 1e6),
            "install": {extra: requirement(extra) for extra in ("imaging", "formats")},
        }
    )
    env[VIEWER_INSTALL_ENV] = requirement("viewer")
    return env


def bootstrap_env(settings: Settings) -> dict[str, str]:
    """What the bootstrap reads in any kernel the server runs it in, launched or joined."""
    return {
        PLUGINS_DIR_ENV: str(settings.plugins_dir),
        KERNEL_LOG_ENV: str(settings.kernel_log_file),
        **plugin_env(settings),
    }


def launch_env(settings: Settings, *, umask: int, agent_file: Path) -> dict[str, str]:
    """The contract's part of a launched kernel's environment (the lifeline is added at the fork).

    Args:
        settings: the server's settings.
        umask: the server's umask, for the kernel to give back to user code.
        agent_file: the presence file the server shares with this kernel.
    """
    return {UMASK_ENV: f"{umask:o}", **bootstrap_env(settings), AGENT_FILE_ENV: str(agent_file)}


def replay_env(plugins_dir: str, compute_json: str, outputs_json: str) -> dict[str, str]:
    """What a plain kernel re-running a session notebook is given: the plugins, their settings as
    the session notebook recorded them (empty: the plugin's defaults), no server machinery."""
    env = {
        BUILTIN_PLUGINS_ENV: os.pathsep.join(str(path) for path in BUILTIN_FILES),
        PLUGINS_DIR_ENV: plugins_dir,
    }
    if compute_json:
        env[COMPUTE_ENV] = compute_json
    if outputs_json:
        env[OUTPUTS_ENV] = outputs_json
    return env
