"""The one way out of a running server: the kernel down, cleanup, exit.

Every transport leaves through :func:`shutdown_and_exit`, so no exit path (stdin closed, a signal,
a transport failure) leaves an orphan kernel behind. The transports import this module; it
imports none of them (the dispatcher that starts them is ``transports.serve``).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, NoReturn

import anyio

from biopb_mcp.server.state import AppState

logger = logging.getLogger(__name__)

__all__ = [
    "SHUTDOWN_GRACE_SECONDS",
    "exit_on_signal",
    "kernel_fate",
    "run_then_exit",
    "shutdown_and_exit",
    "stderr_line",
]

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
