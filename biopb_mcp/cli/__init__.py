"""The ``biopb-mcp`` command: one module per command group, ``main`` the entry point."""

from biopb_mcp.cli.commands import main

__all__ = ["main"]
