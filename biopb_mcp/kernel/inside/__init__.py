"""Code that runs inside the kernel: the bootstrap, the built-in plugins, the inspect probe.

The kernel may be another Python environment without biopb_mcp, so these files are handed to
it by path (or as source) and use only the standard library when loaded; what they need beyond
it (IPython, matplotlib, napari, dask) they import when first used. Nothing here imports
biopb_mcp. Each is loaded once per kernel process, so the module state a plugin keeps (its
settings, its client, its window) is that kernel's by design.
"""

from pathlib import Path

INSIDE_DIR = Path(__file__).parent
"""Where the files the kernel is given live."""
