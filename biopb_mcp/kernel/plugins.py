"""The built-in kernel plugins: files of this package the kernel bootstrap loads by path.

Each runs inside the kernel (standard library only at import, as the kernel may be another
Python without biopb_mcp) and adds what the agent uses to the namespace: ``show()`` and the
figure flush (``inside/figures.py``), the save helpers ``out_path``, ``save_labels``,
``save_image``, ``save_table``, ``read_table`` (``inside/outputs.py``), ``dask_client()``
(``inside/compute.py``), ``viewer()`` (``inside/viewer.py``, the napari window shared with the
user), ``open_image()`` (``inside/images.py``, the scientist's file with its pixel size, channels
and frame interval), and the background warm-up of the imaging imports (``inside/warm.py``).
What they are told of the server's settings is built in ``kernel.env``.
"""

from __future__ import annotations

from biopb_mcp.kernel import compute, viewer
from biopb_mcp.kernel.inside import INSIDE_DIR

__all__ = [
    "AGENT_NOTES_PLUGIN",
    "BUILTIN_FILES",
    "FIGURES_PLUGIN",
    "IMAGES_PLUGIN",
    "OUTPUTS_PLUGIN",
    "WARM_PLUGIN",
]

FIGURES_PLUGIN = INSIDE_DIR / "figures.py"
OUTPUTS_PLUGIN = INSIDE_DIR / "outputs.py"
WARM_PLUGIN = INSIDE_DIR / "warm.py"

IMAGES_PLUGIN = INSIDE_DIR / "images.py"
"""Defines ``open_image``; told its lazy threshold through ``kernel.env.IMAGES_ENV``."""

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
