"""Jobs: every execution submitted through one client, by id, and the one running now.

Each submitted cell becomes an Execution with an id (``job-N``) that collects every message whose
parent is its request (other frontends' cells never leak in); its output pages by id and offset,
also after it finished and after a restart (ids keep counting), until the count and byte bounds
forget the oldest.
"""

from __future__ import annotations

import binascii
import dataclasses
import logging
import os
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from biopb_mcp.errors import JobNotFound, KernelBusy, KernelError
from biopb_mcp.kernel import image_files, rendering
from biopb_mcp.kernel.cells import CellWatch
from biopb_mcp.kernel.channels import nudge_waits
from biopb_mcp.kernel.connection import ClientConnection
from biopb_mcp.kernel.events import ExecutionEvents
from biopb_mcp.kernel.executions import Execution, Rendered
from biopb_mcp.kernel.link import AGENT_REQUEST_KEY
from biopb_mcp.kernel.output_files import Overflow
from biopb_mcp.kernel.states import ExecutionStatus, HostEnding, KernelState

logger = logging.getLogger(__name__)

__all__ = ["EXECUTION_SHARE", "MAX_KEPT_EXECUTIONS", "MAX_KEPT_IMAGE_BYTES", "NUDGE_AFTER", "Jobs", "busy"]

MAX_KEPT_EXECUTIONS = 100
"""Finished executions kept for paging; older ones are forgotten (JobNotFound says so)."""

EXECUTION_SHARE = 4
"""One execution keeps at most ``kernel.max_kept_bytes // EXECUTION_SHARE`` bytes in memory."""

MAX_KEPT_IMAGE_BYTES = 64 * 1024 * 1024
"""Total bytes of inline images kept across finished executions (they stay pageable by job id);
past it the oldest executions are forgotten, as for text."""

_HELD_POLL = 0.1
"""Seconds between checks of an execution held behind another client's cell."""

NUDGE_AFTER = 0.25
"""Seconds after which an unanswered request is followed by a message that wakes a kernel idling
in Qt's loop (``%gui qt``: napari in a user's notebook), which can miss that the request arrived."""


class Jobs:
    """Submits code, routes the kernel's messages to their execution, pages executions by id.

    Args:
        conn: the client's connection (channels, settings, locks).
        cells: the watch on other clients' cells (a request waits behind one).
        events: told when an execution is submitted, gets output and finishes.
        notebook: where finished executions are kept past this registry's memory (the session
            notebook), named when a forgotten job is asked for.

    Thread-safe; ``take`` runs on the IO thread.
    """

    def __init__(
        self,
        conn: ClientConnection,
        cells: CellWatch,
        events: ExecutionEvents,
        notebook: Callable[[], str | None],
    ) -> None:
        self._conn = conn
        self._cells = cells
        self._events = events
        self._notebook = notebook
        self._executions: OrderedDict[str, Execution] = OrderedDict()
        self._by_msg: dict[str, Execution] = {}
        self._current: Execution | None = None
        self._counter = 0
        self._nudges: dict[str, tuple[float, Iterator[float]]] = {}
        """msg_id -> (when its next nudge is due, the waits after it), for executions not begun."""
        self._image_stem = f"{os.getpid()}-{uuid.uuid4().hex[:6]}"
        """Prefix of saved images: job ids restart at job-1 in every server sharing the state dir."""

    @property
    def current(self) -> Execution | None:
        """The running execution, if any."""
        return self._current

    def current_job(self) -> dict[str, Any] | None:
        """The running execution for status: job_id, status, seconds, promoted."""
        ex = self._current
        if ex is None:
            return None
        return {"job_id": ex.job_id, "status": ex.status, "seconds": round(ex.elapsed(), 1), "promoted": ex.promoted}

    def submit(self, code: str) -> Execution:
        """Send ``code`` to the kernel and return its Execution at once.

        ``input()`` in the code raises ``StdinNotImplementedError`` in the kernel (stdin is not
        offered), which comes back as the execution's error instead of hanging.

        Raises:
            KernelNotReady: no ready kernel (its ``state`` and ``reason`` say why).
            KernelBusy: code is already running; ``job_id`` names it.
        """
        conn = self._conn
        timeout = conn.settings.kernel.request_timeout
        if not conn.turn.acquire(timeout=timeout):
            raise KernelBusy("An inspection is running.", job_id="")
        try:
            with conn.lock:
                channels = conn.require()
                if self._current is not None:
                    raise busy(self._current)
                self._counter += 1
                msg = channels.new_msg(
                    "execute_request",
                    {
                        "code": code,
                        "silent": False,
                        "store_history": True,
                        "user_expressions": {},
                        "allow_stdin": False,
                        "stop_on_error": True,
                    },
                )
                job_id = f"job-{self._counter}"
                # the request says it is the agent's (and which job): a %load_ext biopb_mcp in the
                # kernel tells the agent's cells from the scientist's by it (live notebook cells)
                msg["metadata"] = {**msg.get("metadata", {}), AGENT_REQUEST_KEY: {"agent": True, "job": job_id}}
                ex = Execution(
                    job_id,
                    code,
                    str(msg["header"]["msg_id"]),
                    max_bytes=conn.settings.kernel.max_kept_bytes // EXECUTION_SHARE,
                    overflow=Overflow(self._outputs_dir(), f"{self._image_stem}-{job_id}.txt"),
                )
                self._events.submitted(ex)
                self._by_msg[ex.msg_id] = ex
                self._executions[ex.job_id] = ex
                self._current = ex
                self._evict()
                self._cells.send_or_hold(ex, msg)
            return ex
        finally:
            conn.turn.release()

    def wait(self, ex: Execution, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; True once ``ex`` finished with all its output.

        An execution the kernel has not begun after ``NUDGE_AFTER`` seconds is followed by a
        ``kernel_info_request``, and again at growing intervals while it has not begun: a kernel
        idling in Qt's loop (napari in a user's notebook) can miss that a request arrived, and the
        next message wakes it (on a loaded machine a nudge can land in the same gap). A kernel that
        is merely busy answers them later; their replies are dropped. When the kernel saw the
        request waiting but left reading it until after Qt's loop, no message wakes it (zmq
        signals none while one is unread): there only the viewer plugin's wake-up in the kernel
        helps, which a joined kernel gets at join too.
        """
        timeout = max(0.0, timeout)
        deadline = time.monotonic() + timeout
        while not ex.began.is_set() and not ex.done.is_set():
            with self._conn.lock:
                if self._current is not ex:
                    break
                held = ex.held
                if not held:
                    if ex.msg_id not in self._nudges:
                        waits = nudge_waits(NUDGE_AFTER)
                        first = next(waits) - ex.elapsed()
                        self._nudges[ex.msg_id] = (time.monotonic() + max(first, 0.0), waits)
                    due, waits = self._nudges[ex.msg_id]
                channels = self._conn.channels
            now = time.monotonic()
            if held:  # nothing sent yet (another client's cell runs): nothing to nudge
                ex.done.wait(min(_HELD_POLL, max(0.0, deadline - now)))
                if time.monotonic() >= deadline:
                    return ex.done.is_set()
                continue
            if due > now and ex.began.wait(min(due, deadline) - now):
                break
            if time.monotonic() >= deadline:
                return ex.done.is_set()
            if channels is not None:
                channels.send("shell", channels.new_msg("kernel_info_request", {}))
            with self._conn.lock:
                if ex.msg_id in self._nudges:
                    self._nudges[ex.msg_id] = (time.monotonic() + next(waits), waits)
        return ex.done.wait(max(0.0, deadline - time.monotonic()))

    def promote(self, ex: Execution) -> str:
        """Mark ``ex`` a background job (output keeps being collected); returns its ``job-N``."""
        ex.promoted = True
        return ex.job_id

    def render(self, ex: Execution, offset: int = 0) -> Rendered:
        """One bounded page of ``ex`` from ``offset``, with its facts; see ``Rendered``.

        ``header`` is set for promoted, unfinished, dead or aborted executions and for pages
        after the first.
        """
        if offset < 0:
            raise KernelError(f"offset must be 0 or more, got {offset}.")
        return self._page(ex, offset, header=ex.promoted)

    def poll(self, job_id: str, offset: int = 0) -> Rendered:
        """Status and output of any execution by id (``job-N``), from ``offset``.

        Raises:
            JobNotFound: no such id (unknown, or forgotten: only the last 100 are kept).
        """
        with self._conn.lock:
            ex = self._executions.get(job_id.strip())
            known = list(self._executions)[-5:]
            number = re.fullmatch(r"job-(\d+)", job_id.strip())
            forgotten = number is not None and 0 < int(number.group(1)) <= self._counter
        if ex is None:
            hint = f" Recent ids: {', '.join(known)}." if known else " No code has run yet."
            raise JobNotFound(
                f"No job {job_id!r}.{hint}",
                job_id=job_id,
                recent=known,
                kept=MAX_KEPT_EXECUTIONS,
                notebook=self._notebook() if forgotten else None,
            )
        if offset < 0:
            raise KernelError(f"offset must be 0 or more, got {offset}.")
        return self._page(ex, offset, header=True)

    def withdraw(self, ex: Execution, note: str) -> bool:
        """End ``ex`` unsent if it is still held (another client's cell runs); False when it was
        sent already (then only the kernel can start or skip it)."""
        with self._conn.lock:
            if self._current is not ex or not self._cells.release(ex):
                return False
        self.end(ex, ExecutionStatus.INTERRUPTED, note=note)
        return True

    def end(
        self,
        ex: Execution,
        status: ExecutionStatus,
        note: str = "",
        kernel_lost: KernelState | None = None,
        ending: HostEnding | None = None,
    ) -> None:
        """Finish ``ex`` (the first terminal status wins), tell the observers, bound memory."""
        self._forget(ex)
        if ex.finish(status, note=note, kernel_lost=kernel_lost, ending=ending):
            self._events.finished(ex)
        with self._conn.lock:  # what finished executions hold is bounded now, not at the next submit
            self._evict()

    def abandon(
        self, status: ExecutionStatus, ending: HostEnding | None = None, kernel_lost: KernelState | None = None
    ) -> None:
        """End the running execution as ``status`` and stop routing messages (safe on the IO thread)."""
        with self._conn.lock:
            current, self._current = self._current, None
            self._by_msg.clear()
            self._nudges.clear()
        if current is not None:
            self.end(current, status, kernel_lost=kernel_lost, ending=ending)

    def sweep_files(self) -> None:
        """Bound the images and output files saved by earlier runs (every server of the state dir
        saves there)."""
        image_files.for_dir(Path(self._conn.settings.state_dir) / "images").sweep()
        image_files.for_dir(self._outputs_dir()).sweep()

    # -- messages from the kernel (IO thread) ------------------------------------------------------
    def take(self, channel: str, msg: dict[str, Any]) -> bool:
        """Add ``msg`` to the execution it answers; False when it answers none of them."""
        parent = msg.get("parent_header", {}).get("msg_id")
        with self._conn.lock:
            ex = self._by_msg.get(parent) if parent else None
        if ex is None:
            return False
        kind, content = msg["msg_type"], msg["content"]
        if channel == "iopub":
            self._events.output(ex, kind, content)
            if kind == "execute_input":
                ex.began.set()
            elif kind == "stream":
                ex.add_stream(content.get("name", "stdout"), content.get("text", ""))
            elif kind in ("execute_result", "display_data", "update_display_data"):
                self._add_display(ex, content.get("data", {}))
            elif kind == "error":
                ex.add_error(content.get("ename", ""), content.get("evalue", ""), content.get("traceback", []))
            elif kind == "status" and content.get("execution_state") == "idle":
                ex.idle_seen = True
        elif channel == "shell" and kind == "execute_reply":
            if content.get("status") == "error":  # usually on iopub already; kept once, bounded
                ex.add_error(content.get("ename", ""), content.get("evalue", ""), content.get("traceback", []))
            ex.reply_seen = True
            # only what ending the execution needs: a reply repeats the whole error
            ex.reply_content = {k: content[k] for k in ("status", "execution_count") if k in content}
        if ex.reply_seen and ex.idle_seen:
            self._complete(ex)
        return True

    def _add_display(self, ex: Execution, data: dict[str, Any]) -> None:
        png = data.get("image/png")
        if isinstance(png, (str, memoryview)):  # a view of the received bytes when big (see wire)
            ks = self._conn.settings.kernel
            image_dir = Path(self._conn.settings.state_dir) / "images"
            stem = f"{self._image_stem}-{ex.job_id}"
            full = ex.inline_images >= ks.max_images  # only this IO thread adds images
            source: bytes | Path
            try:
                if len(png) // 4 * 3 <= rendering.IN_MEMORY_IMAGE_BYTES:
                    source = binascii.a2b_base64(png)  # reads the ASCII text in place (b64decode copies it)
                else:  # decoded piece by piece into its file, then its text is let go
                    name = f"{stem}-image{len(ex.images) + 1}.png"
                    source = image_files.for_dir(image_dir).save(name, rendering.b64_chunks(png))
                    data.pop("image/png", None)
                    del png
            except (binascii.Error, ValueError):
                ex.add_text("[an image/png display could not be decoded]")
                return
            except OSError as exc:
                ex.add_text(f"[an image/png display could not be saved: {exc}]")
                return
            ex.add_image(
                rendering.image_factory(
                    source, stem, ks.max_image_bytes, image_dir, max_images=ks.max_images if full else None
                )
            )
        elif "text/plain" in data:
            ex.add_text(str(data["text/plain"]))

    def _complete(self, ex: Execution) -> None:
        content = ex.reply_content
        status = content.get("status", "ok")
        if status == "error":
            ename = ex.error[0] if ex.error else ""
            final = ExecutionStatus.INTERRUPTED if ename == "KeyboardInterrupt" else ExecutionStatus.ERROR
            if ename == "StdinNotImplementedError":
                ex.note = (
                    "input() is not available here: agent code cannot read from stdin. Pass the "
                    "value in the code instead, or ask the user in the conversation."
                )
        elif status == "aborted":
            final = ExecutionStatus.ABORTED
        else:
            final = ExecutionStatus.OK
        self.end(ex, final)

    # -- internals ---------------------------------------------------------------------------------
    def _page(self, ex: Execution, offset: int, *, header: bool) -> Rendered:
        """A page of ``ex``, saying which other client's cell it waits behind when it has not begun."""
        page = rendering.render(ex, offset, self._conn.settings.kernel.max_output_chars, header=header)
        foreign = self._cells.foreign
        if foreign is not None and not ex.began.is_set() and not ex.done.is_set():
            page = dataclasses.replace(page, waiting_behind=foreign)
        return page

    def _outputs_dir(self) -> Path:
        return Path(self._conn.settings.state_dir) / "outputs"

    def _forget(self, ex: Execution) -> None:
        """Drop an ended execution from what routes messages and what nudges a kernel."""
        with self._conn.lock:
            self._by_msg.pop(ex.msg_id, None)
            self._nudges.pop(ex.msg_id, None)
            if self._current is ex:
                self._current = None

    def _evict(self) -> None:
        """Forget the oldest finished executions past the count and byte bounds (what each holds
        in memory, at its real cost); the running one is bounded by its own share."""
        limit = self._conn.settings.kernel.max_kept_bytes
        finished = [k for k, e in self._executions.items() if e.done.is_set()]
        total = sum(self._executions[k].kept_bytes for k in finished)
        images = sum(self._executions[k].inline_bytes for k in finished)
        while finished and (
            len(self._executions) > MAX_KEPT_EXECUTIONS or total > limit or images > MAX_KEPT_IMAGE_BYTES
        ):
            old = self._executions.pop(finished.pop(0))
            total -= old.kept_bytes
            images -= old.inline_bytes


def busy(ex: Execution) -> KernelBusy:
    """The refusal of a request while ``ex`` runs: its job and how long it has run (the agent's
    sentence is text's, from these fields; the message is a statement for logs)."""
    seconds = ex.elapsed()
    return KernelBusy(f"{ex.job_id} is running ({seconds:.1f} s)", job_id=ex.job_id, seconds=seconds)
