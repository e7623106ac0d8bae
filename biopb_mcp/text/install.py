"""The install line a message prints for an extra: pip and the place this copy came from."""

from __future__ import annotations

import shlex

from biopb_mcp.fs.install_source import requirement

__all__ = ["install_command"]


def install_command(extras: str) -> str:
    """``pip install '<this project>[extras]'``, runnable as printed in a POSIX shell, in a fresh
    environment (see `biopb_mcp.fs.install_source` for why not the bare name)."""
    return f"pip install {shlex.quote(requirement(extras))}"
