"""The session notebook: what the agent ran, with its outputs, as an nbformat 4 notebook.

One notebook per kernel start. Each finished execution becomes a code cell holding its outputs
as the kernel sent them (streams, results, errors, images at full size); doc reads and writes
become short markdown cells. The scientist opens it in JupyterLab or VS Code, re-runs it with
``jupyter execute``, or pastes from it into a lab notebook; tools that want the agent's history
read it back with ``nbformat.read`` (each code cell carries ``metadata.biopb``: job id, status,
times).

A re-run happens in a plain kernel, so the notebook says what that kernel lacks: its first code
cell (the *setup cell*) moves to the agent's working directory, loads the kernel plugins (such as
``dask_client``) and names what someone typed outside the agent's cells that the agent's cells
then read; a cell that failed is tagged ``raises-exception`` (the re-run goes on past it), and a
cell that was interrupted or aborted is tagged ``skip-execution`` (the re-run does not start
again what the agent stopped).

The file is appended to, never rewritten (see :mod:`biopb_mcp.fs.notebook_file`): a call's cost does
not grow with the session, the writer holds one cell at a time, never the notebook, and a crash
(even SIGKILL) leaves a valid notebook with every cell completed before it. Writing happens on one
writer thread so no tool call waits for the disk.

The writer emits nbformat 4.5 JSON itself: nbformat's validating builders cost milliseconds a
cell. Reading back goes through nbformat (``read_session``), which validates what was written.

This module knows nothing of MCP or of how the kernel is driven: it takes plain strings and
Jupyter message contents.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import contextlib
import datetime as _dt
import errno
import itertools
import json
import logging
import os
import queue
import re
import stat
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biopb_mcp.fs.notebook_file import SLOT_BYTES, NotebookFile, mend_torn
from biopb_mcp.kernel.cell_names import cell_names
from biopb_mcp.kernel.lines import collapse
from biopb_mcp.kernel.states import HostEnding, KernelState

logger = logging.getLogger(__name__)

__all__ = ["KernelSetup", "OutputCollector", "SessionRecorder", "agent_cells", "image_label", "read_session"]

NBFORMAT_MINOR = 5
"""nbformat 4.5: cells carry an ``id``."""

MAX_IMAGE_CHARS_PER_CELL = 40 * 1024 * 1024
"""Base64 characters of images kept per cell (about 30 MB of PNG); later images become a note."""

CELL_BUDGET_OUTPUTS = 10
"""Text kept per cell, in units of ``max_output_chars`` (each stream or display gets one unit)."""

MAX_SESSION_BYTES = 128 * 1024 * 1024
"""Size of one notebook past which cells are still recorded (code, status) but without outputs:
a notebook much bigger than this no longer opens comfortably in JupyterLab."""

NOTE_MAX_CHARS = 10_000
"""Most characters a markdown note (a doc read or write) keeps."""

MAX_EARLY_CELLS = 200
"""Doc notes kept from before the first kernel start (they open its notebook)."""

MAX_TRACKED_NAMES = 10_000
"""Names whose last binder (the agent or someone else) is tracked (a notebook it joined may define many)."""

_AMBIENT = frozenset(dir(builtins)) | {
    "get_ipython",
    "display",
    "In",
    "Out",
    "exit",
    "quit",
    "_",
    "__",
    "___",
    "_i",
    "_ii",
    "_iii",
    "_ih",
    "_oh",
    "_dh",
    "show",
    "dask_client",
}
"""Names any IPython kernel (and the built-in plugins, which the setup cell loads) has."""

_HISTORY_NAME = re.compile(r"_i?[0-9]+")

SKIPPED_ON_RERUN = frozenset({"interrupted", "aborted", "dead"})
"""Statuses of cells that did not finish: a re-run must not start them again (a job the agent
stopped may take all of the machine's memory)."""

_OUTPUT_KINDS = frozenset({"stream", "execute_result", "display_data", "error", "clear_output"})

_numbers = itertools.count(1)
"""Numbers the notebooks of this process: two recorders started in one second never share a name."""


def _iso(stamp: float) -> str:
    """Local time with offset; formatted on the writer thread (callers only take ``time.time()``)."""
    return _dt.datetime.fromtimestamp(stamp, _dt.UTC).astimezone().isoformat(timespec="seconds")


def _cell_id() -> str:
    return uuid.uuid4().hex[:12]


def _truncated(text: str, room: int) -> tuple[str, int]:
    """``text`` cut to ``room`` characters plus a note; and how many characters were cut."""
    if len(text) <= room:
        return text, 0
    cut = len(text) - max(room, 0)
    note = f"\n[biopb-mcp: {cut} more characters of this output are not recorded in the notebook]\n"
    return text[: max(room, 0)] + note, cut


def image_label(data: dict[str, Any]) -> str | None:
    """``[image 556×413]`` for a display bundle holding a PNG or JPEG; None for one without.

    What a text-only view shows instead of the bundle's ``text/plain``, which for an image is
    often an object's repr (``<PIL.PngImagePlugin.PngImageFile image mode=RGBA …>``).
    """
    for mime in ("image/png", "image/jpeg"):
        value = data.get(mime)
        if not isinstance(value, str):
            continue
        try:
            head = base64.b64decode(value[:64] + "=" * (-len(value[:64]) % 4))
        except (binascii.Error, ValueError):
            return "[image]"
        size = _png_size(head) if mime == "image/png" else None
        return f"[image {size[0]}×{size[1]}]" if size else "[image]"
    return None


def _png_size(head: bytes) -> tuple[int, int] | None:
    """(width, height) from the IHDR chunk at the start of a PNG."""
    if len(head) >= 24 and head.startswith(b"\x89PNG\r\n\x1a\n") and head[12:16] == b"IHDR":
        return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    return None


class OutputCollector:
    """The outputs of one execution in nbformat shape, built as the kernel's messages arrive.

    Consecutive stream messages of one name merge into one output, ``clear_output`` clears, and
    text beyond ``max_chars`` per stream, display or error (``CELL_BUDGET_OUTPUTS`` times that
    per cell; images beyond ``MAX_IMAGE_CHARS_PER_CELL``) is replaced by a note, so memory stays
    bounded however much a job prints or however long an exception's message, and a warning on
    stderr survives a flood on stdout. Called from one thread (the one that receives kernel
    messages); ``outputs()`` is read after the execution finished.
    """

    def __init__(self, max_chars: int) -> None:
        self._outputs: list[dict[str, Any]] = []
        self._max = max_chars
        self._room = CELL_BUDGET_OUTPUTS * max_chars
        self._stream_room: dict[str, int] = {}
        self._image_room = MAX_IMAGE_CHARS_PER_CELL
        self._clear_on_next = False
        self._stream_full: set[str] = set()
        self.execution_count: int | None = None

    def add(self, msg_type: str, content: dict[str, Any]) -> None:
        """Take one iopub message (other types are ignored)."""
        if msg_type not in _OUTPUT_KINDS:
            return
        if msg_type == "clear_output":
            if content.get("wait"):
                self._clear_on_next = True
            else:
                self._outputs.clear()
            return
        if self._clear_on_next:
            self._outputs.clear()
            self._clear_on_next = False
        if msg_type == "stream":
            self._add_stream(str(content.get("name", "stdout")), str(content.get("text", "")))
        elif msg_type == "error":
            self._outputs.append(self._bounded_error(content))
        else:
            data = self._bounded_data(content.get("data", {}))
            out: dict[str, Any] = {
                "output_type": msg_type,
                "data": data,
                "metadata": dict(content.get("metadata", {}) or {}),
            }
            if msg_type == "execute_result":
                count = content.get("execution_count")
                out["execution_count"] = count if isinstance(count, int) else None
            self._outputs.append(out)

    def _add_stream(self, name: str, text: str) -> None:
        if name in self._stream_full:
            return
        last = self._outputs[-1] if self._outputs else None
        room = min(self._stream_room.get(name, self._max), self._room)
        text, cut = _truncated(text, room)
        used = room if cut else len(text)
        self._stream_room[name] = self._stream_room.get(name, self._max) - used
        self._room -= used
        if cut:
            self._stream_full.add(name)
        # a progress bar's redraws (carriage returns) keep only the line's last state
        if last is not None and last["output_type"] == "stream" and last["name"] == name:
            if "\r" in text:
                start = last["text"].rfind("\n") + 1  # only the last line can be redrawn
                last["text"] = last["text"][:start] + collapse(last["text"][start:] + text)
            else:
                last["text"] += text
        else:
            self._outputs.append({"output_type": "stream", "name": name, "text": collapse(text)})

    def _bounded_error(self, content: dict[str, Any]) -> dict[str, Any]:
        """An error output cut like a stream: the message and the traceback share one unit, the
        traceback keeping its last frames (where the exception was raised, and its message)."""
        room = min(self._max, max(self._room, 0))
        evalue, cut = _truncated(str(content.get("evalue", "")), room // 2)
        left = room - (len(evalue) if not cut else room // 2)
        kept: list[str] = []
        dropped = 0
        for line in reversed([str(line) for line in content.get("traceback", [])]):
            if left <= 0:
                dropped += len(line)
                continue
            piece, lost = _truncated(line, left)
            kept.append(piece)
            dropped += lost
            left -= len(line) - lost
        kept.reverse()
        if dropped:
            kept.insert(0, f"[biopb-mcp: {dropped} characters of this traceback are not recorded in the notebook]")
        self._room -= room - max(left, 0)
        return {
            "output_type": "error",
            "ename": str(content.get("ename", ""))[:200],
            "evalue": evalue,
            "traceback": kept,
        }

    def _bounded_data(self, data: dict[str, Any]) -> dict[str, Any]:
        """A display's mime bundle with oversized entries replaced by a note in text/plain."""
        kept: dict[str, Any] = {}
        notes: list[str] = []
        for mime, value in data.items():
            if mime.startswith("image/") and isinstance(value, (str, memoryview)) and not mime.endswith("+xml"):
                if len(value) > self._image_room:
                    notes.append(
                        f"[biopb-mcp: a {mime} image of {len(value) * 3 // 4} bytes is not "
                        "recorded in the notebook (size cap per cell)]"
                    )
                    continue
                self._image_room -= len(value)
                kept[mime] = value if isinstance(value, str) else bytes(value).decode("ascii", "replace")
            elif isinstance(value, str):
                room = min(self._max, self._room)
                text, cut = _truncated(value, room)
                self._room -= room if cut else len(text)
                kept[mime] = text
            else:  # JSON mime types: kept as sent, counted by their size
                size = len(json.dumps(value, default=str))
                if size > min(self._max, self._room):
                    notes.append(f"[biopb-mcp: {mime} output of {size} characters not recorded]")
                    continue
                self._room -= size
                kept[mime] = value
        if notes:
            kept["text/plain"] = "\n".join([str(kept.get("text/plain", "")).rstrip("\n"), *notes]).strip("\n")
        return kept

    def outputs(self) -> list[dict[str, Any]]:
        """The outputs in nbformat 4 shape."""
        return [dict(o) for o in self._outputs]


@dataclass(frozen=True)
class KernelSetup:
    """What the agent's kernel had before its first cell that a plain kernel lacks: the facts the
    setup cell is written from."""

    cwd: str | None = None
    """Where the kernel started (relative paths in the agent's cells start there)."""
    plugins: tuple[str, ...] = ()
    """What the kernel plugins add, as a reader should see it (``dask_client (built in)``)."""
    load: dict[str, str] | None = None
    """Keyword arguments of ``biopb_mcp.kernel.replay.load_plugins``, which loads the same
    plugins in a re-run; None when the agent's kernel loaded none."""
    joined: str | None = None
    """The connection file of a kernel the agent joined instead of starting one."""


@dataclass
class _Book:
    """The notebook being written and what its setup cell says (writer thread only)."""

    file: NotebookFile
    setup: KernelSetup
    used: set[str] = field(default_factory=set)
    """Names from outside the agent's cells that its cells read (the setup cell lists them)."""
    capped: bool = False


class SessionRecorder:
    """Writes the session notebooks into ``directory``; thread-safe, never raises into a caller.

    Args:
        directory: where the notebooks go (created on first write, 0700; the files are 0600).
        max_output_chars: text kept per output; the rest is replaced by a note.
        max_session_bytes: size of one notebook past which cells are recorded without outputs.

    A failure to write (disk full, unwritable directory) is logged and kept in ``error``; the
    session goes on unrecorded rather than failing the agent's calls.
    """

    def __init__(
        self,
        directory: Path,
        *,
        max_output_chars: int = 100_000,
        max_session_bytes: int = MAX_SESSION_BYTES,
        about: Callable[[int | None, str], str] | None = None,
        note_of: Callable[[str, HostEnding | None, KernelState | None], str] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.about = about or (lambda pid, desc: f"Kernel pid {pid}, {desc}.")
        """The notebook's opening line from the kernel's pid and description (the server passes
        its wording in; the kernel side states only the facts)."""
        self.note_of = note_of or (lambda note, ending, lost: note)
        """A cell's note from why its execution ended (its own note, the host's ending, the kernel
        lost): the server passes its wording in, as for ``about``."""
        self.max_output_chars = max_output_chars
        self.max_session_bytes = max_session_bytes
        self.error: str | None = None
        self._path: Path | None = None
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[str, Any] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._written = threading.Condition()
        self._done_seq = 0
        self._seq = 0
        # writer thread only:
        self._book: _Book | None = None
        self._early: list[bytes] = []
        """Doc notes made before the first kernel start: they open its notebook."""
        self._bound_by: dict[str, bool] = {}
        """Per global name of this kernel, whether the agent's cells (True) or someone else's bound
        it last; filled once someone else ran a cell, or from the start in a joined kernel."""
        self._mended = False

    @property
    def path(self) -> Path | None:
        """The current notebook (None before the first kernel start)."""
        return self._path

    def collector(self) -> OutputCollector:
        """A fresh collector for one execution's outputs."""
        return OutputCollector(self.max_output_chars)

    # -- events (any thread; cheap) ----------------------------------------------------------------
    def start_notebook(
        self, *, kernel_name: str, display_name: str, about: str, setup: KernelSetup | None = None
    ) -> Path:
        """Begin a new notebook for a kernel that just started (or was joined); returns its path.

        The previous notebook, if any, gets a closing markdown cell pointing to the new one, and
        the new one opens with a cell pointing back, so a restart reads as one linked session.
        """
        with self._lock:
            stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
            path = self.directory / f"session-{stamp}-{os.getpid()}-{next(_numbers)}.ipynb"
            previous, self._path = self._path, path
        self._put("new", (path, previous, kernel_name, display_name, about, setup or KernelSetup(), time.time()))
        return path

    def code_cell(self, code: str, collector: OutputCollector | None, meta: dict[str, Any]) -> None:
        """Record one finished execution (``meta`` goes to ``metadata.biopb``)."""
        self._put("code", (code, collector, dict(meta), time.time()))

    def markdown(self, text: str) -> None:
        """Record a short note (a doc read or write) as a markdown cell, cut to
        :data:`NOTE_MAX_CHARS`: a write's note quotes its diff, and before the kernel starts the
        notes wait in memory, so an unbounded note made every edit of a big doc stay there (the
        doc's history keeps every text)."""
        room = min(self.max_output_chars, NOTE_MAX_CHARS)
        if len(text) > room:
            text = _truncated(text, room)[0]
        self._put("markdown", (text, time.time()))

    def outside_code(self, code: str) -> None:
        """Note a cell someone else ran in the kernel (a console, the notebook the agent joined):
        its code is not recorded, only the names it binds, for the setup cell."""
        self._put("outside", code)

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything queued so far is on disk; False on timeout."""
        with self._lock:
            target = self._seq
        with self._written:
            return self._written.wait_for(lambda: self._done_seq >= target, timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued, then stop the writer thread (which closes the notebook)."""
        self.flush(timeout)
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout)

    def _put(self, kind: str, payload: Any) -> None:
        with self._lock:
            self._seq += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="biopb-notebook", daemon=True)
                self._thread.start()
            self._queue.put((kind, payload))

    # -- writer thread -----------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while True:  # take everything already queued: one write per burst
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = False
            handled = 0
            pending: list[bytes] = []
            for event in batch:
                if event is None:
                    stop = True
                    continue
                handled += 1
                try:
                    self._apply(event, pending)
                except Exception as exc:  # a bad payload must not kill the writer
                    logger.exception("session notebook: could not record an event")
                    self.error = f"{type(exc).__name__}: {exc}"
            self._append(pending)
            if stop:
                self._close_book()
            with self._written:
                self._done_seq += handled
                self._written.notify_all()
            if stop:
                return

    def _apply(self, event: tuple[str, Any], pending: list[bytes]) -> None:
        kind, payload = event
        if kind == "new":
            path, previous, kernel_name, display_name, about, setup, stamp = payload
            when = _iso(stamp)
            if self._book is not None and self._book.file.path == previous:
                pending.append(_dump(_markdown_cell(f"*Kernel restarted {when}; the session continues in `{path}`.*")))
            self._append(pending)
            pending.clear()
            self._close_book()
            self._bound_by.clear()
            self._open_book(path, previous, kernel_name, display_name, about, setup, when)
        elif kind == "code":
            self._code(pending, *payload)
        elif kind == "outside":
            self._bind(cell_names(payload).binds, by_agent=False)
        else:
            text, stamp = payload
            cell = _markdown_cell(text)
            cell["metadata"] = {"biopb": {"time": _iso(stamp)}}
            if self._book is None:  # the agent read docs before starting the kernel: keep for the first
                if len(self._early) < MAX_EARLY_CELLS:
                    self._early.append(_dump(cell))
                return
            pending.append(_dump(cell))

    def _code(
        self, pending: list[bytes], code: str, collector: OutputCollector | None, meta: dict[str, Any], stamp: float
    ) -> None:
        book = self._book
        if book is None:  # code runs only in a started kernel; nothing to attach it to
            return
        outputs = collector.outputs() if collector is not None else []
        count = collector.execution_count if collector is not None else None
        for out in outputs:
            if out["output_type"] == "execute_result" and out.get("execution_count") is None:
                out["execution_count"] = count
        meta.setdefault("finished", _iso(stamp))
        tags: list[str] = []
        source = code
        status = str(meta.get("status", ""))
        if status in SKIPPED_ON_RERUN:
            tags.append("skip-execution")
            source = (
                f"# biopb-mcp: {status} in the agent's session; a re-run skips this cell (tag skip-execution)\n{code}"
            )
        elif status == "error":
            tags.append("raises-exception")
        used = self._outside_reads(book, code)
        if used:
            meta["outside_names"] = sorted(used)
            if "raises-exception" not in tags and "skip-execution" not in tags:
                tags.append("raises-exception")
        cell: dict[str, Any] = {
            "cell_type": "code",
            "id": _cell_id(),
            "execution_count": count,
            "metadata": {"biopb": meta, **({"tags": tags} if tags else {})},
            "source": source,
            "outputs": outputs,
        }
        data = _dump(cell)
        if book.file.size + sum(len(p) + 2 for p in pending) + len(data) > self.max_session_bytes:
            if not book.capped:
                book.capped = True
                pending.append(
                    _dump(
                        _markdown_cell(
                            f"*This notebook reached its size cap ({self.max_session_bytes // (1024 * 1024)} MB): "
                            "later cells are recorded without their outputs.*"
                        )
                    )
                )
            cell["outputs"] = []
            meta["outputs_dropped"] = True
            data = _dump(cell)
        pending.append(data)

    def _bind(self, names: frozenset[str], *, by_agent: bool) -> None:
        for name in names:
            if name in self._bound_by or len(self._bound_by) < MAX_TRACKED_NAMES:
                self._bound_by[name] = by_agent

    def _outside_reads(self, book: _Book, code: str) -> set[str]:
        """Names the agent's ``code`` reads that came from outside its cells (someone else bound
        them last; in a kernel it joined, also what was there before it came). The setup cell is
        updated when one is new. An agent alone in a kernel it started costs nothing here (no parse)."""
        joined = book.setup.joined is not None
        if not joined and not self._bound_by:
            return set()
        names = cell_names(code)
        used = {n for n in names.free if not self._bound_by.get(n, not joined or _ambient(n))}
        self._bind(names.binds, by_agent=True)
        if used - book.used:
            book.used |= used
            with contextlib.suppress(OSError):  # the old setup cell stays: still a valid notebook
                book.file.write_slot(_setup_slot(book.setup, book.used))
        return used

    def _open_book(
        self,
        path: Path,
        previous: Path | None,
        kernel_name: str,
        display_name: str,
        about: str,
        setup: KernelSetup,
        when: str,
    ) -> None:
        """Create the notebook (heading, setup cell, early notes) and keep it open for appends."""
        if not self._mended:
            self._mended = True
            for mended in mend_torn(self.directory):
                logger.warning("session notebook %s was left torn by a killed server: mended", mended)
        head = json.dumps(
            {
                "metadata": {
                    "kernelspec": {"name": kernel_name, "display_name": display_name, "language": "python"},
                    "language_info": {"name": "python"},
                    "biopb": {"started": when, **({"joined": setup.joined} if setup.joined else {})},
                },
                "nbformat": 4,
                "nbformat_minor": NBFORMAT_MINOR,
            },
            ensure_ascii=False,
        )
        title = f"joined kernel `{Path(setup.joined).name}`" if setup.joined else "kernel started"
        lines = [f"# Agent session, {title} {when}", "", about]
        if previous is not None:
            lines += [
                "",
                (
                    f"Continues the session recorded in `{previous}` (the kernel was "
                    "restarted there: the namespace starts empty here)."
                ),
            ]
        early, self._early = self._early, []
        try:
            # 0700/0600 like the logs: the notebook holds the session's code and outputs
            file = NotebookFile.create(
                self.directory,
                path.name,
                (head[:-1] + ',\n "cells": [\n').encode(),
                _dump(_markdown_cell("\n".join(lines))),
                _setup_slot(setup, set()),
                early,
            )
        except OSError as exc:
            self._failed(path, exc)
            return
        self._book = _Book(file, setup)
        self.error = None

    def _append(self, cells: list[bytes]) -> None:
        book = self._book
        if book is None or not cells:
            return
        try:
            book.file.append(cells)
        except OSError as exc:  # disk full mid-write: the notebook stays as it was before
            self._failed(book.file.path, exc)

    def _close_book(self) -> None:
        book, self._book = self._book, None
        if book is not None:
            book.file.close()

    def _failed(self, path: Path, exc: OSError) -> None:
        if self.error is None:
            logger.error("session notebook %s could not be written: %s", path, exc)
        self.error = f"cannot write {path}: {exc.strerror or exc}"


def _setup_slot(setup: KernelSetup, used: set[str]) -> bytes:
    """The setup cell, padded to exactly ``SLOT_BYTES``: the names it lists are cut to fit."""
    names = sorted(used)
    for shown in (len(names), 40, 10, 0):
        data = _dump(_setup_cell(setup, names[:shown], len(names) - min(shown, len(names))), ascii_only=True)
        if len(data) <= SLOT_BYTES:
            return data + b" " * (SLOT_BYTES - len(data))
    data = _dump(_setup_cell(KernelSetup(), [], len(names)), ascii_only=True)
    return data + b" " * (SLOT_BYTES - len(data))


def _setup_cell(setup: KernelSetup, names: list[str], more: int) -> dict[str, Any]:
    lines = [
        "# biopb-mcp: run this cell first. It gives a plain kernel what the agent's kernel had "
        "before the agent's first cell."
    ]
    code: list[str] = []
    if setup.joined:
        lines.append(
            f"# The agent joined the kernel of {setup.joined} (it did not start it): what that "
            "kernel held before is not recorded."
        )
    if setup.cwd:
        lines.append("# The agent's kernel started in this directory: relative paths in its cells start there.")
        code += [
            "try:",
            f"    __import__('os').chdir({setup.cwd!r})",
            "except OSError as exc:",
            "    print('biopb-mcp: cannot go to the directory the agent worked in:', exc)",
        ]
    if setup.plugins:
        lines.append(f"# Kernel plugins gave its namespace: {', '.join(setup.plugins)}.")
    if setup.load is not None:
        args = ", ".join(f"{key}={value!r}" for key, value in sorted(setup.load.items()))
        code += [
            "try:",
            f"    __import__('biopb_mcp.kernel.replay', fromlist=['load_plugins']).load_plugins(globals(), {args})",
            "except ImportError:",
            "    print('biopb-mcp is not installed in this Python: the plugins above are missing')",
        ]
    if names or more:
        shown = ", ".join(names) + (f" and {more} more" if more else "")
        lines += [
            "# Its cells read names typed outside them (in a console, or in the notebook it joined, "
            "before or while it worked):",
            f"#   {shown}",
            "# A plain kernel lacks these: set them here. The cells that read them are tagged "
            "raises-exception, so a re-run goes on past them.",
        ]
    return {
        "cell_type": "code",
        "id": "biopb-setup",
        "execution_count": None,
        "metadata": {"biopb": {"setup": True}, "tags": ["raises-exception"]},
        "source": "\n".join(lines + code),
        "outputs": [],
    }


def _ambient(name: str) -> bool:
    return name in _AMBIENT or _HISTORY_NAME.fullmatch(name) is not None


def _markdown_cell(text: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "id": _cell_id(), "metadata": {}, "source": text}


def _dump(cell: dict[str, Any], *, ascii_only: bool = False) -> bytes:
    """One cell as one line of JSON (a newline inside a string is escaped, so cells are lines)."""
    return json.dumps(cell, ensure_ascii=ascii_only, default=str).encode("utf-8")


MAX_READ_BYTES = 8 * MAX_SESSION_BYTES
"""Largest notebook ``read_session`` reads (past the cap a notebook still grows, by code alone)."""


def read_session(path: Path) -> Any:
    """A recorded session notebook, read and validated by nbformat (raises its errors).

    The path may come from a file others can write (the magics' link file), so only a regular
    file of bounded size is read, opened non-blocking (a FIFO there would hang the read). A read
    that lands while a cell is being appended can see half of it: it is tried again.

    Raises:
        OSError: not a regular file (EINVAL), too big (EFBIG), or unreadable.
        ValueError: not a valid notebook (nbformat's errors).
    """
    from nbformat.reader import NotJSONError

    for _ in range(2):
        try:
            return _read_valid(path)
        except NotJSONError:
            time.sleep(0.05)
    return _read_valid(path)


def _read_valid(path: Path) -> Any:
    import nbformat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        if st.st_size > MAX_READ_BYTES:
            raise OSError(errno.EFBIG, f"{path} is {st.st_size:,} bytes")
        with os.fdopen(os.dup(fd), "rb") as fh:
            raw = fh.read(MAX_READ_BYTES + 1)
    finally:
        os.close(fd)
    nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
    nbformat.validate(nb)
    return nb


def agent_cells(nb: Any) -> list[Any]:
    """The code cells of the agent's executions, in order (each with ``metadata.biopb``)."""
    return [c for c in nb.cells if c.cell_type == "code" and "job_id" in c.get("metadata", {}).get("biopb", {})]
