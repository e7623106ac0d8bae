"""The built-in kernel plugins: files of this package the kernel bootstrap loads by path.

Each runs inside the kernel (standard library only at import, as the kernel may be another
Python without biopb_mcp) and adds what the agent uses to the namespace: ``show()`` and the
figure flush (``inside/figures.py``), the save helpers ``out_path``, ``save_labels``,
``save_image``, ``save_table``, ``read_table`` (``inside/outputs.py``), ``dask_client()``
(``inside/compute.py``), ``viewer()`` (``inside/viewer.py``, the napari window shared with the
user), ``open_image()`` (``inside/images.py``, the scientist's file with its pixel size, channels
and frame interval), and the background warm-up of the imaging imports (``inside/warm.py``).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from biopb_mcp.fs.install_source import requirement
from biopb_mcp.kernel import compute, viewer
from biopb_mcp.kernel.inside import INSIDE_DIR
from biopb_mcp.kernel.inside.viewer import VIEWER_INSTALL_ENV

if TYPE_CHECKING:
    from biopb_mcp.config.settings import Settings

__all__ = [
    "AGENT_NOTES_PLUGIN",
    "BUILTIN_FILES",
    "FIGURES_PLUGIN",
    "IMAGES_ENV",
    "IMAGES_PLUGIN",
    "OUTPUTS_PLUGIN",
    "WARM_PLUGIN",
    "kernel_env",
    "outputs_env",
]

FIGURES_PLUGIN = INSIDE_DIR / "figures.py"
OUTPUTS_PLUGIN = INSIDE_DIR / "outputs.py"
WARM_PLUGIN = INSIDE_DIR / "warm.py"

IMAGES_PLUGIN = INSIDE_DIR / "images.py"
"""Defines ``open_image``; told its lazy threshold through ``IMAGES_ENV``."""

IMAGES_ENV = "BIOPB_MCP_IMAGES"

AGENT_NOTES_PLUGIN = INSIDE_DIR / "agent_notes.py"
"""Tells the scientist, after their cell, what the agent withdrew while it ran."""

BUILTIN_FILES = (
    FIGURES_PLUGIN,
    OUTPUTS_PLUGIN,
    compute.PLUGIN_FILE,
    viewer.PLUGIN_FILE,
    IMAGES_PLUGIN,
    WARM_PLUGIN,
    AGENT_NOTES_PLUGIN,
)
"""Every built-in plugin, in the order the bootstrap loads them."""


def outputs_env(settings: Settings) -> dict[str, str]:
    """The ``[outputs]`` settings as the save helpers read them (``BIOPB_MCP_OUTPUTS``)."""
    o = settings.outputs
    names = {}
    for entry in o.names:
        step, _, name = entry.partition("=")
        names[step.strip()] = name.strip()
    config = {"path": o.path, "names": names, "delimiter": o.table_delimiter, "decimal": o.decimal_mark}
    return {"BIOPB_MCP_OUTPUTS": json.dumps(config)}


def kernel_env(settings: Settings) -> dict[str, str]:
    """Environment for a kernel start: every built-in plugin's file and what they read."""
    env = compute.kernel_env(settings)
    env.update(outputs_env(settings))
    env["BIOPB_MCP_WARM_IMPORTS"] = json.dumps(list(settings.kernel.warm_imports))
    env["BIOPB_MCP_BUILTIN_PLUGINS"] = os.pathsep.join(str(path) for path in BUILTIN_FILES)
    env[IMAGES_ENV] = json.dumps(
        {
            "lazy_above_bytes": int(settings.kernel.lazy_image_mb * 1e6),
            "install": {extra: requirement(extra) for extra in ("imaging", "formats")},
        }
    )
    # what installs the viewer extra, for the viewer's own hint (kernel code imports nothing of ours)
    env[VIEWER_INSTALL_ENV] = requirement("viewer")
    return env
