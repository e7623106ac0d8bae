"""Running the server: the serve entry point, and the one way out (kernel down, cleanup, exit).

Every transport leaves through :func:`shutdown_and_exit`, so no exit path (stdin closed, a signal,
a transport failure) leaves an orphan kernel behind.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import anyio

import biopb_mcp
from biopb_mcp.config import Settings
from biopb_mcp.server.app import build_server
from biopb_mcp.server.state import AppState

logger = logging.getLogger(__name__)

__all__ = ["SHUTDOWN_GRACE_SECONDS", "exit_on_signal", "kernel_fate", "run_then_exit", "serve", "shutdown_and_exit",
           "stderr_line"]

SHUTDOWN_GRACE_SECONDS = 10.0
"""How long the exit path waits for the kernel to shut down before leaving anyway."""


def stderr_line(line: str) -> None:
    """One line for the human who started the server (stderr: never the JSON-RPC wire)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def kernel_fate(state: AppState) -> str:
    """What the way out does to the kernel, for the exit log line: a joined kernel is not ours."""
    if state.kernel.owns_kernel:
        return "shutting the kernel down"
    return "leaving the joined kernel running (its frontend owns it)"


def shutdown_and_exit(state: AppState, code: int) -> NoReturn:
    """Shut the kernel down (bounded), run ``state.at_exit``, flush logs, leave with ``os._exit``.

    ``os._exit`` because interpreter teardown with live loops, reader threads and BLAS threads can
    hang or crash.
    """
    worker = threading.Thread(target=state.kernel.shutdown, name="kernel-shutdown", daemon=True)
    worker.start()
    worker.join(SHUTDOWN_GRACE_SECONDS)
    if worker.is_alive():
        logger.error("Kernel shutdown did not finish within %.0f s; leaving anyway", SHUTDOWN_GRACE_SECONDS)
    for cleanup in state.at_exit:
        try:
            cleanup()
        except OSError:
            logger.exception("Cleanup at exit failed")
    logger.info("biopb-mcp exiting (%d)", code)
    logging.shutdown()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)


async def exit_on_signal(state: AppState) -> None:
    import signal

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP, signal.SIGINT) as signals:
        async for signum in signals:
            logger.info("Received signal %d; %s", signum, kernel_fate(state))
            shutdown_and_exit(state, 0)


def run_then_exit(state: AppState, main: Callable[..., Any], *args: Any) -> NoReturn:
    """Run a transport; whatever way it ends, the kernel goes down with the server."""
    try:
        anyio.run(main, *args)
    except BaseException:  # top-level: no exit path may leave an orphan kernel
        logger.exception("The server stopped on an unexpected error")
        shutdown_and_exit(state, 1)
    shutdown_and_exit(state, 0)


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
    from biopb_mcp.logs import setup_logging
    from biopb_mcp.runtime_files import sweep_stale

    if transport == "stdio":
        from biopb_mcp.server.stdio import claim_stdio, serve_stdio

        setup_logging(settings, stderr=True)  # creates the log file 0600; raises ConfigError if it cannot
        # Before anything else can print: the wire moves to private fds, fd 1 goes to the log.
        wire = claim_stdio(settings.log_file)
        sweep_stale(settings.runtime_dir)  # files a SIGKILLed server could not remove
        mcp, state = build_server(settings, trace=trace)
        state.transport = "stdio"
        logger.info("biopb-mcp %s serving stdio (pid %d)", biopb_mcp.__version__, os.getpid())
        run_then_exit(state, serve_stdio, mcp, state, wire)
    if transport == "http":
        setup_logging(settings, stderr=True)
        sweep_stale(settings.runtime_dir)
        from biopb_mcp.server.http import bind_loopback, http_token, serve_http

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
