"""The client side of the kernel: channels, message dispatch, executions and jobs.

``KernelClient`` talks to whatever kernel the process side connected it to (started here or
joined through a connection file): it submits code, collects every message whose parent is one
of its own requests into that request's Execution (so other frontends' cells never leak in),
pages output, inspects objects and asks idle-time queries. It outlives kernel starts: job ids
keep counting and finished executions stay pageable after a restart.
"""

from __future__ import annotations

import binascii
import contextlib
import dataclasses
import logging
import os
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biopb_mcp.errors import JobNotFound, KernelBusy, KernelError, StartFailed
from biopb_mcp.kernel import image_files, inspection, rendering
from biopb_mcp.kernel.channels import KernelChannels, nudge_waits
from biopb_mcp.kernel.executions import Execution, ForeignCell, Rendered
from biopb_mcp.kernel.link import AGENT_REQUEST_KEY
from biopb_mcp.kernel.output_files import Overflow
from biopb_mcp.kernel.states import ExecutionStatus, KernelState

if TYPE_CHECKING:
    from biopb_mcp.config.settings import Settings
    from biopb_mcp.kernel.notebook import SessionRecorder

logger = logging.getLogger(__name__)

READY_POLL_SECONDS = 0.2
"""One kernel_info attempt while waiting for a starting kernel (see ``wait_ready``)."""

_REPLY_GRACE = 0.5
"""Seconds an interrupted request may stay idle without its reply before it counts as ended
(the reply travels on another socket than the idle status, so it can trail it a little)."""

MAX_KEPT_EXECUTIONS = 100
"""Finished executions kept for paging; older ones are forgotten (JobNotFound says so)."""

EXECUTION_SHARE = 4
"""One execution keeps at most ``kernel.max_kept_bytes // EXECUTION_SHARE`` bytes in memory."""

MAX_KEPT_IMAGE_BYTES = 64 * 1024 * 1024
"""Total bytes of inline images kept across finished executions (they stay pageable by job id);
past it the oldest executions are forgotten, as for text."""

_FOREIGN_CODE_CHARS = 80
"""Characters of another client's cell shown to the agent (its first line)."""

_HELD_POLL = 0.1
"""Seconds between checks of an execution held behind another client's cell."""

NUDGE_AFTER = 0.25
"""Seconds after which an unanswered query is followed by a message that wakes a kernel idling in
Qt's loop (``%gui qt``: napari in a user's notebook), which can miss that the query arrived."""

_PATH_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")

_BOOTSTRAP_EXPR = "__import__('json').dumps(__biopb_bootstrap__)"


class KernelClient:
    """Channels to one kernel at a time, and every execution submitted through them.

    Args:
        settings: read for ``kernel`` (max_output_chars, max_image_bytes, max_images,
            request_timeout) and ``state_dir`` (where oversized images are saved).
        not_ready: builds the error raised when no kernel is connected (the host knows why).
        recorder: writes the session notebook; None records nothing.

    Thread-safe. ``connect``/``disconnect`` are the host's; the rest is for tool threads.
    """

    def __init__(
        self,
        settings: Settings,
        not_ready: Callable[[], KernelError],
        recorder: SessionRecorder | None = None,
    ) -> None:
        self._settings = settings
        self._not_ready = not_ready
        self.recorder = recorder
        self._lock = threading.RLock()  # guards the fields below; never held while waiting
        self._inspect_lock = threading.Lock()
        self._channels: KernelChannels | None = None
        self._open = False
        """True from ``open`` until the kernel is abandoned: only then is code accepted."""
        self._executions: OrderedDict[str, Execution] = OrderedDict()
        self._by_msg: dict[str, Execution] = {}
        self._current: Execution | None = None
        self._counter = 0
        self._foreign: ForeignCell | None = None
        """The other client's cell the kernel runs now, as last seen on iopub; None when idle or
        running ours (a cell that began before this server connected is not known)."""
        self._held_msg: dict[str, Any] | None = None
        """The request of an execution held while a foreign cell runs: sent when it ends."""
        self._nudges: dict[str, tuple[float, Iterator[float]]] = {}
        """msg_id -> (when its next nudge is due, the waits after it), for executions not begun."""
        self._image_stem = f"{os.getpid()}-{uuid.uuid4().hex[:6]}"
        """Prefix of saved images: job ids restart at job-1 in every server sharing the state dir."""

    def reconfigure(self, settings: Settings) -> None:
        with self._lock:
            self._settings = settings

    # -- connection (host) -------------------------------------------------------------------------
    def connect(
        self,
        info: dict[str, Any],
        is_alive: Callable[[], bool],
        on_death: Callable[[], None],
        observe: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        """Open channels to the kernel described by ``info`` (connection-file fields); code is
        accepted only after ``open``, once the host declared the kernel ready. ``observe`` sees
        every message not claimed by a waiting call (on the IO thread) before it is dispatched."""
        on_message = self._on_message
        if observe is not None:

            def on_message(channel: str, msg: dict[str, Any]) -> None:
                observe(msg)
                self._on_message(channel, msg)

        channels = KernelChannels(dict(info), on_message=on_message, is_alive=is_alive, on_death=on_death)
        with self._lock:
            self._channels, self._open = channels, False
        # images and output saved by earlier runs (every server of the state dir saves there):
        # bounded at each start
        image_files.for_dir(Path(self._settings.state_dir) / "images").sweep()
        image_files.for_dir(self._outputs_dir()).sweep()

    def open(self) -> None:
        """Accept code from now on (the kernel is ready)."""
        with self._lock:
            self._open = self._channels is not None

    def abandon(self, status: ExecutionStatus, note: str = "", kernel_lost: KernelState | None = None) -> None:
        """Stop accepting code and end the running execution as ``status`` (safe on the IO thread);
        ``kernel_lost`` says the kernel was lost under it (``dead`` or ``gone``)."""
        with self._lock:
            self._open = False
            current, self._current = self._current, None
            self._by_msg.clear()
            self._nudges.clear()
            self._foreign, self._held_msg = None, None
        if current is not None:
            current.finish(status, note=note, kernel_lost=kernel_lost)
            self._bound_memory()

    def disconnect(self) -> None:
        """Close the channels (after ``abandon``)."""
        with self._lock:
            channels, self._channels, self._open = self._channels, None, False
        if channels is not None:
            channels.close()

    def _require_channels(self) -> KernelChannels:
        if not self._open or self._channels is None:
            raise self._not_ready()
        return self._channels

    # -- start-up (host) ---------------------------------------------------------------------------
    def wait_ready(self, remaining: Callable[[], float], channel: str = "shell") -> None:
        """Ask kernel_info until answered with iopub idle (proves every channel is connected).

        Short attempts: an idle published before our iopub subscription took effect is lost, and
        the wait for it only ends at the attempt's timeout, so a 1 s attempt made starts land at
        ~0.55 s or ~1.05 s by chance. Unanswered requests queue harmlessly in the kernel.
        """
        assert self._channels is not None
        while True:
            left = remaining()
            if self._channels.call(channel, "kernel_info_request", {}, min(left, READY_POLL_SECONDS), want_idle=True):
                return

    def evaluate(self, expression: str, timeout: float) -> tuple[Any, str | None]:
        """(decoded value of ``expression``, which yields JSON; the kernel's session id) at start-up.

        Raises:
            StartFailed: the kernel did not answer within ``timeout``.
        """
        assert self._channels is not None
        content = _silent("")
        content["user_expressions"] = {"e": expression}
        reply = self._channels.call("shell", "execute_request", content, timeout)
        if reply is None:
            raise StartFailed(
                f"the kernel did not answer within {timeout:.0f} s (is a cell still running in its notebook?)."
            )
        session = reply.get("header", {}).get("session")
        expr = reply["content"].get("user_expressions", {}).get("e", {})
        try:
            return rendering.parse_expression_json(expr["data"]["text/plain"]), session
        except (ValueError, KeyError, SyntaxError):
            return None, session

    def fetch_bootstrap(self, remaining: Callable[[], float]) -> dict[str, Any] | None:
        """The bootstrap's record from the kernel namespace; None when the bootstrap never ran."""
        assert self._channels is not None
        content = _silent("")
        content["user_expressions"] = {"b": _BOOTSTRAP_EXPR}
        reply = self._channels.call("shell", "execute_request", content, remaining())
        if reply is None:
            remaining()
            raise StartFailed("the kernel stopped answering during start-up.")
        expr = reply["content"].get("user_expressions", {}).get("b", {})
        if expr.get("status") != "ok":
            return None
        try:
            result = rendering.parse_expression_json(expr["data"]["text/plain"])
        except (ValueError, KeyError, SyntaxError):
            return {"errors": ["bootstrap record unreadable"]}
        return result if isinstance(result, dict) else None

    def run_silent(self, source: str, timeout: float) -> None:
        """Run ``source`` without recording or output (the bootstrap when exec_files missed it)."""
        assert self._channels is not None
        self._channels.call("shell", "execute_request", _silent(source), timeout)

    # -- executions --------------------------------------------------------------------------------
    @property
    def current(self) -> Execution | None:
        """The running execution, if any."""
        return self._current

    def submit(self, code: str) -> Execution:
        """Send ``code`` to the kernel and return its Execution at once.

        Raises:
            KernelNotReady: no connected kernel.
            KernelBusy: code is already running; ``job_id`` names it.
        """
        timeout = self._settings.kernel.request_timeout
        if not self._inspect_lock.acquire(timeout=timeout):
            raise KernelBusy("An inspection is running.", job_id="")
        try:
            with self._lock:
                channels = self._require_channels()
                if self._current is not None:
                    raise _busy(self._current)
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
                    max_bytes=self._settings.kernel.max_kept_bytes // EXECUTION_SHARE,
                    overflow=Overflow(self._outputs_dir(), f"{self._image_stem}-{job_id}.txt"),
                )
                if self.recorder is not None:
                    ex.record = self.recorder.collector()
                    ex.on_finish = self._record_finished
                self._by_msg[ex.msg_id] = ex
                self._executions[ex.job_id] = ex
                self._current = ex
                self._evict()
                if self._foreign is not None:  # sent once the other cell ends: withdrawable till then
                    ex.held, self._held_msg = True, msg
                else:
                    channels.send("shell", msg)
            return ex
        finally:
            self._inspect_lock.release()

    def _outputs_dir(self) -> Path:
        return Path(self._settings.state_dir) / "outputs"

    def _bound_memory(self) -> None:
        """After an execution ended: what finished executions hold is bounded at once, not at
        the next submit (which may never come)."""
        with self._lock:
            self._evict()

    def _evict(self) -> None:
        """Forget the oldest finished executions past the count and byte bounds (what each holds
        in memory, at its real cost); the running one is bounded by its own share."""
        limit = self._settings.kernel.max_kept_bytes
        finished = [k for k, e in self._executions.items() if e.done.is_set()]
        total = sum(self._executions[k].kept_bytes for k in finished)
        images = sum(self._executions[k].inline_bytes for k in finished)
        while finished and (
            len(self._executions) > MAX_KEPT_EXECUTIONS or total > limit or images > MAX_KEPT_IMAGE_BYTES
        ):
            old = self._executions.pop(finished.pop(0))
            total -= old.kept_bytes
            images -= old.inline_bytes

    def wait(self, ex: Execution, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; True once ``ex`` finished with all its output.

        An execution the kernel has not begun after ``NUDGE_AFTER`` seconds is followed by a
        ``kernel_info_request``, and again at growing intervals while it has not begun: a kernel
        idling in Qt's loop (napari in a user's notebook) can miss that a request arrived, and the
        next message wakes it (on a loaded machine a nudge can land in the same gap). A kernel that
        is merely busy answers them later; their replies are dropped.
        """
        timeout = max(0.0, timeout)
        deadline = time.monotonic() + timeout
        while not ex.began.is_set() and not ex.done.is_set():
            with self._lock:
                if self._current is not ex:
                    break
                held = ex.held
                if not held:
                    if ex.msg_id not in self._nudges:
                        waits = nudge_waits(NUDGE_AFTER)
                        first = next(waits) - ex.elapsed()
                        self._nudges[ex.msg_id] = (time.monotonic() + max(first, 0.0), waits)
                    due, waits = self._nudges[ex.msg_id]
                channels = self._channels
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
            with self._lock:
                if ex.msg_id in self._nudges:
                    self._nudges[ex.msg_id] = (time.monotonic() + next(waits), waits)
        return ex.done.wait(max(0.0, deadline - time.monotonic()))

    def render(self, ex: Execution, offset: int = 0) -> Rendered:
        """Bounded text and images of ``ex`` from ``offset``; see ``Rendered``."""
        if offset < 0:
            raise KernelError(f"offset must be 0 or more, got {offset}.")
        return self._page(ex, offset, header=ex.promoted)

    def _page(self, ex: Execution, offset: int, *, header: bool) -> Rendered:
        """A page of ``ex``, saying which other client's cell it waits behind when it has not begun."""
        page = rendering.render(ex, offset, self._settings.kernel.max_output_chars, header=header)
        foreign = self._foreign
        if foreign is not None and not ex.began.is_set() and not ex.done.is_set():
            page = dataclasses.replace(page, waiting_behind=foreign)
        return page

    def poll(self, job_id: str, offset: int = 0) -> Rendered:
        """Status and output of any execution by id (``job-N``), from ``offset``.

        Raises:
            JobNotFound: no such id (unknown, or forgotten: only the last 100 are kept).
        """
        with self._lock:
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
                notebook=self.notebook_status() if forgotten else None,
            )
        if offset < 0:
            raise KernelError(f"offset must be 0 or more, got {offset}.")
        return self._page(ex, offset, header=True)

    def send_interrupt_request(self) -> None:
        """``interrupt_request`` on control, for kernels whose spec asks for message interrupts."""
        channels = self._require_channels()
        channels.send("control", channels.new_msg("interrupt_request", {}))

    def wait_interrupted(self, ex: Execution, timeout: float) -> bool:
        """Wait for ``ex`` to end after an interrupt; True once it did.

        A SIGINT landing after the kernel took the request but before the code began is caught
        by ipykernel itself, which then goes idle without ever replying: without this the job
        would show ``running`` forever and refuse every later submit as busy.
        """
        deadline = time.monotonic() + timeout
        idle_since: float | None = None
        while not ex.done.wait(0.05):
            now = time.monotonic()
            if ex.idle_seen and not ex.reply_seen:
                idle_since = idle_since or now
                if now - idle_since >= _REPLY_GRACE:
                    self._forget(ex)
                    ex.finish(
                        ExecutionStatus.INTERRUPTED,
                        note="The interrupt arrived before the code started: none of it ran.",
                    )
                    self._bound_memory()
            if now >= deadline:
                break
        return ex.done.is_set()

    # -- queries -----------------------------------------------------------------------------------
    def inspect(self, path: str) -> dict[str, Any]:
        """Describe ``path`` (a dotted name like ``img`` or ``np.ndarray.shape``) from the kernel.

        Returns type and bounded repr; for a data object (array, table, image, a list or dict
        of them) its shape, dtype and value range instead of its class's docstring; for a
        function, class or module its signature and docstring. The lookup runs in the kernel
        without adding names to the user's namespace (see ``inspection.py``).

        Raises:
            KernelNotReady: no connected kernel.
            KernelBusy: code is running (inspection would wait behind it).
            KernelError: ``path`` is not a dotted name, is not defined, or the kernel did not answer.
        """
        path = path.strip()
        if not _PATH_RE.fullmatch(path):
            raise KernelError(f"{path!r} is not a dotted Python name such as 'img' or 'np.ndarray'.")
        timeout = self._settings.kernel.request_timeout
        expr = self._evaluate_idle(inspection.inspect_expression(path), timeout, "the inspection")
        if expr.get("status") != "ok":
            raise KernelError(f"Inspecting {path!r} failed: {expr.get('ename')}: {expr.get('evalue')}")
        info = rendering.parse_expression_json(expr["data"]["text/plain"])
        if "error" in info:
            raise KernelError(f"Cannot inspect {path!r}: {info['error']}.")
        return dict(info)

    def query(self, expression: str, timeout: float, what: str = "the query") -> Any:
        """The decoded value of ``expression`` (which yields a JSON string), asked like ``inspect``.

        Raises:
            KernelNotReady: no connected kernel.
            KernelBusy: code is running (the query would wait behind it).
            KernelError: the kernel did not answer within ``timeout``, or the expression raised.
        """
        expr = self._evaluate_idle(expression, timeout, what)
        if expr.get("status") != "ok":
            raise KernelError(
                f"{what[:1].upper()}{what[1:]} failed in the kernel: {expr.get('ename')}: {expr.get('evalue')}"
            )
        try:
            return rendering.parse_expression_json(expr["data"]["text/plain"])
        except (ValueError, KeyError, SyntaxError) as exc:
            raise KernelError(f"The kernel's answer to {what} was unreadable ({type(exc).__name__}).") from None

    def _evaluate_idle(self, expression: str, timeout: float, what: str) -> dict[str, Any]:
        """The ``user_expressions`` entry of ``expression`` from an idle kernel (one at a time).

        Raises:
            KernelNotReady: no connected kernel.
            KernelBusy: code is running.
            KernelError: another query holds the kernel past ``timeout``, or no answer in time.
        """
        if not self._inspect_lock.acquire(timeout=timeout):
            raise KernelError("Another inspection did not finish; retry.")
        try:
            with self._lock:
                channels = self._require_channels()
                if self._current is not None:
                    raise _busy(self._current)
            content = _silent("")
            content["user_expressions"] = {"r": expression}
            reply = channels.call("shell", "execute_request", content, timeout, nudge_after=NUDGE_AFTER)
        finally:
            self._inspect_lock.release()
        if reply is None:
            self._require_channels()
            raise KernelError(f"The kernel did not answer {what} within {timeout} s.")
        expr = reply["content"].get("user_expressions", {}).get("r", {})
        return expr if isinstance(expr, dict) else {}

    def query_when_idle(self, expression: str, timeout: float = 2.0) -> Any:
        """The decoded value of ``expression`` (which yields a JSON string) in an idle kernel.

        None at once when no kernel is connected, code runs or an inspection is in flight (a
        status must never wait behind user code), and None on any failure.
        """
        if not self._inspect_lock.acquire(blocking=False):
            return None
        try:
            with self._lock:
                if not self._open or self._channels is None or self._current is not None:
                    return None
                channels = self._channels
            content = _silent("")
            content["user_expressions"] = {"q": expression}
            reply = channels.call("shell", "execute_request", content, timeout)
        finally:
            self._inspect_lock.release()
        if reply is None:
            return None
        expr = reply["content"].get("user_expressions", {}).get("q", {})
        if expr.get("status") != "ok":
            return None
        try:
            return rendering.parse_expression_json(expr["data"]["text/plain"])
        except (ValueError, KeyError, SyntaxError):
            return None

    def other_cell(self) -> dict[str, Any] | None:
        """The other client's cell the kernel runs, for status: source, code, seconds."""
        cell = self._foreign
        if cell is None:
            return None
        return {"source": cell.source, "code": cell.code, "seconds": round(time.monotonic() - cell.since, 1)}

    def current_job(self) -> dict[str, Any] | None:
        """The running execution for status: job_id, status, seconds, promoted."""
        ex = self._current
        if ex is None:
            return None
        return {"job_id": ex.job_id, "status": ex.status, "seconds": round(ex.elapsed(), 1), "promoted": ex.promoted}

    # -- messages from the kernel (IO thread) ------------------------------------------------------
    def _on_message(self, channel: str, msg: dict[str, Any]) -> None:
        parent = msg.get("parent_header", {}).get("msg_id")
        with self._lock:
            ex = self._by_msg.get(parent) if parent else None
        if ex is None:
            if channel == "iopub" and msg.get("msg_type") == "execute_input":
                self._outside_cell(msg)
                self._foreign_began(msg)
            elif channel == "iopub" and msg.get("msg_type") == "status":
                self._foreign_status(msg)
            else:
                logger.debug("kernel %s message %s outside any execution dropped", channel, msg.get("msg_type"))
            return
        kind, content = msg["msg_type"], msg["content"]
        if channel == "iopub":
            if ex.record is not None:
                ex.record.add(kind, content)
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

    def _add_display(self, ex: Execution, data: dict[str, Any]) -> None:
        png = data.get("image/png")
        if isinstance(png, (str, memoryview)):  # a view of the received bytes when big (see wire)
            ks = self._settings.kernel
            image_dir = Path(self._settings.state_dir) / "images"
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
        self._forget(ex)
        ex.finish(final)
        self._bound_memory()

    def _forget(self, ex: Execution) -> None:
        """Drop an ended execution from what routes messages and what nudges a kernel."""
        with self._lock:
            self._by_msg.pop(ex.msg_id, None)
            self._nudges.pop(ex.msg_id, None)
            if self._current is ex:
                self._current = None

    def _foreign_began(self, msg: dict[str, Any]) -> None:
        """IO thread: another client's cell began (a status idle with its parent ends it)."""
        channels = self._channels
        parent = msg.get("parent_header", {})
        if channels is None or parent.get("session") == channels.session.session or not parent.get("msg_id"):
            return
        code = str(msg.get("content", {}).get("code", ""))
        first = next((line.strip() for line in code.splitlines() if line.strip()), "")
        cell = ForeignCell(
            msg_id=str(parent["msg_id"]),
            source="notebook" if self._settings.kernel.existing else "console",
            code=first if len(first) <= _FOREIGN_CODE_CHARS else first[:_FOREIGN_CODE_CHARS] + "…",
            since=time.monotonic(),
        )
        with self._lock:
            self._foreign = cell

    def _foreign_status(self, msg: dict[str, Any]) -> None:
        """IO thread: the other client's cell went idle: the agent's held request goes now."""
        if msg.get("content", {}).get("execution_state") != "idle":
            return
        parent = msg.get("parent_header", {}).get("msg_id")
        with self._lock:
            if self._foreign is None or parent != self._foreign.msg_id:
                return
            self._foreign = None
            held, self._held_msg = self._held_msg, None
            current, channels = self._current, self._channels
            if held is not None and current is not None and current.held:
                current.held = False
                if channels is not None:
                    channels.send("shell", held)

    def withdraw(self, ex: Execution, note: str) -> bool:
        """End ``ex`` unsent if it is still held (another client's cell runs); False when it was
        sent already (then only the kernel can start or skip it)."""
        with self._lock:
            if not ex.held or self._current is not ex:
                return False
            ex.held, self._held_msg = False, None
        self._forget(ex)
        ex.finish(ExecutionStatus.INTERRUPTED, note=note)
        self._bound_memory()
        return True

    @property
    def foreign(self) -> ForeignCell | None:
        """The other client's cell the kernel runs now, when known."""
        return self._foreign

    def _outside_cell(self, msg: dict[str, Any]) -> None:
        """IO thread: a cell another client ran (a console; the notebook of a joined kernel). Its
        code is not recorded, but the names it binds are what a re-run of the agent's cells lacks."""
        channels = self._channels
        ours = channels.session.session if channels is not None else None
        if self.recorder is None or msg.get("parent_header", {}).get("session") == ours:
            return
        code = msg.get("content", {}).get("code")
        if isinstance(code, str) and code.strip():
            self.recorder.outside_code(code)

    # -- session notebook --------------------------------------------------------------------------
    def start_notebook(self, pid: int | None, desc: str) -> None:
        """Begin a new session notebook for a freshly started (or joined) kernel."""
        if self.recorder is None:
            return
        from biopb_mcp.kernel.notebook import KernelSetup

        settings = self._settings
        name = settings.kernel.name or "python3"
        joined = settings.kernel.existing
        about = self.recorder.about(pid, desc)
        setup = KernelSetup(cwd=None if joined else os.getcwd(), joined=str(joined) if joined else None)
        if not joined or settings.kernel.existing_plugins:  # the bootstrap ran: the plugins are there
            from biopb_mcp.kernel.env import compute_config, outputs_config

            setup = dataclasses.replace(
                setup,
                plugins=(
                    "show, out_path, save_labels, save_image, save_table, read_table, dask_client, viewer, open_image (built in)",
                    *_plugin_labels(Path(settings.plugins_dir)),
                ),
                load={
                    "plugins_dir": str(settings.plugins_dir),
                    "compute": compute_config(settings),
                    "outputs": outputs_config(settings),
                },
            )
        self.recorder.start_notebook(kernel_name=name, display_name=f"Python ({name})", about=about, setup=setup)

    def _record_finished(self, ex: Execution) -> None:
        """Execution hook: queue the finished cell for the notebook writer (jobs too, when they end)."""
        if self.recorder is None or ex.record is None:
            return
        count = ex.reply_content.get("execution_count")
        ex.record.execution_count = count if isinstance(count, int) else None
        meta = {"job_id": ex.job_id, "status": ex.status, "seconds": round(ex.elapsed(), 3), "promoted": ex.promoted}
        if ex.note:
            meta["note"] = ex.note
        self.recorder.code_cell(ex.code, ex.record, meta)

    def notebook_status(self) -> str | None:
        """The session notebook's path (with why it is not being written, if so); None when off."""
        rec = self.recorder
        if rec is None or rec.path is None:
            return None
        return f"{rec.path} (not written: {rec.error})" if rec.error else str(rec.path)


def _plugin_labels(plugins_dir: Path) -> list[str]:
    """The plugin files and entry points the kernel bootstrap loads, as a reader should see them."""
    labels: list[str] = []
    with contextlib.suppress(OSError):
        labels += sorted(p.name for p in plugins_dir.glob("*.py") if not p.name.startswith("_"))
    with contextlib.suppress(Exception):  # a broken distribution's metadata must not stop a start
        from importlib.metadata import entry_points

        labels += [f"{ep.name} (entry point)" for ep in entry_points(group="biopb_mcp.namespace")]
    return labels


def _silent(code: str) -> dict[str, Any]:
    return {
        "code": code,
        "silent": True,
        "store_history": False,
        "user_expressions": {},
        "allow_stdin": False,
        "stop_on_error": False,
    }


def _busy(ex: Execution) -> KernelBusy:
    seconds = ex.elapsed()
    return KernelBusy(f"Busy: code is already running ({seconds:.0f} s).", job_id=ex.job_id, seconds=seconds)
