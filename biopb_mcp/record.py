"""The session notebook: what the agent ran, with its outputs, as an nbformat 4 notebook.

One notebook per kernel start. Each finished execution becomes a code cell holding its outputs
as the kernel sent them (streams, results, errors, images at full size); doc reads and writes
become short markdown cells. The scientist opens it in JupyterLab or VS Code, re-runs it with
nbclient, or pastes from it into a lab notebook; tools that want the agent's history read it
back with ``nbformat.read`` (each code cell carries ``metadata.biopb``: job id, status, times).

Writing happens on one writer thread so no tool call waits for the disk. Each write replaces
the whole file atomically (temp file + rename), so a crash at any moment leaves the previous
complete notebook: valid, holding every cell written so far. Cells are serialised once and kept
as JSON text, so a rewrite is one join and one write.

The writer emits nbformat 4.5 JSON itself: nbformat's validating builders cost milliseconds a
cell. Reading back goes through nbformat (``read_session``), which validates what was written.

This module knows nothing of MCP or of how the kernel is driven: it takes plain strings and
Jupyter message contents.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["OutputCollector", "SessionRecorder", "agent_cells", "read_session"]

NBFORMAT_MINOR = 5
"""nbformat 4.5: cells carry an ``id``."""

MAX_IMAGE_CHARS_PER_CELL = 40 * 1024 * 1024
"""Base64 characters of images kept per cell (about 30 MB of PNG); later images become a note."""

CELL_BUDGET_OUTPUTS = 10
"""Text kept per cell, in units of ``max_output_chars`` (each stream or display gets one unit)."""

_OUTPUT_KINDS = frozenset({"stream", "execute_result", "display_data", "error", "clear_output"})


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


class OutputCollector:
    """The outputs of one execution in nbformat shape, built as the kernel's messages arrive.

    Consecutive stream messages of one name merge into one output, ``clear_output`` clears, and
    text beyond ``max_chars`` per stream or display (``CELL_BUDGET_OUTPUTS`` times that per cell;
    images beyond ``MAX_IMAGE_CHARS_PER_CELL``) is replaced by a note, so memory stays bounded
    however much a job prints, and a warning on stderr survives a flood on stdout. Called from one thread (the one
    that receives kernel messages); ``outputs()`` is read after the execution finished.
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
            tb = [str(line) for line in content.get("traceback", [])]
            self._outputs.append({
                "output_type": "error",
                "ename": str(content.get("ename", "")),
                "evalue": str(content.get("evalue", "")),
                "traceback": tb,
            })
        else:
            data = self._bounded_data(content.get("data", {}))
            out: dict[str, Any] = {"output_type": msg_type, "data": data,
                                   "metadata": dict(content.get("metadata", {}) or {})}
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
        if last is not None and last["output_type"] == "stream" and last["name"] == name:
            last["text"] += text
        else:
            self._outputs.append({"output_type": "stream", "name": name, "text": text})

    def _bounded_data(self, data: dict[str, Any]) -> dict[str, Any]:
        """A display's mime bundle with oversized entries replaced by a note in text/plain."""
        kept: dict[str, Any] = {}
        notes: list[str] = []
        for mime, value in data.items():
            if mime.startswith("image/") and isinstance(value, str) and not mime.endswith("+xml"):
                if len(value) > self._image_room:
                    notes.append(f"[biopb-mcp: a {mime} image of {len(value) * 3 // 4} bytes is not "
                                 "recorded in the notebook (size cap per cell)]")
                    continue
                self._image_room -= len(value)
                kept[mime] = value
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


@dataclass
class _Notebook:
    path: Path
    metadata: dict[str, Any]
    cells: list[str] = field(default_factory=list)
    """Each cell already serialised as JSON."""


class SessionRecorder:
    """Writes the session notebooks into ``directory``; thread-safe, never raises into a caller.

    Args:
        directory: where the notebooks go (created on first write).
        max_output_chars: text kept per cell; the rest is replaced by a note.

    A failure to write (disk full, unwritable directory) is logged and kept in ``error``; the
    session goes on unrecorded rather than failing the agent's calls.
    """

    def __init__(self, directory: Path, *, max_output_chars: int = 100_000) -> None:
        self.directory = Path(directory)
        self.max_output_chars = max_output_chars
        self.error: str | None = None
        self._path: Path | None = None
        self._count = 0
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[str, Any] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._written = threading.Condition()
        self._done_seq = 0
        self._seq = 0
        self._early: list[str] = []
        """Doc notes made before the first kernel start (writer thread only): they open its notebook."""

    @property
    def path(self) -> Path | None:
        """The current notebook (None before the first kernel start)."""
        return self._path

    def collector(self) -> OutputCollector:
        """A fresh collector for one execution's outputs."""
        return OutputCollector(self.max_output_chars)

    # -- events (any thread; cheap) ----------------------------------------------------------------
    def start_notebook(self, *, kernel_name: str, display_name: str, about: str) -> Path:
        """Begin a new notebook for a kernel that just started; returns its path.

        The previous notebook, if any, gets a closing markdown cell pointing to the new one, and
        the new one opens with a cell pointing back, so a restart reads as one linked session.
        """
        with self._lock:
            self._count += 1
            stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
            path = self.directory / f"session-{stamp}-{os.getpid()}-{self._count}.ipynb"
            previous, self._path = self._path, path
        self._put("new", (path, previous, kernel_name, display_name, about, time.time()))
        return path

    def code_cell(self, code: str, collector: OutputCollector | None, meta: dict[str, Any]) -> None:
        """Record one finished execution (``meta`` goes to ``metadata.biopb``)."""
        self._put("code", (code, collector, dict(meta), time.time()))

    def markdown(self, text: str) -> None:
        """Record a short note (a doc read or write) as a markdown cell."""
        self._put("markdown", (text, time.time()))

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything queued so far is on disk; False on timeout."""
        with self._lock:
            target = self._seq
        with self._written:
            return self._written.wait_for(lambda: self._done_seq >= target, timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued, then stop the writer thread."""
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
        current: _Notebook | None = None
        while True:
            item = self._queue.get()
            batch = [item]
            while True:  # take everything already queued: one rewrite per burst
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            dirty: dict[Path, _Notebook] = {}
            stop = False
            handled = 0
            for event in batch:
                if event is None:
                    stop = True
                    continue
                handled += 1
                try:
                    current = self._apply(event, current, dirty)
                except Exception as exc:  # a bad payload must not kill the writer
                    logger.exception("session notebook: could not record an event")
                    self.error = f"{type(exc).__name__}: {exc}"
            for nb in dirty.values():
                self._write(nb)
            with self._written:
                self._done_seq += handled
                self._written.notify_all()
            if stop:
                return

    def _apply(self, event: tuple[str, Any], current: _Notebook | None,
               dirty: dict[Path, _Notebook]) -> _Notebook | None:
        kind, payload = event
        if kind == "new":
            path, previous, kernel_name, display_name, about, stamp = payload
            when = _iso(stamp)
            nb = _Notebook(path, {
                "kernelspec": {"name": kernel_name, "display_name": display_name, "language": "python"},
                "language_info": {"name": "python"},
                "biopb": {"started": when},
            })
            lines = [f"# Agent session, kernel started {when}", "", about]
            if previous is not None:
                lines += ["", (f"Continues the session recorded in `{previous}` (the kernel was "
                               "restarted there: the namespace starts empty here).")]
                if current is not None and current.path == previous:
                    current.cells.append(_dump(_markdown_cell(
                        f"*Kernel restarted {when}; the session continues in `{path}`.*")))
                    dirty[current.path] = current
            nb.cells.append(_dump(_markdown_cell("\n".join(lines))))
            nb.cells.extend(self._early)
            self._early = []
            dirty[path] = nb
            return nb
        if kind == "code":
            code, collector, meta, stamp = payload
            if current is None:  # code runs only in a started kernel; nothing to attach it to
                return current
            outputs = collector.outputs() if collector is not None else []
            count = collector.execution_count if collector is not None else None
            for out in outputs:
                if out["output_type"] == "execute_result" and out.get("execution_count") is None:
                    out["execution_count"] = count
            meta.setdefault("finished", _iso(stamp))
            cell = {
                "cell_type": "code", "id": _cell_id(), "execution_count": count,
                "metadata": {"biopb": meta}, "source": code, "outputs": outputs,
            }
            current.cells.append(_dump(cell))
        else:
            text, stamp = payload
            cell = _markdown_cell(text)
            cell["metadata"] = {"biopb": {"time": _iso(stamp)}}
            if current is None:  # the agent read docs before starting the kernel: keep for the first
                self._early.append(_dump(cell))
                return current
            current.cells.append(_dump(cell))
        dirty[current.path] = current
        return current

    def _write(self, nb: _Notebook) -> None:
        """Replace the notebook file atomically: a crash leaves either the old or the new one."""
        head = json.dumps(
            {"metadata": nb.metadata, "nbformat": 4, "nbformat_minor": NBFORMAT_MINOR},
            ensure_ascii=False,
        )
        text = head[:-1] + ',\n "cells": [\n' + ",\n".join(nb.cells) + "\n ]\n}\n"
        tmp = nb.path.with_name(f".{nb.path.name}.{os.getpid()}.tmp")
        try:
            # 0700/0600 like the logs: the notebook holds the session's code and outputs
            nb.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with open(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, nb.path)
            self.error = None
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            if self.error is None:
                logger.error("session notebook %s could not be written: %s", nb.path, exc)
            self.error = f"cannot write {nb.path}: {exc.strerror or exc}"


def _markdown_cell(text: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "id": _cell_id(), "metadata": {}, "source": text}


def _dump(cell: dict[str, Any]) -> str:
    return json.dumps(cell, ensure_ascii=False, default=str)


def read_session(path: Path) -> Any:
    """A recorded session notebook, read and validated by nbformat (raises its errors)."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    nbformat.validate(nb)
    return nb


def agent_cells(nb: Any) -> list[Any]:
    """The code cells of the agent's executions, in order (each with ``metadata.biopb``)."""
    return [c for c in nb.cells if c.cell_type == "code" and "biopb" in c.get("metadata", {})]
