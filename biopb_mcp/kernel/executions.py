"""Execution records: one per submitted cell, holding its full output as an append-only transcript.

Every execution gets an id (``job-N``) even when it is never promoted, so that any output cut by
``max_output_chars`` can be paged by id and offset. The transcript is
append-only, so an offset stays valid while a background job keeps producing output.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biopb_mcp.kernel.lines import LineEditor
from biopb_mcp.kernel.output_files import Overflow
from biopb_mcp.kernel.states import FINISHED, ExecutionStatus, HostEnding, KernelState

MAX_TRANSCRIPT_BYTES = 32 * 1024 * 1024
"""Bytes of output one execution keeps in memory, counted at Python's cost for its text (1, 2
or 4 bytes a character, by its widest character); what follows goes to its overflow file."""

_JOIN_LIMIT = 1024 * 1024
"""Characters of a traceback joined in one piece; a bigger one is appended line by line."""

MAX_ERROR_VALUE_CHARS = 2000
"""Characters of an exception's message kept in the error record (the transcript, under its
bound, holds the traceback)."""

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def strip_ansi(text: str) -> str:
    """Remove ANSI colour/cursor escape sequences (IPython colours its tracebacks)."""
    return _ANSI_RE.sub("", text)


def char_width(text: str) -> int:
    """Bytes a character of ``text`` costs in memory: CPython stores a string at its widest
    character's size (1 for Latin-1, 2 for the rest of the BMP, 4 beyond: an emoji)."""
    if not text or text.isascii():
        return 1
    top = ord(max(text))
    return 1 if top < 0x100 else 2 if top < 0x10000 else 4


@dataclass(frozen=True)
class ForeignCell:
    """A cell another client runs in the kernel (the scientist's console or notebook), as seen on
    iopub: while it runs, the agent's code waits."""

    msg_id: str
    source: str
    """Where it came from, in a word: ``console`` or ``notebook``."""
    code: str
    """Its first line, bounded."""
    since: float
    """``time.monotonic()`` when it began."""


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
        tail: on a first page too long to show whole, the transcript's end from
            ``tail_offset``; the middle ``[end, tail_offset)`` is paged from ``next_offset``.
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
        dropped: output chars past the per-execution memory bound (not in ``output``).
        overflow_path: the file those chars were saved to, when they were.
        overflow_lost: how many of them could not be saved either.
        open_line: the line still being drawn (a progress bar), shown after a running
            execution's last page; not part of the transcript until a newline ends it.
        waiting_behind: the other client's cell this execution waits behind (not begun yet).
        note: why it ended as it did, in its own words (stdin, an interrupt before it began, a
            withdrawal); shown once it finished.
        kernel_lost: ``dead`` or ``gone`` when the kernel was lost under it (``gone``: a joined
            kernel that only its frontend can bring back), else None.
        ending: the host's facts when the host ended it (restart, shutdown, a lost kernel).
    """

    output: str = ""
    tail: str = ""
    tail_offset: int = 0
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
    overflow_path: Path | None = None
    overflow_lost: int = 0
    open_line: str = ""
    waiting_behind: ForeignCell | None = None
    note: str = ""
    kernel_lost: KernelState | None = None
    ending: HostEnding | None = None

    @property
    def done(self) -> bool:
        """True when the execution has finished (any terminal status)."""
        return self.status in FINISHED

    @property
    def truncated(self) -> bool:
        """True when output follows this page (the middle, when its tail is shown)."""
        return self.end < self.total_chars

    @property
    def middle(self) -> int:
        """Characters between this page and its tail that are not shown (0: no tail)."""
        return self.tail_offset - self.end if self.tail else 0


class Execution:
    """One submitted cell and everything it produced.

    Thread-safe: the host's reader thread appends while tool threads render. Callers treat it
    as opaque and pass it back to ``Jobs.wait/promote/render``; the read-only attributes
    ``job_id``, ``status``, ``promoted``, ``code`` and ``done`` (a ``threading.Event``) are
    safe to read.
    """

    def __init__(
        self,
        job_id: str,
        code: str,
        msg_id: str,
        *,
        max_bytes: int = MAX_TRANSCRIPT_BYTES,
        overflow: Overflow | None = None,
    ) -> None:
        self.job_id = job_id
        self.code = code
        self.msg_id = msg_id
        self.status = ExecutionStatus.RUNNING
        self.promoted = False
        self.started = time.monotonic()
        self.finished: float | None = None
        self.done = threading.Event()
        self.held = False
        """True while the request is kept here, unsent, because another client's cell runs:
        interrupt_kernel then withdraws it without touching that cell."""
        self.began = threading.Event()
        """Set once the kernel announced it is running this code (``execute_input``) or it ended:
        ipykernel ignores SIGINT while a request is still queued, so an interrupt must wait for it."""
        self.error: tuple[str, str, list[str]] | None = None
        self.note = ""
        """Why it ended as it did, in its own words (e.g. stdin is not offered)."""
        self.kernel_lost: KernelState | None = None
        """``dead`` or ``gone`` when the kernel was lost under it."""
        self.ending: HostEnding | None = None
        """The host's facts when the host ended it (a restart, a shutdown, a lost kernel)."""
        self.images: list[ImageRecord] = []
        self.inline_images = 0
        """How many of ``images`` hold their pixels in memory (the rest are files)."""
        self.inline_bytes = 0
        self._lock = threading.Lock()
        self._chunks: list[str] = []
        self._size = 0
        self._width = 1
        self._max_bytes = max_bytes
        self._overflow = overflow
        self._dropped = 0
        self._last_stream: str | None = None
        self._marker = ""
        """A stream switch's ``[stderr]`` line, written with the first text of that stream."""
        self._editors: dict[str, LineEditor] = {}
        """Per stream, the line a carriage return may still redraw."""
        self._joined: str | None = None
        self.reply_seen = False
        self.idle_seen = False
        self.reply_content: dict[str, Any] = {}

    # -- appending (reader thread) -------------------------------------------------------------
    @property
    def kept_bytes(self) -> int:
        """What this execution holds in memory: its transcript at its real cost, inline images
        and the error record."""
        error = sum(len(part) for part in self.error[:2]) if self.error else 0
        return self._size * self._width + self.inline_bytes + error

    def _append(self, text: str) -> None:
        """Add to the transcript while it fits ``max_bytes``; from the first text that does not,
        everything goes to the overflow file (so the two read in order)."""
        if not text:
            return
        if self._dropped == 0:
            width = max(self._width, char_width(text))
            room = self._max_bytes // width - self._size
            if room > 0:
                kept = text if len(text) <= room else text[:room]
                self._chunks.append(kept)
                self._size += len(kept)
                self._width = width
                self._joined = None
                text = text[len(kept) :]
            if not text:
                return
        self._dropped += len(text)
        if self._overflow is not None:
            self._overflow.write(text)

    def _commit(self, text: str) -> None:
        """Finished lines of the current stream: its marker first, when it switched."""
        if text:
            if self._marker:
                self._append(self._marker)
                self._marker = ""
            self._append(text)

    def _end_line(self) -> None:
        """Settle the line being drawn and start the next output on a line of its own."""
        editor = self._editors.get(self._last_stream or "")
        if editor is not None:
            self._commit(editor.settle())
        self._marker = ""
        if self._chunks and not self._chunks[-1].endswith("\n"):
            self._append("\n")

    def add_stream(self, name: str, text: str) -> None:
        """Append stdout/stderr text; a ``[stderr]``/``[stdout]`` marker line shows switches.

        A carriage return redraws the current line (a progress bar keeps only its last state),
        and a stream that brings no text after a switch leaves no marker.
        """
        with self._lock:
            if name != self._last_stream and (self._last_stream is not None or name != "stdout"):
                self._end_line()
                self._marker = f"[{name}]\n"
            self._last_stream = name
            self._commit(self._editors.setdefault(name, LineEditor()).feed(text))

    def add_text(self, text: str) -> None:
        """Append an execute_result or text-only display, on its own line."""
        with self._lock:
            self._end_line()
            self._append(text if text.endswith("\n") else text + "\n")
            self._last_stream = None if self._last_stream is None else "result"

    def add_error(self, ename: str, evalue: str, traceback: list[str]) -> None:
        """Record the cell's exception (the first one only: the reply repeats it); its ANSI-free
        traceback goes into the transcript, under its bound, and a short record is kept."""
        with self._lock:
            if self.error is not None:
                return
            self.error = (ename[:200], evalue[:MAX_ERROR_VALUE_CHARS], [])
            self._end_line()
            # line by line, without a joined copy: an exception's message may be huge
            lines = [strip_ansi(line) if "\x1b" in line else line for line in traceback]
            text = "\n".join(lines) if sum(map(len, lines)) <= _JOIN_LIMIT else None
            if text is not None:  # the common, small traceback: exactly as the kernel joined it
                self._append(text.strip("\n") + "\n")
            else:
                for line in lines:
                    self._append(line)
                    self._append("\n")
            if not any(ename in line for line in lines):
                self._append(f"{ename}: {evalue}\n")
            self._last_stream = None if self._last_stream is None else "error"

    def add_image(self, record_factory: Callable[[int, int], tuple[ImageRecord, str]]) -> None:
        """Append an image placeholder line; ``record_factory(index, offset)`` builds the record
        and its placeholder text (see ``rendering.image_factory``)."""
        with self._lock:
            self._end_line()
            record, line = record_factory(len(self.images) + 1, self._size)
            self.images.append(record)
            if record.data is not None:
                self.inline_images += 1
                self.inline_bytes += len(record.data)
            self._append(line + "\n")
            self._last_stream = None if self._last_stream is None else "image"

    def finish(
        self,
        status: ExecutionStatus | str,
        note: str = "",
        kernel_lost: KernelState | None = None,
        ending: HostEnding | None = None,
    ) -> bool:
        """Mark the execution finished; False when it had finished already (the first terminal
        status wins)."""
        with self._lock:
            if self.done.is_set():
                return False
            self.status = ExecutionStatus(status)
            for editor in self._editors.values():  # the last state of a line still being drawn
                self._commit(editor.flush())
            if self._overflow is not None:
                self._overflow.close()
            if note:
                self.note = note
            self.kernel_lost = kernel_lost
            self.ending = ending
            self.finished = time.monotonic()
        self.began.set()
        self.done.set()
        return True

    # -- reading (tool threads) -------------------------------------------------------------------
    def snapshot(self) -> tuple[str, int, list[ImageRecord]]:
        """The transcript so far, the number of chars dropped past the memory bound, the images."""
        with self._lock:
            if self._joined is None:
                self._joined = "".join(self._chunks)
                self._chunks = [self._joined] if self._joined else []
            return self._joined, self._dropped, list(self.images)

    def open_line(self) -> str:
        """The line still being drawn (with its stream's marker when it is the first text of a
        switch): shown after a running execution's output, not yet part of the transcript."""
        with self._lock:
            editor = self._editors.get(self._last_stream or "")
            line = editor.line if editor is not None else ""
            return self._marker + line if line else ""

    @property
    def overflow(self) -> Overflow | None:
        """Where output past the memory bound went (None: no file was offered)."""
        return self._overflow

    def elapsed(self) -> float:
        """Seconds since submission (until finish when finished)."""
        end = self.finished if self.finished is not None else time.monotonic()
        return end - self.started

    def __repr__(self) -> str:
        return f"<Execution {self.job_id} {self.status}>"
