"""The server's side of the kernel link: tell the ``%biopb`` magics who is here, obey their pause.

After each kernel start the server announces itself (pid, transport, whether it owns the kernel,
the session notebook); each execute_code notes what it submitted; leaving says so in the
announcement (or removes it, for a kernel that ends with the server). While the scientist has paused the agent (``%biopb pause`` in their frontend),
execute_code runs nothing and answers so, in text and in structured content.
"""

from __future__ import annotations

import datetime as _dt
import functools
import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcp.types import CallToolResult, TextContent

from biopb_mcp.kernel import Execution
from biopb_mcp.kernel.events import ExecutionObserver
from biopb_mcp.kernel.link import AgentPresence

if TYPE_CHECKING:
    from biopb_mcp.server.state import AppState

logger = logging.getLogger(__name__)

__all__ = ["NewestNote", "PresenceNotes", "announce", "note_submitted", "paused_result"]


def announce(state: AppState) -> None:
    """Write this server's presence for the kernel just started or joined (never fails a start)."""
    link = state.kernel.link
    if link is None:
        return
    status = state.kernel.status()
    recorder = state.kernel.recorder
    presence = AgentPresence(
        server_pid=os.getpid(),
        transport=state.transport,
        owns_kernel=state.kernel.owns_kernel,
        connection_file=str(status.connection_file or ""),
        session_notebook=str(recorder.path) if recorder is not None and recorder.path else None,
    )
    if link.leave not in state.at_exit:  # the host forgets the link when the kernel goes down
        state.at_exit.append(link.leave)
    try:
        link.announce(presence)
    except OSError as exc:  # the magics then say no agent is attached; the agent's work goes on
        logger.warning("could not write the presence file for %%biopb in %s: %s", link.runtime_dir, exc)


class NewestNote:
    """One daemon thread writing the newest note; a note superseded before its turn is dropped.

    A file replace can take tens of milliseconds on a busy disk (the filesystem flushes data
    replaced by rename): far more than execute_code's own overhead, so it never runs on the call.
    Each server's state owns one (``AppState.presence_notes``): its thread starts with a note and
    ends after ``idle_seconds`` without one, so a server that is gone leaves no thread behind.
    """

    def __init__(self, idle_seconds: float = 60.0) -> None:
        self._cond = threading.Condition()
        self._pending: Callable[[], None] | None = None
        self._thread: threading.Thread | None = None
        self._idle_seconds = idle_seconds

    def put(self, write: Callable[[], None]) -> None:
        with self._cond:
            self._pending = write
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="biopb-presence", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._pending is None:
                    self._cond.wait(self._idle_seconds)
                if self._pending is None:  # idle: the next put starts a new thread
                    self._thread = None
                    return
                write, self._pending = self._pending, None
            write()  # KernelLink.note_submitted never raises


def note_submitted(state: AppState, execution: Execution) -> None:
    """Record the code just submitted, for ``%biopb status`` (written off the call's path)."""
    link = state.kernel.link
    if link is not None:
        state.presence_notes.put(functools.partial(link.note_submitted, execution.job_id, execution.code))


class PresenceNotes(ExecutionObserver):
    """Subscribed to the kernel's execution events: each submitted execution is noted."""

    def __init__(self, state: AppState) -> None:
        self._state = state

    def submitted(self, ex: Execution) -> None:
        note_submitted(self._state, ex)


def paused_result(state: AppState) -> CallToolResult | None:
    """The answer to execute_code while the scientist has paused the agent; None when not paused."""
    link = state.kernel.link
    pause = link.paused() if link is not None else None
    if pause is None:
        return None
    since = _dt.datetime.fromtimestamp(pause.since).astimezone().isoformat(timespec="seconds")
    why = f" ({pause.reason})" if pause.reason else ""
    text = (
        f"Paused by the scientist since {since}{why}: nothing was run. They paused you from their "
        "notebook with %biopb pause; execute_code runs no code in their kernel until they type "
        "%biopb resume there. Tell the user what you want to run next and wait for them to resume."
    )
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
