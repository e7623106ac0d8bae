"""Execution records: one per submitted cell, holding its full output as an append-only transcript.

Every execution gets an id (``job-N``) even when it is never promoted, so that any output cut by
``max_output_chars`` can be paged by id and offset. The transcript is
append-only, so an offset stays valid while a background job keeps producing output.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biopb_mcp.kernel.states import FINISHED, ExecutionStatus, KernelState

MAX_TRANSCRIPT_CHARS = 64 * 1024 * 1024
"""Characters of output kept per execution; beyond this the output is dropped with a note."""

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def strip_ansi(text: str) -> str:
    """Remove ANSI colour/cursor escape sequences (IPython colours its tracebacks)."""
    return _ANSI_RE.sub("", text)


@dataclass
class ImageRecord:
    """One ``image/png`` display: kept inline when small enough, else saved to ``path``."""

    index: int
    nbytes: int
    offset: int
    """Position of this image's placeholder line in the transcript (for paging)."""
    data: bytes | None = None
    path: Path | None = None
    size: tuple[int, int] | None = None


@dataclass
class Rendered:
    """One page of an execution, as facts: the server turns them into what the agent reads.

    Attributes:
        output: the transcript slice ``[offset, end)``; the very last page loses its final
            newline, so pages concatenate to the transcript.
        images: PNG bytes of the images whose placeholders fall inside this page, each at
            most ``max_image_bytes``.
        job_id: the execution's id (``job-N``).
        status: where the execution is (``running`` until it finished).
        offset: where this page starts in the full transcript (the requested offset, clamped).
        end: where this page ends.
        requested_offset: the offset asked for; past ``total_chars`` it shows nothing.
        next_offset: where the next page starts (more output, or a job still running), else None.
        total_chars: transcript length so far.
        header: whether a status line belongs above the page (promoted, unfinished, dead or
            aborted executions, and any page but the first).
        elapsed: seconds the execution ran (so far, while running).
        dropped: output chars dropped past the per-execution memory bound.
        note: why it ended as it did (restart, kernel death with its log tail, stdin); shown
            once it finished.
        kernel_lost: ``dead`` or ``gone`` when the kernel was lost under it (``gone``: a joined
            kernel that only its frontend can bring back), else None.
    """

    output: str = ""
    images: list[bytes] = field(default_factory=list)
    job_id: str = ""
    status: ExecutionStatus = ExecutionStatus.OK
    offset: int = 0
    end: int = 0
    requested_offset: int = 0
    next_offset: int | None = None
    total_chars: int = 0
    header: bool = False
    elapsed: float = 0.0
    dropped: int = 0
    note: str = ""
    kernel_lost: KernelState | None = None

    @property
    def done(self) -> bool:
        """True when the execution has finished (any terminal status)."""
        return self.status in FINISHED

    @property
    def truncated(self) -> bool:
        """True when output follows this page."""
        return self.end < self.total_chars


class Execution:
    """One submitted cell and everything it produced.

    Thread-safe: the host's reader thread appends while tool threads render. Callers treat it
    as opaque and pass it back to ``KernelHost.wait/promote/render``; the read-only attributes
    ``job_id``, ``status``, ``promoted``, ``code`` and ``done`` (a ``threading.Event``) are
    safe to read.
    """

    def __init__(self, job_id: str, code: str, msg_id: str) -> None:
        self.job_id = job_id
        self.code = code
        self.msg_id = msg_id
        self.status = ExecutionStatus.RUNNING
        self.promoted = False
        self.started = time.monotonic()
        self.finished: float | None = None
        self.done = threading.Event()
        self.began = threading.Event()
        """Set once the kernel announced it is running this code (``execute_input``) or it ended:
        ipykernel ignores SIGINT while a request is still queued, so an interrupt must wait for it."""
        self.error: tuple[str, str, list[str]] | None = None
        self.note = ""
        """Why it ended as it did (e.g. why the kernel died, with its log tail)."""
        self.kernel_lost: KernelState | None = None
        """``dead`` or ``gone`` when the kernel was lost under it."""
        self.images: list[ImageRecord] = []
        self.inline_images = 0
        """How many of ``images`` hold their pixels in memory (the rest are files)."""
        self.inline_bytes = 0
        self._lock = threading.Lock()
        self._chunks: list[str] = []
        self._size = 0
        self._dropped = 0
        self._last_stream: str | None = None
        self._joined: str | None = None
        self.reply_seen = False
        self.idle_seen = False
        self.reply_content: dict[str, Any] = {}
        self.record: Any = None
        """The session notebook's output collector for this execution, when recording."""
        self.on_finish: Callable[[Execution], None] | None = None
        """Called once after the execution finished (e.g. to record it); must not block."""

    # -- appending (reader thread) -------------------------------------------------------------
    def _append(self, text: str) -> None:
        if not text:
            return
        room = MAX_TRANSCRIPT_CHARS - self._size
        if room <= 0:
            self._dropped += len(text)
            return
        if len(text) > room:
            self._dropped += len(text) - room
            text = text[:room]
        self._chunks.append(text)
        self._size += len(text)
        self._joined = None

    def _newline(self) -> None:
        if self._chunks and not self._chunks[-1].endswith("\n"):
            self._append("\n")

    def add_stream(self, name: str, text: str) -> None:
        """Append stdout/stderr text; a ``[stderr]``/``[stdout]`` marker line shows switches."""
        with self._lock:
            if name != self._last_stream and (self._last_stream is not None or name != "stdout"):
                self._newline()
                self._append(f"[{name}]\n")
            self._last_stream = name
            self._append(text)

    def add_text(self, text: str) -> None:
        """Append an execute_result or text-only display, on its own line."""
        with self._lock:
            self._newline()
            self._append(text if text.endswith("\n") else text + "\n")
            self._last_stream = None if self._last_stream is None else "result"

    def add_error(self, ename: str, evalue: str, traceback: list[str]) -> None:
        """Record the cell's exception; its ANSI-free traceback goes into the transcript."""
        tb = [strip_ansi(line) for line in traceback]
        with self._lock:
            self.error = (ename, evalue, tb)
            self._newline()
            body = "\n".join(tb).strip("\n") if tb else ""
            if f"{ename}" not in body:
                body = (body + "\n" if body else "") + f"{ename}: {evalue}"
            self._append(body + "\n")
            self._last_stream = None if self._last_stream is None else "error"

    def add_image(self, record_factory: Callable[[int, int], tuple[ImageRecord, str]]) -> None:
        """Append an image placeholder line; ``record_factory(index, offset)`` builds the record
        and its placeholder text (see ``rendering.image_factory``)."""
        with self._lock:
            self._newline()
            record, line = record_factory(len(self.images) + 1, self._size)
            self.images.append(record)
            if record.data is not None:
                self.inline_images += 1
                self.inline_bytes += len(record.data)
            self._append(line + "\n")
            self._last_stream = None if self._last_stream is None else "image"

    def finish(self, status: ExecutionStatus | str, note: str = "", kernel_lost: KernelState | None = None) -> None:
        """Mark the execution finished (idempotent: the first terminal status wins)."""
        with self._lock:
            if self.done.is_set():
                return
            self.status = ExecutionStatus(status)
            if note:
                self.note = note
            self.kernel_lost = kernel_lost
            self.finished = time.monotonic()
        self.began.set()
        self.done.set()
        if self.on_finish is not None:
            try:
                self.on_finish(self)
            except Exception:  # recording is best effort; the execution's result stands
                logging.getLogger(__name__).exception("on_finish hook of %s failed", self.job_id)

    # -- reading (tool threads) -------------------------------------------------------------------
    def snapshot(self) -> tuple[str, int, list[ImageRecord]]:
        """The transcript so far, the number of chars dropped past the memory bound, the images."""
        with self._lock:
            if self._joined is None:
                self._joined = "".join(self._chunks)
                self._chunks = [self._joined] if self._joined else []
            return self._joined, self._dropped, list(self.images)

    def elapsed(self) -> float:
        """Seconds since submission (until finish when finished)."""
        end = self.finished if self.finished is not None else time.monotonic()
        return end - self.started

    def __repr__(self) -> str:
        return f"<Execution {self.job_id} {self.status}>"
