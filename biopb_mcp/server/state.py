"""What the tools of one server share: settings, the docs store, the kernel host, the trace, the transport."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from biopb_mcp.config.settings import Settings
from biopb_mcp.docs.store import DocStore
from biopb_mcp.kernel import KernelHost
from biopb_mcp.server.presence import NewestNote
from biopb_mcp.server.trace import Tracer

if TYPE_CHECKING:
    from biopb_mcp.docs.store import WriteResult

__all__ = ["SERVER_NAME", "AppState", "StatusValue", "WriteNotifier"]

SERVER_NAME = "biopb-mcp"

StatusValue = str | bool | None
"""A fact a transport adds to server_status (a URL, whether auth is on, a file path)."""


class WriteNotifier(Protocol):
    """Tells the connected clients about a successful write_doc (the resources' notifier)."""

    async def after_write(self, result: WriteResult) -> None: ...


class AppState:
    """What the tools of one server share, built once by ``build_server`` and owned by it.

    ``settings`` is read-only: :meth:`reconfigure` is the one way to change it, so the kernel
    host, which holds the settings too, is always told.
    """

    def __init__(
        self,
        settings: Settings,
        store: DocStore,
        kernel: KernelHost,
        tracer: Tracer | None = None,
        transport: str = "in-process",
        notifier: WriteNotifier | None = None,
    ) -> None:
        self._settings = settings
        self.store = store
        """The docs store the doc tools, resources, prompts and completions read and write."""
        self.kernel = kernel
        """The kernel host the kernel and viewer tools drive."""
        self.tracer = tracer
        """Where each tool call is recorded (``--trace``, ``[server] trace``); None: not recorded."""
        self.transport = transport
        """``stdio``, ``http`` or ``in-process`` (tests, the bench): what the presence file and
        server_status report; set by the transport that serves this state."""
        self.notifier = notifier
        """Announces write_doc's changes to subscribers; set once the resources are installed
        (they need the MCP server, whose tools are registered with this state first)."""
        self.extra_status: dict[str, dict[str, StatusValue]] = {}
        """Sections a transport adds to server_status (``http``: its URL, auth, token files)."""
        self.at_exit: list[Callable[[], None]] = []
        """Run after the kernel is down, before the process leaves (e.g. remove the HTTP token file)."""
        self.presence_notes = NewestNote()
        """Writes what execute_code submitted into the presence file, off the call's path."""
        self._cancelled: list[str] = []
        self._cancelled_lock = threading.Lock()

    @property
    def settings(self) -> Settings:
        """The settings the tools act on (replaced by :meth:`reconfigure` only)."""
        return self._settings

    def reconfigure(self, settings: Settings) -> None:
        """Act on ``settings`` from now on, and have the kernel host start its next kernel with them.

        The store and the trace are built once from the settings and are not re-read: a reload
        changes only the keys the next kernel start reads.
        """
        self._settings = settings
        self.kernel.reconfigure(settings)

    def note_cancelled(self, job_id: str) -> None:
        """A call the client cancelled kept running as ``job_id``; the next answer must say so."""
        with self._cancelled_lock:
            self._cancelled.append(job_id)

    def take_cancelled(self) -> list[str]:
        """The jobs cancelled calls became since the last answer that named them."""
        with self._cancelled_lock:
            jobs, self._cancelled = self._cancelled, []
        return jobs
