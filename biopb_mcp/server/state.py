"""What the tools of one server share: settings, the docs store, the kernel host, the trace, the transport."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from biopb_mcp.config.settings import Settings
from biopb_mcp.docs.store import DocStore
from biopb_mcp.kernel import KernelHost
from biopb_mcp.server.trace import Tracer

__all__ = ["SERVER_NAME", "AppState"]

SERVER_NAME = "biopb-mcp"


@dataclass
class AppState:
    """What the tools share: settings, the docs store, the kernel host, the trace, the transport."""

    settings: Settings
    store: DocStore
    kernel: KernelHost
    tracer: Tracer | None = None
    transport: str = "in-process"
    notifier: Any = None
    extra_status: dict[str, Any] = field(default_factory=dict)
    at_exit: list[Callable[[], None]] = field(default_factory=list)
    """Run after the kernel is down, before the process leaves (e.g. remove the HTTP token file)."""
    _cancelled: list[str] = field(default_factory=list)
    _cancelled_lock: threading.Lock = field(default_factory=threading.Lock)

    def note_cancelled(self, job_id: str) -> None:
        """A call the client cancelled kept running as ``job_id``; the next answer must say so."""
        with self._cancelled_lock:
            self._cancelled.append(job_id)

    def take_cancelled(self) -> list[str]:
        """The jobs cancelled calls became since the last answer that named them."""
        with self._cancelled_lock:
            jobs, self._cancelled = self._cancelled, []
        return jobs
