"""The client side of the kernel: the connection to it, and the parts that use the connection.

``KernelClient`` talks to whatever kernel the process side connected it to (started here or
joined through a connection file). It owns the channels' lifetime and routes what the kernel
sends: a message answering one of our requests goes to ``jobs`` (its execution), the rest to the
watch on other clients' cells (``cells``) and, for another client's cell, to the ``events``
observers. ``probes`` asks the kernel questions outside the agent's cells. It outlives kernel
starts: job ids keep counting and finished executions stay pageable after a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from biopb_mcp.errors import KernelError
from biopb_mcp.kernel.cells import CellWatch
from biopb_mcp.kernel.channels import KernelChannels
from biopb_mcp.kernel.connection import ClientConnection
from biopb_mcp.kernel.events import ConnectionObserver, ExecutionEvents
from biopb_mcp.kernel.jobs import Jobs
from biopb_mcp.kernel.probes import Probes
from biopb_mcp.kernel.states import ExecutionStatus, HostEnding, KernelState

if TYPE_CHECKING:
    from biopb_mcp.config.settings import Settings

logger = logging.getLogger(__name__)

__all__ = ["KernelClient"]


class KernelClient:
    """Channels to one kernel at a time, and the parts that use them.

    Args:
        settings: read for ``kernel`` (max_output_chars, max_image_bytes, max_images,
            request_timeout) and ``state_dir`` (where oversized images are saved).
        not_ready: builds the error raised when no kernel is connected (the host knows why).
        notebook: where finished executions are kept past this client's memory (the session
            notebook), named when a forgotten job is asked for; None when nothing keeps them.

    Parts: ``jobs`` (submit, wait, page executions by id), ``probes`` (inspection and queries),
    ``cells`` (another client's cell the kernel runs), ``events`` (subscribe to hear what
    executions do). Thread-safe. ``connect``/``open``/``abandon``/``disconnect`` are the host's.
    """

    def __init__(
        self,
        settings: Settings,
        not_ready: Callable[[], KernelError],
        notebook: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._conn = ClientConnection(settings, not_ready)
        self.events = ExecutionEvents()
        self.cells = CellWatch(self._conn)
        self.jobs = Jobs(self._conn, self.cells, self.events, notebook)
        self.probes = Probes(self._conn, self.jobs)

    def reconfigure(self, settings: Settings) -> None:
        """Use ``settings`` from now on."""
        with self._conn.lock:
            self._conn.settings = settings

    # -- connection (host) -------------------------------------------------------------------------
    def connect(self, info: dict[str, Any], is_alive: Callable[[], bool], watcher: ConnectionObserver) -> None:
        """Open channels to the kernel described by ``info`` (connection-file fields); code is
        accepted only after ``open``, once the host declared the kernel ready. ``is_alive`` is asked
        about every 200 ms while nothing arrives; ``watcher`` hears every message not claimed by a
        waiting call, before it is dispatched, and the kernel's loss."""

        def on_message(channel: str, msg: dict[str, Any]) -> None:
            watcher.seen(msg)
            self._on_message(channel, msg)

        channels = KernelChannels(dict(info), on_message=on_message, is_alive=is_alive, on_death=watcher.lost)
        with self._conn.lock:
            self._conn.channels, self._conn.open = channels, False
        self.jobs.sweep_files()  # bounded at each start

    def open(self) -> None:
        """Accept code from now on (the kernel is ready)."""
        with self._conn.lock:
            self._conn.open = self._conn.channels is not None

    def abandon(
        self, status: ExecutionStatus, ending: HostEnding | None = None, kernel_lost: KernelState | None = None
    ) -> None:
        """Stop accepting code and end the running execution as ``status`` (safe on the IO thread);
        ``ending`` is why, ``kernel_lost`` says the kernel was lost under it (``dead`` or ``gone``)."""
        with self._conn.lock:
            self._conn.open = False
            self.cells.clear()
        self.jobs.abandon(status, ending, kernel_lost)

    def disconnect(self) -> None:
        """Close the channels (after ``abandon``)."""
        with self._conn.lock:
            channels, self._conn.channels, self._conn.open = self._conn.channels, None, False
        if channels is not None:
            channels.close()

    def send_interrupt_request(self) -> None:
        """``interrupt_request`` on control, for kernels whose spec asks for message interrupts."""
        channels = self._conn.require()
        channels.send("control", channels.new_msg("interrupt_request", {}))

    # -- messages from the kernel (IO thread) ------------------------------------------------------
    def _on_message(self, channel: str, msg: dict[str, Any]) -> None:
        if self.jobs.take(channel, msg):
            return
        kind = msg.get("msg_type")
        if channel == "iopub" and kind == "execute_input":
            self._outside_cell(msg)
            self.cells.began(msg)
        elif channel == "iopub" and kind == "status":
            self.cells.ended(msg)
        else:
            logger.debug("kernel %s message %s outside any execution dropped", channel, kind)

    def _outside_cell(self, msg: dict[str, Any]) -> None:
        """A cell another client ran (a console; the notebook of a joined kernel). Its code is not
        recorded, but the names it binds are what a re-run of the agent's cells lacks."""
        if msg.get("parent_header", {}).get("session") == self._conn.ours():
            return
        code = msg.get("content", {}).get("code")
        if isinstance(code, str) and code.strip():
            self.events.outside_cell(code)
