"""Serving: the entry point that starts the chosen transport over a freshly built server."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import biopb_mcp
from biopb_mcp.config.settings import Settings
from biopb_mcp.server.app import build_server
from biopb_mcp.server.transports.exit import run_then_exit, stderr_line

logger = logging.getLogger(__name__)

__all__ = ["serve", "sweep_at_start"]


def sweep_at_start(settings: Settings) -> None:
    """What servers killed mid-write left: runtime files of dead servers, and temp files under
    the state dir (search index, notebooks, images, tokens) and the runtime dir. The docs tier is
    swept by its store. Never raises."""
    from biopb_mcp.fs.atomic import sweep_stale_temps
    from biopb_mcp.fs.runtime import sweep_stale

    sweep_stale(settings.runtime_dir)
    for root in {Path(settings.state_dir), Path(settings.runtime_dir), Path(settings.record.dir or settings.state_dir)}:
        swept = sweep_stale_temps(root)
        if swept:
            logger.info("removed %d temp files crashed writers left under %s", swept, root)


def serve(
    settings: Settings,
    transport: str = "stdio",
    port: int | None = None,
    auth: bool = True,
    trace: Path | None = None,
    rotate_token: bool = False,
) -> int:
    """Run the server until stdin closes or a signal arrives; the kernel is shut down on the way out.

    Args:
        settings: the loaded settings.
        transport: ``"stdio"`` (default) or ``"http"``.
        port: HTTP port (``settings.http.port`` when None; 0 picks a free one).
        auth: HTTP bearer token (default on); False is ``--no-auth``.
        trace: trace file; overrides ``settings.trace_file``.
        rotate_token: HTTP: replace the stable bearer token with a new one before serving.

    Returns:
        An exit code (the stdio and HTTP paths normally leave through ``os._exit``).
    """
    from biopb_mcp.server.logs import setup_logging

    if transport == "stdio":
        from biopb_mcp.server.transports.stdio import claim_stdio, serve_stdio

        setup_logging(settings, stderr=True)  # creates the log file 0600; raises ConfigError if it cannot
        # Before anything else can print: the wire moves to private fds, fd 1 goes to the log.
        wire = claim_stdio(settings.log_file)
        sweep_at_start(settings)
        mcp, state = build_server(settings, trace=trace)
        state.transport = "stdio"
        logger.info("biopb-mcp %s serving stdio (pid %d)", biopb_mcp.__version__, os.getpid())
        run_then_exit(state, serve_stdio, mcp, state, wire)
    if transport == "http":
        setup_logging(settings, stderr=True)
        sweep_at_start(settings)
        from biopb_mcp.server.transports.http import bind_loopback, http_token, serve_http

        mcp, state = build_server(settings, trace=trace)
        state.transport = "http"
        chosen_port = settings.http.port if port is None else port
        use_auth = auth and bool(getattr(settings.http, "auth", True))
        token, token_file, stable = http_token(settings, rotate_token) if use_auth else (None, None, None)
        try:
            sock = bind_loopback(chosen_port)
        except OSError as exc:
            if token_file is not None:
                token_file.unlink(missing_ok=True)
            stderr_line(f"error: cannot serve HTTP on 127.0.0.1:{chosen_port}: {exc}; pick another with --port")
            return 2
        run_then_exit(state, serve_http, mcp, state, sock, token, token_file, stable)
    stderr_line(f"error: unknown transport {transport!r}; use stdio or http")
    return 2
