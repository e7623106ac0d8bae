"""biopb-mcp: an MCP server that runs one IPython kernel and keeps an agent-edited docs store."""

from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("biopb-mcp")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__", "load_ipython_extension", "unload_ipython_extension"]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext biopb_mcp``: print how to attach an agent to this kernel; add ``%biopb``.

    The work lives in ``biopb_mcp.ipython.extension``, imported here only, so importing the package
    stays cheap for the server and the CLI.
    """
    from biopb_mcp.ipython.extension import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext biopb_mcp``: remove ``%biopb``."""
    from biopb_mcp.ipython.extension import unload

    unload(ipython)
