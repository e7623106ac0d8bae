"""The built-in kernel plugins: files of this package the kernel bootstrap loads by path.

Each runs inside the kernel (standard library only at import, as the kernel may be another
Python without biopb_mcp) and adds what the agent uses to the namespace: ``show()`` and the
figure flush (``inside/figures.py``), ``dask_client()`` (``inside/compute.py``), ``viewer()``
(``inside/viewer.py``, the napari window shared with the user), ``open_image()`` (``inside/images.py``,
the scientist's file with its pixel size, channels and frame interval).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from biopb_mcp.kernel import compute, viewer
from biopb_mcp.kernel.inside import INSIDE_DIR

if TYPE_CHECKING:
    from biopb_mcp.config.settings import Settings

__all__ = ["BUILTIN_FILES", "FIGURES_PLUGIN", "IMAGES_ENV", "IMAGES_PLUGIN", "kernel_env"]

FIGURES_PLUGIN = INSIDE_DIR / "figures.py"

IMAGES_PLUGIN = INSIDE_DIR / "images.py"
"""Defines ``open_image``; told its lazy threshold through ``IMAGES_ENV``."""

IMAGES_ENV = "BIOPB_MCP_IMAGES"

BUILTIN_FILES = (FIGURES_PLUGIN, compute.PLUGIN_FILE, viewer.PLUGIN_FILE, IMAGES_PLUGIN)
"""Every built-in plugin, in the order the bootstrap loads them."""


def kernel_env(settings: Settings) -> dict[str, str]:
    """Environment for a kernel start: every built-in plugin's file and what they read."""
    env = compute.kernel_env(settings)
    env["BIOPB_MCP_BUILTIN_PLUGINS"] = os.pathsep.join(str(path) for path in BUILTIN_FILES)
    env[IMAGES_ENV] = json.dumps({"lazy_above_bytes": int(settings.kernel.lazy_image_mb * 1e6)})
    return env
