"""``biopb-mcp serve`` (the default command): check the options, load the settings, serve."""

from __future__ import annotations

import argparse
import sys

from biopb_mcp.cli.usage import UsageError
from biopb_mcp.config.settings import Settings, load_settings

__all__ = ["TTY_HINT", "run_serve"]

TTY_HINT = (
    "biopb-mcp speaks MCP (JSON-RPC) on stdin/stdout for an MCP client to launch, e.g. "
    "`claude mcp add biopb -- biopb-mcp`; `biopb-mcp demo` shows it working. Ctrl-C quits."
)
"""Printed to stderr when stdin is a terminal."""


def run_serve(args: argparse.Namespace) -> int:
    if args.transport != "http":
        if args.port is not None:
            raise UsageError("--port applies only to --transport http")
        if args.no_auth:
            raise UsageError("--no-auth applies only to --transport http")
    if args.rotate_token and (args.transport != "http" or args.no_auth):
        raise UsageError("--rotate-token applies only to --transport http with a token")
    settings = load_settings()
    if args.rotate_token and settings.http.token != "stable":
        raise UsageError(
            '--rotate-token renews the stable token; http.token is "per-start", '
            "which makes a new token at every start anyway"
        )
    if args.transport == "stdio" and sys.stdin.isatty():
        print(TTY_HINT, file=sys.stderr)  # a person ran it by hand: silence would look like a hang
    if args.existing is not None:
        settings = _with_existing(settings, args.existing)
    from biopb_mcp.server import serve  # sets up logging (file + stderr) itself

    trace = args.trace if args.trace is not None else settings.trace_file
    return serve(
        settings,
        transport=args.transport,
        port=args.port,
        auth=not args.no_auth,
        trace=trace,
        rotate_token=args.rotate_token,
    )


def _with_existing(settings: Settings, spec: str) -> Settings:
    """``--existing`` overrides ``kernel.existing`` (an empty FILE is refused, not read as "off")."""
    from dataclasses import replace

    if not spec.strip():
        raise UsageError("--existing takes a connection file or a kernel name; leave FILE out for the newest")
    return replace(
        settings,
        kernel=replace(settings.kernel, existing=spec),
        sources={**settings.sources, "kernel.existing": "--existing"},
    )
