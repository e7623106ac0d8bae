"""biopb-mcp: an MCP server that runs one IPython kernel and keeps an agent-edited docs store."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("biopb-mcp")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
