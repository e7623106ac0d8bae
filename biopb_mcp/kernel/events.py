"""Execution events: what the client saw, told to whoever subscribed.

The session notebook and the scientist's presence file want to hear about executions, but the
client must not call up into them: it notifies an ``ExecutionEvents`` hub, and they subscribe an
``ExecutionObserver``. Calls go down the stack; news goes up only through here.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from biopb_mcp.kernel.executions import Execution

logger = logging.getLogger(__name__)

__all__ = ["ConnectionObserver", "ExecutionEvents", "ExecutionObserver"]


class ExecutionObserver:
    """Override what you need. Each is called on the thread that saw the event (often the IO
    thread that reads the kernel's messages) and must not block."""

    def kernel_ready(self, pid: int | None, description: str) -> None:
        """A kernel was started (or joined) and is ready for code."""

    def submitted(self, ex: Execution) -> None:
        """``ex`` was accepted; called before its request reaches the kernel."""

    def output(self, ex: Execution, msg_type: str, content: dict[str, Any]) -> None:
        """An iopub message of ``ex`` arrived (before the execution takes it in)."""

    def finished(self, ex: Execution) -> None:
        """``ex`` reached its terminal status (once)."""

    def outside_cell(self, code: str) -> None:
        """Another client (a console, the notebook of a joined kernel) ran ``code``."""


class ConnectionObserver:
    """What the IO thread tells about the connection itself (the host listens: a joined kernel is
    recognised by its messages, a lost kernel changes the host's state). Called on the IO thread;
    must not block."""

    def seen(self, msg: dict[str, Any]) -> None:
        """Any message not claimed by a waiting call, before it is dispatched."""

    def lost(self) -> None:
        """The kernel went away without being asked (once)."""


class ExecutionEvents(ExecutionObserver):
    """The observers of one client, told in the order they subscribed.

    An observer that raises is logged and the others still hear: what observers do (recording,
    presence notes) is best effort, and the execution's result stands.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._observers: tuple[ExecutionObserver, ...] = ()

    def subscribe(self, observer: ExecutionObserver) -> None:
        """Hear every event from now on."""
        with self._lock:
            self._observers = (*self._observers, observer)

    def unsubscribe(self, observer: ExecutionObserver) -> None:
        """Stop hearing events (unknown observers are ignored)."""
        with self._lock:
            self._observers = tuple(o for o in self._observers if o is not observer)

    def _each(self, event: str, *args: Any) -> None:
        for observer in self._observers:  # a tuple swapped whole: safe to read without the lock
            try:
                getattr(observer, event)(*args)
            except Exception:
                logger.exception("%s observer %r failed", event, observer)

    def kernel_ready(self, pid: int | None, description: str) -> None:
        self._each("kernel_ready", pid, description)

    def submitted(self, ex: Execution) -> None:
        self._each("submitted", ex)

    def output(self, ex: Execution, msg_type: str, content: dict[str, Any]) -> None:
        if self._observers:  # per message: skip the call when nobody listens
            self._each("output", ex, msg_type, content)

    def finished(self, ex: Execution) -> None:
        self._each("finished", ex)

    def outside_cell(self, code: str) -> None:
        self._each("outside_cell", code)
