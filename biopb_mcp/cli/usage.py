"""What every command of the CLI shares: the usage error and the ``warning:`` lines."""

from __future__ import annotations

import sys

from biopb_mcp.config.settings import Settings

__all__ = ["UsageError", "print_text", "print_warnings"]


class UsageError(Exception):
    """argparse found bad usage; the message is already formatted."""


def print_warnings(settings: Settings, *, config_file_only: bool = False) -> None:
    """Settings warnings as ``warning:`` lines; docs commands show only those about the file."""
    from biopb_mcp.text.config import config_warning

    for warning in settings.warnings:
        if not config_file_only or warning.where.startswith(str(settings.config_file)):
            print(f"warning: {config_warning(warning)}", file=sys.stderr)


def print_text(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
