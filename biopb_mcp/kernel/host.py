"""KernelHost: one lazily started IPython kernel, driven through a synchronous, thread-safe API.

The server calls these methods from worker threads. Nothing here blocks longer than
``kernel.request_timeout`` (``startup_timeout`` for start/restart), and code already running
makes ``submit``/``inspect`` answer ``KernelBusy`` at once instead of queueing behind it.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jupyter_client.connect import write_connection_file

from biopb_mcp.errors import JobNotFound, KernelBusy, KernelError, KernelNotReady
from biopb_mcp.kernel import compute, lifeline, rendering
from biopb_mcp.kernel.channels import KernelChannels
from biopb_mcp.kernel.executions import Execution, Rendered

if TYPE_CHECKING:
    from biopb_mcp.config import Settings
    from biopb_mcp.record import SessionRecorder

logger = logging.getLogger(__name__)

READY_POLL_SECONDS = 0.2
"""One kernel_info attempt while waiting for a starting kernel (see ``_wait_ready``)."""

INLINE_MPL_BACKEND = "module://matplotlib_inline.backend_inline"
BOOTSTRAP_FILE = Path(__file__).with_name("bootstrap.py")
"""Run inside the kernel at start (see bootstrap.py)."""

_REPLY_GRACE = 0.5
"""Seconds an interrupted request may stay idle without its reply before it counts as ended
(the reply travels on another socket than the idle status, so it can trail it a little)."""

MAX_KEPT_EXECUTIONS = 100
"""Finished executions kept for paging; older ones are forgotten (JobNotFound says so)."""

MAX_KEPT_CHARS = 256 * 1024 * 1024
"""Total transcript characters kept across finished executions."""

MAX_KEPT_IMAGE_BYTES = 64 * 1024 * 1024
"""Total bytes of inline images kept across finished executions (they stay pageable by poll_job);
past it the oldest executions are forgotten, as for text."""

_PATH_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")

_BOOTSTRAP_EXPR = "__import__('json').dumps(__biopb_bootstrap__)"

STATES = ("not_started", "starting", "ready", "dead", "error")


class _StartFailed(Exception):
    """Internal: a kernel start that did not reach ready; the message is shown to the agent."""


class KernelHost:
    """The server's one kernel: lazy start, executions, jobs, inspection, clean shutdown.

    Args:
        settings: a ``biopb_mcp.config.Settings`` (any object with its attributes works):
            ``kernel`` (name, promote_after, max_output_chars, max_image_bytes, max_images,
            startup_timeout, request_timeout), ``runtime_dir``, ``state_dir``,
            ``kernel_log_file``, ``plugins_dir``, ``config_file``.

        recorder: writes the session notebook (every execution, one notebook per kernel
            start); None records nothing.

    Nothing starts until ``start()``. All methods are thread-safe.
    """

    def __init__(self, settings: Settings, recorder: SessionRecorder | None = None) -> None:
        self._settings = settings
        self.recorder = recorder
        self._lock = threading.RLock()  # guards the fields below; never held while waiting
        self._life = threading.Lock()  # serialises start / restart / shutdown
        self._inspect_lock = threading.Lock()
        self._closing = threading.Event()  # set by shutdown(): a start in progress gives up
        self._state = "not_started"
        self._message = ""
        self._generation = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._pgid: int | None = None
        self._channels: KernelChannels | None = None
        self._lifeline_w: int | None = None
        self._reaper: subprocess.Popen[bytes] | None = None
        """Watchdog that kills the kernel's group when the lifeline closes (server death)."""
        self._connection_file: Path | None = None
        self._socket_prefix: Path | None = None
        self._socket_dir: Path | None = None
        self._interrupt_mode = "signal"
        self._spec_desc = ""
        self._log_start = 0
        self._started_at: float | None = None
        self._bootstrap: dict[str, Any] = {}
        self._executions: OrderedDict[str, Execution] = OrderedDict()
        self._by_msg: dict[str, Execution] = {}
        self._current: Execution | None = None
        self._counter = 0
        self._image_stem = f"{os.getpid()}-{uuid.uuid4().hex[:6]}"
        """Prefix of saved images: job ids restart at job-1 in every server sharing the state dir."""
        ref = weakref.ref(self)
        atexit.register(_shutdown_at_exit, ref)

    # -- state -------------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        """``not_started`` | ``starting`` | ``ready`` | ``dead`` | ``error``."""
        return self._state

    def _not_ready(self) -> KernelNotReady:
        state = self._state
        if state == "not_started":
            text = "No kernel is running: call start_kernel first."
        elif state == "starting":
            text = "The kernel is still starting: call start_kernel (it waits until ready), then retry."
        elif state == "dead":
            text = f"{self._message} Call start_kernel to start a fresh kernel (the namespace was lost)."
        else:
            text = f"The kernel could not start: {self._message} Call start_kernel to try again."
        return KernelNotReady(text, state=state)

    def _require_ready(self) -> KernelChannels:
        if self._state != "ready" or self._channels is None:
            raise self._not_ready()
        return self._channels

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> str:
        """Start the kernel if none is running; the recovery path after ``dead``/``error``.

        Idempotent: with a ready kernel it only reports it. Blocks until the kernel answers and
        its bootstrap (plugins) ran, at most ``kernel.startup_timeout`` seconds.

        Returns:
            A short status text: pid, connection file, plugins loaded/failed.

        Raises:
            KernelNotReady: the kernel could not start (state ``error``); the message says why
                (bad ``kernel.name``, the kernel's last log lines, a timeout) and what to do.
        """
        if not self._life.acquire(timeout=self._settings.kernel.startup_timeout):
            raise KernelNotReady("The kernel is still starting; call start_kernel again.", state="starting")
        try:
            with self._lock:
                if self._state == "ready" and self._proc is not None and self._proc.poll() is None:
                    return "Kernel already running. " + self._summary()
            self._teardown()
            return self._launch()
        finally:
            self._life.release()

    def restart(self) -> str:
        """Kill the kernel (its whole process group) and start a fresh one.

        The running job, if any, ends as ``aborted``.

        Returns:
            Text that says the namespace was lost, plus the new kernel's status.

        Raises:
            KernelNotReady: the new kernel could not start (state ``error``).
        """
        if not self._life.acquire(timeout=self._settings.kernel.startup_timeout):
            raise KernelNotReady("The kernel is starting; retry restart_kernel shortly.", state="starting")
        try:
            had = self._proc is not None
            self._teardown(note="The kernel was restarted while this ran; its namespace is gone.")
            text = self._launch()
        finally:
            self._life.release()
        lost = (
            "Kernel restarted: the namespace was lost (variables, imports and loaded data are gone; "
            "re-run the setup code). "
            if had
            else "Kernel started (there was no previous kernel). "
        )
        return lost + text

    def reconfigure(self, settings: Settings) -> None:
        """Use ``settings`` from the next start on (a running kernel keeps running as it is)."""
        with self._lock:
            self._settings = settings

    def shutdown(self) -> None:
        """Stop the kernel and kill its process group; idempotent. State becomes ``not_started``."""
        self._closing.set()
        acquired = self._life.acquire(timeout=self._settings.kernel.startup_timeout)
        try:
            self._teardown(note="The server shut the kernel down while this ran.")
            with self._lock:
                self._state, self._message = "not_started", ""
        finally:
            self._closing.clear()
            if acquired:
                self._life.release()

    def _kernel_command(self) -> tuple[list[str], dict[str, str], str, bool]:
        """(argv template, extra env, description, is_python) for ``kernel.name``."""
        name = self._settings.kernel.name
        if not name:
            argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
            return argv, {}, f"this server's Python ({sys.executable})", True
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

        ksm = KernelSpecManager()
        try:
            spec = ksm.get_kernel_spec(name)
        except NoSuchKernel:
            try:
                known = ", ".join(sorted(ksm.find_kernel_specs())) or "none installed"
            except Exception:  # listing is only a hint
                known = "unknown"
            raise _StartFailed(
                f"no Jupyter kernel spec named {name!r} (available: {known}). Set kernel.name in "
                f"{self._settings.config_file} to one of those, or to \"\" for the server's own Python."
            ) from None
        self._interrupt_mode = spec.interrupt_mode or "signal"
        argv = [
            a.replace("{resource_dir}", str(spec.resource_dir)).replace("{prefix}", sys.prefix)
            for a in spec.argv
        ]
        return argv, dict(spec.env or {}), f"{name} ({spec.resource_dir})", spec.language == "python"

    def _launch(self) -> str:
        """Launch a kernel and wait until ready; on failure clean up and raise KernelNotReady."""
        settings, ks = self._settings, self._settings.kernel
        with self._lock:
            self._state, self._message = "starting", ""
            self._interrupt_mode = "signal"
            self._generation += 1
            generation = self._generation
        deadline = time.monotonic() + ks.startup_timeout
        try:
            argv, spec_env, desc, is_python = self._kernel_command()
            try:
                runtime = lifeline.private_dir(Path(settings.runtime_dir))
            except OSError as exc:  # retrying cannot help: say which setting moves it
                raise _StartFailed(
                    f"cannot use the runtime dir {settings.runtime_dir} ({exc.strerror or exc}). Set "
                    f"server.runtime_dir in {settings.config_file} to a writable directory."
                ) from None
            stem = f"kernel-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            conn = runtime / f"{stem}.json"
            prefix, sock_dir = lifeline.socket_prefix(runtime, stem)
            if sock_dir is not None:
                logger.info("runtime dir %s is too long for IPC socket paths; sockets in %s", runtime, sock_dir)
            _, info = write_connection_file(
                str(conn), ip=str(prefix), transport="ipc", key=uuid.uuid4().hex.encode(),
                kernel_name=ks.name or "python3",
            )
            os.chmod(conn, 0o600)
            argv = [a.replace("{connection_file}", str(conn)) for a in argv]
            if is_python:
                argv.append(f"--IPKernelApp.exec_files={BOOTSTRAP_FILE}")
                # history in memory: kernels sharing the profile's SQLite file (other servers, the
                # user's own IPython) collide, and an interrupt landing in a history write puts
                # IPython's "Session/line number was not unique" notice into the next result;
                # the session notebook is the lasting record of what ran
                argv.append("--HistoryManager.hist_file=:memory:")
            log_path = Path(settings.kernel_log_file)
            read_fd, write_fd = os.pipe()
            env = {**os.environ, **spec_env}
            env.update(
                BIOPB_MCP_LIFELINE_FD=str(read_fd),
                BIOPB_MCP_UMASK=f"{lifeline.current_umask():o}",
                BIOPB_MCP_PLUGINS_DIR=str(settings.plugins_dir),
                BIOPB_MCP_KERNEL_LOG=str(log_path),
            )
            env.update(compute.kernel_env(settings))
            env.pop("JPY_PARENT_PID", None)
            if is_python and "MPLBACKEND" not in spec_env:
                # figures must come back to the agent as PNGs, whatever backend the user's shell
                # names (Agg shows nothing, a GUI backend opens windows on the user's screen);
                # the variable alone imports nothing, so kernel start does not pay for matplotlib
                env["MPLBACKEND"] = INLINE_MPL_BACKEND
            try:
                lifeline.rotate_log(log_path)
                self._log_start = log_path.stat().st_size if log_path.exists() else 0
                proc = lifeline.launch(argv, env, log_path, read_fd)
            except OSError as exc:
                os.close(write_fd)
                os.close(read_fd)
                raise _StartFailed(f"could not run {argv[0]!r}: {exc}.") from exc
            try:
                reaper: subprocess.Popen[bytes] | None = lifeline.launch_reaper(read_fd, proc.pid)
            except OSError as exc:  # the in-kernel watcher still covers Python kernels
                logger.warning("could not start the kernel reaper: %s", exc)
                reaper = None
            finally:
                os.close(read_fd)
            with self._lock:
                self._proc, self._lifeline_w, self._reaper = proc, write_fd, reaper
                self._pgid = os.getpgid(proc.pid)
                self._connection_file, self._socket_prefix, self._socket_dir = conn, prefix, sock_dir
                self._spec_desc = desc
                self._started_at = time.time()
                self._channels = KernelChannels(
                    dict(info),
                    on_message=self._on_message,
                    is_alive=lambda: proc.poll() is None,
                    on_death=lambda: self._on_death(generation),
                )
                channels = self._channels
            self._wait_ready(channels, proc, deadline)
            for n in range(1, 6):  # bound under umask 0o077 already; 0600: code the agent runs may print secrets
                with contextlib.suppress(OSError):
                    os.chmod(f"{prefix}-{n}", 0o600)
            boot = self._fetch_bootstrap(channels, deadline)
            if boot is None and is_python:
                logger.warning("kernel bootstrap did not run via exec_files; running it now")
                source = BOOTSTRAP_FILE.read_text(encoding="utf-8")
                channels.call("shell", "execute_request", _silent(source), self._remaining(deadline, proc))
                boot = self._fetch_bootstrap(channels, deadline)
            with self._lock:
                if proc.poll() is not None:
                    raise _StartFailed("the kernel exited right after starting.")
                self._bootstrap = boot or {}
                self._state = "ready"
            for failure in self._bootstrap.get("failed", []):
                logger.warning("kernel plugin %s failed: %s", failure.get("source"), failure.get("error"))
            for err in self._bootstrap.get("errors", []):
                logger.warning("kernel bootstrap problem: %s", err)
            logger.info("kernel ready: pid %s, %s", proc.pid, conn)
            self._start_notebook(proc.pid, desc)
            return self._summary()
        except (_StartFailed, OSError, KernelError) as exc:
            tail = ""
            if self._proc is not None:
                tail = "\nLast kernel log lines:\n" + lifeline.log_tail(Path(settings.kernel_log_file), self._log_start)
            self._teardown()
            with self._lock:
                self._state = "error"
                self._message = f"{exc}{tail}"
            logger.error("kernel start failed: %s", self._message)
            raise self._not_ready() from None

    def _remaining(self, deadline: float, proc: subprocess.Popen[bytes]) -> float:
        if self._closing.is_set():
            raise _StartFailed("the server is shutting down.")
        if proc.poll() is not None:
            raise _StartFailed(f"the kernel process exited during start-up (exit code {proc.returncode}).")
        left = deadline - time.monotonic()
        if left <= 0:
            raise _StartFailed(
                f"the kernel did not become ready within kernel.startup_timeout = "
                f"{self._settings.kernel.startup_timeout} s."
            )
        return left

    def _wait_ready(self, channels: KernelChannels, proc: subprocess.Popen[bytes], deadline: float) -> None:
        """Ask kernel_info until answered with iopub idle (proves every channel is connected).

        Short attempts: an idle published before our iopub subscription took effect is lost, and
        the wait for it only ends at the attempt's timeout, so a 1 s attempt made starts land at
        ~0.55 s or ~1.05 s by chance. Unanswered requests queue harmlessly in the kernel.
        """
        while True:
            left = self._remaining(deadline, proc)
            if channels.call("shell", "kernel_info_request", {}, min(left, READY_POLL_SECONDS), want_idle=True):
                return

    def _fetch_bootstrap(self, channels: KernelChannels, deadline: float) -> dict[str, Any] | None:
        """The bootstrap's record from the kernel namespace; None when the bootstrap never ran."""
        assert self._proc is not None
        content = _silent("")
        content["user_expressions"] = {"b": _BOOTSTRAP_EXPR}
        reply = channels.call("shell", "execute_request", content, self._remaining(deadline, self._proc))
        if reply is None:
            self._remaining(deadline, self._proc)
            raise _StartFailed("the kernel stopped answering during start-up.")
        expr = reply["content"].get("user_expressions", {}).get("b", {})
        if expr.get("status") != "ok":
            return None
        try:
            result = rendering.parse_expression_json(expr["data"]["text/plain"])
        except (ValueError, KeyError, SyntaxError):
            return {"errors": ["bootstrap record unreadable"]}
        return result if isinstance(result, dict) else None

    def _teardown(self, note: str = "") -> None:
        """Forget the current kernel and kill its process group (caller holds ``_life``)."""
        with self._lock:
            self._generation += 1  # a death report from the old IO thread is now ignored
            proc, pgid, channels = self._proc, self._pgid, self._channels
            write_fd, conn = self._lifeline_w, self._connection_file
            prefix, sock_dir = self._socket_prefix, self._socket_dir
            reaper, self._reaper = self._reaper, None
            self._proc = self._pgid = self._channels = self._lifeline_w = None
            self._connection_file = self._socket_prefix = self._socket_dir = None
            self._bootstrap = {}
            current, self._current = self._current, None
            self._by_msg.clear()
        if current is not None:
            current.finish("aborted", note=note)
        if channels is not None:
            channels.close()
        if write_fd is not None:
            with contextlib.suppress(OSError):
                os.close(write_fd)  # the kernel sees EOF and exits by itself, children included
        if proc is not None:
            lifeline.kill_group(proc, pgid)
        if reaper is not None:  # it saw the closed lifeline and finds the group gone: reap it
            try:
                reaper.wait(2.0)
            except subprocess.TimeoutExpired:
                reaper.kill()
                reaper.wait()
        sockets = [Path(f"{prefix}-{n}") for n in range(1, 6)] if prefix is not None else []
        lifeline.remove_quietly(conn, *sockets, sock_dir)

    def _on_death(self, generation: int) -> None:
        """IO thread: the kernel process exited without us asking."""
        with self._lock:
            if generation != self._generation or self._proc is None:
                return
            code = self._proc.returncode
            how = f"exit code {code}"
            if code is not None and code < 0:
                try:
                    how = f"killed by signal {signal.Signals(-code).name}"
                except ValueError:
                    how = f"killed by signal {-code}"
            tail = lifeline.log_tail(Path(self._settings.kernel_log_file), self._log_start)
            self._state = "dead"
            self._message = f"The kernel died ({how}). Last kernel log lines:\n{tail}\n"
            current, self._current = self._current, None
            self._by_msg.clear()
        logger.error("kernel died (%s)", how)
        if current is not None:
            current.finish("dead", note=self._message + "Call start_kernel to start a fresh kernel (namespace lost).")

    # -- messages from the kernel (IO thread) ------------------------------------------------------
    def _on_message(self, channel: str, msg: dict[str, Any]) -> None:
        parent = msg.get("parent_header", {}).get("msg_id")
        with self._lock:
            ex = self._by_msg.get(parent) if parent else None
        if ex is None:
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
            ex.reply_seen = True
            ex.reply_content = content
        if ex.reply_seen and ex.idle_seen:
            self._complete(ex)

    def _add_display(self, ex: Execution, data: dict[str, Any]) -> None:
        png = data.get("image/png")
        if isinstance(png, str):
            try:
                raw = base64.b64decode(png)
            except ValueError:
                ex.add_text("[an image/png display could not be decoded]")
                return
            ks = self._settings.kernel
            image_dir = Path(self._settings.state_dir) / "images"
            stem = f"{self._image_stem}-{ex.job_id}"
            full = ex.inline_images >= ks.max_images  # only this IO thread adds images
            ex.add_image(rendering.image_factory(raw, stem, ks.max_image_bytes, image_dir,
                                                 max_images=ks.max_images if full else None))
        elif "text/plain" in data:
            ex.add_text(str(data["text/plain"]))

    def _complete(self, ex: Execution) -> None:
        content = ex.reply_content
        status = content.get("status", "ok")
        if status == "error":
            if ex.error is None:
                ex.add_error(content.get("ename", ""), content.get("evalue", ""), content.get("traceback", []))
            ename = ex.error[0] if ex.error else ""
            final = "interrupted" if ename == "KeyboardInterrupt" else "error"
            if ename == "StdinNotImplementedError":
                ex.note = (
                    "input() is not available here: agent code cannot read from stdin. Pass the "
                    "value in the code instead, or ask the user in the conversation."
                )
        elif status == "aborted":
            final = "aborted"
        else:
            final = "ok"
        with self._lock:
            self._by_msg.pop(ex.msg_id, None)
            if self._current is ex:
                self._current = None
        ex.finish(final)

    # -- session notebook --------------------------------------------------------------------------
    def _start_notebook(self, pid: int, desc: str) -> None:
        if self.recorder is None:
            return
        name = self._settings.kernel.name or "python3"
        about = (f"Recorded by biopb-mcp: each code cell is one execute_code call of the agent, in order, "
                 f"with its outputs; markdown cells note doc reads and writes. Kernel pid {pid}, {desc}.")
        self.recorder.start_notebook(kernel_name=name, display_name=f"Python ({name})", about=about)

    def _record_finished(self, ex: Execution) -> None:
        """Execution hook: queue the finished cell for the notebook writer (jobs too, when they end)."""
        if self.recorder is None or ex.record is None:
            return
        count = ex.reply_content.get("execution_count")
        ex.record.execution_count = count if isinstance(count, int) else None
        meta = {"job_id": ex.job_id, "status": ex.status, "seconds": round(ex.elapsed(), 3),
                "promoted": ex.promoted}
        if ex.note:
            meta["note"] = ex.note
        self.recorder.code_cell(ex.code, ex.record, meta)

    # -- executions --------------------------------------------------------------------------------
    def submit(self, code: str) -> Execution:
        """Send ``code`` to the kernel and return its Execution at once.

        ``input()`` in the code raises ``StdinNotImplementedError`` in the kernel (stdin is not
        offered), which comes back as the execution's error instead of hanging.

        Raises:
            KernelNotReady: no ready kernel (message names start_kernel).
            KernelBusy: code is already running; ``job_id`` names it.
        """
        timeout = self._settings.kernel.request_timeout
        if not self._inspect_lock.acquire(timeout=timeout):
            raise KernelBusy("inspect_object is running; retry in a moment.", job_id="")
        try:
            with self._lock:
                channels = self._require_ready()
                if self._current is not None:
                    raise _busy(self._current)
                self._counter += 1
                msg = channels.new_msg(
                    "execute_request",
                    {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                     "allow_stdin": False, "stop_on_error": True},
                )
                ex = Execution(f"job-{self._counter}", code, str(msg["header"]["msg_id"]))
                if self.recorder is not None:
                    ex.record = self.recorder.collector()
                    ex.on_finish = self._record_finished
                self._by_msg[ex.msg_id] = ex
                self._executions[ex.job_id] = ex
                self._current = ex
                self._evict()
                channels.send("shell", msg)
            return ex
        finally:
            self._inspect_lock.release()

    def _evict(self) -> None:
        finished = [k for k, e in self._executions.items() if e.done.is_set()]
        total = sum(len(self._executions[k].snapshot()[0]) for k in finished)
        images = sum(self._executions[k].inline_bytes for k in finished)
        while finished and (len(self._executions) > MAX_KEPT_EXECUTIONS or total > MAX_KEPT_CHARS
                            or images > MAX_KEPT_IMAGE_BYTES):
            old = self._executions.pop(finished.pop(0))
            total -= len(old.snapshot()[0])
            images -= old.inline_bytes

    def wait(self, ex: Execution, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; True once ``ex`` finished with all its output."""
        return ex.done.wait(max(0.0, timeout))

    def promote(self, ex: Execution) -> str:
        """Mark ``ex`` a background job (output keeps being collected); returns its ``job-N``."""
        ex.promoted = True
        return ex.job_id

    def render(self, ex: Execution, offset: int = 0) -> Rendered:
        """Bounded text and images of ``ex`` from ``offset``; see ``Rendered``.

        A status header is added for promoted, unfinished, dead or aborted executions and for
        pages after the first; otherwise the text is just the output (``(no output)`` if none).
        """
        if offset < 0:
            raise KernelError(f"offset must be 0 or more, got {offset}.")
        return rendering.render(ex, offset, self._settings.kernel.max_output_chars, header=ex.promoted)

    def poll(self, job_id: str, offset: int = 0) -> Rendered:
        """Status and output of any execution by id (``job-N``), from ``offset``.

        Raises:
            JobNotFound: no such id (unknown, or forgotten: only the last 100 are kept).
        """
        with self._lock:
            ex = self._executions.get(job_id.strip())
            known = list(self._executions)[-5:]
        if ex is None:
            hint = f" Recent ids: {', '.join(known)}." if known else " No code has run yet."
            raise JobNotFound(
                f"No job {job_id!r} (ids have the form job-<N>, as execute_code returns them; only the "
                f"last {MAX_KEPT_EXECUTIONS} executions are kept).{hint}"
            )
        if offset < 0:
            raise KernelError(f"offset must be 0 or more, got {offset}.")
        return rendering.render(ex, offset, self._settings.kernel.max_output_chars, header=True)

    def interrupt(self) -> str:
        """Interrupt the running code (SIGINT) and wait briefly for it to stop.

        Returns:
            What happened: the job stopped (interrupted), is still running, or nothing ran.

        Raises:
            KernelNotReady: no running kernel.
        """
        with self._lock:
            channels = self._require_ready()
            ex, pgid, proc, mode = self._current, self._pgid, self._proc, self._interrupt_mode
        if ex is None:
            return "No code is running; nothing to interrupt."
        wait = min(10.0, self._settings.kernel.request_timeout)
        # ipykernel ignores SIGINT until it starts handling a request, so a signal sent while the
        # request is still queued (a loaded machine) is dropped and the code runs on: send it once
        # the kernel has announced the code; a kernel that never announces gets it after the wait.
        ex.began.wait(wait)
        if mode == "message":
            channels.send("control", channels.new_msg("interrupt_request", {}))
        elif pgid is not None and pgid != os.getpgrp():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGINT)
        elif proc is not None:
            proc.send_signal(signal.SIGINT)
        if self._wait_interrupted(ex, wait):
            return f"Interrupted {ex.job_id}: it ended as {ex.status}. poll_job(\"{ex.job_id}\") shows its output."
        return (
            f"Sent SIGINT, but {ex.job_id} is still running after {wait:.0f} s (native code may ignore "
            f"it until it returns). Check with poll_job(\"{ex.job_id}\"), or restart_kernel to kill it "
            "(the namespace is lost)."
        )

    def _wait_interrupted(self, ex: Execution, timeout: float) -> bool:
        """Wait for ``ex`` to end after an interrupt; True once it did.

        A SIGINT landing after the kernel took the request but before the code began is caught
        by ipykernel itself, which then goes idle without ever replying: without this the job
        would show ``running`` forever and block every later execute_code.
        """
        deadline = time.monotonic() + timeout
        idle_since: float | None = None
        while not ex.done.wait(0.05):
            now = time.monotonic()
            if ex.idle_seen and not ex.reply_seen:
                idle_since = idle_since or now
                if now - idle_since >= _REPLY_GRACE:
                    with self._lock:
                        self._by_msg.pop(ex.msg_id, None)
                        if self._current is ex:
                            self._current = None
                    ex.finish("interrupted", note="The interrupt arrived before the code started: "
                              "none of it ran.")
            if now >= deadline:
                break
        return ex.done.is_set()

    def inspect(self, path: str) -> str:
        """Describe ``path`` (a dotted name like ``img`` or ``np.ndarray.shape``) from the kernel.

        Returns type, bounded repr, signature, bounded docstring, shape/dtype for arrays. The
        lookup runs in the kernel without adding names to the user's namespace.

        Raises:
            KernelNotReady: no ready kernel.
            KernelBusy: code is running (inspection would wait behind it).
            KernelError: ``path`` is not a dotted name, is not defined, or the kernel did not answer.
        """
        path = path.strip()
        if not _PATH_RE.fullmatch(path):
            raise KernelError(
                f"inspect_object takes a dotted Python name such as 'img' or 'np.ndarray', got {path!r}."
            )
        timeout = self._settings.kernel.request_timeout
        if not self._inspect_lock.acquire(timeout=timeout):
            raise KernelError("Another inspect_object call did not finish; retry.")
        try:
            with self._lock:
                channels = self._require_ready()
                if self._current is not None:
                    raise _busy(self._current)
            content = _silent("")
            content["user_expressions"] = {"r": rendering.inspect_expression(path)}
            reply = channels.call("shell", "execute_request", content, timeout)
        finally:
            self._inspect_lock.release()
        if reply is None:
            if self._state != "ready":
                raise self._not_ready()
            raise KernelError(f"The kernel did not answer inspect_object within {timeout} s.")
        expr = reply["content"].get("user_expressions", {}).get("r", {})
        if expr.get("status") != "ok":
            raise KernelError(f"Inspecting {path!r} failed: {expr.get('ename')}: {expr.get('evalue')}")
        info = rendering.parse_expression_json(expr["data"]["text/plain"])
        if "error" in info:
            raise KernelError(f"Cannot inspect {path!r}: {info['error']}.")
        return rendering.format_inspection(info)

    def query_when_idle(self, expression: str, timeout: float = 2.0) -> Any:
        """The decoded value of ``expression`` (which yields a JSON string) in an idle kernel.

        For status readers: None at once when no kernel is ready, code runs or an inspection is
        in flight (a status must never wait behind user code), and None on any failure.
        """
        if not self._inspect_lock.acquire(blocking=False):
            return None
        try:
            with self._lock:
                if self._state != "ready" or self._channels is None or self._current is not None:
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

    # -- status ------------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """A JSON-able snapshot; never blocks on the kernel.

        Keys: state, message (why dead/error, else ""), pid, connection_file, connect_command,
        transport, socket_dir (set when the runtime dir was too long for IPC paths), kernel_spec,
        current_job (job_id, status, seconds, promoted) or None, plugins {loaded, failed},
        bootstrap_errors, parent_death_watch (the kernel, or the reaper beside it, watches the
        server's lifeline pipe),
        kernel_log, runtime_dir.
        """
        with self._lock:
            ex, proc = self._current, self._proc
            boot = self._bootstrap
            conn = str(self._connection_file) if self._connection_file else None
            return {
                "state": self._state,
                "message": self._message,
                "pid": proc.pid if proc is not None else None,
                "connection_file": conn,
                "connect_command": f"biopb-mcp console --pid {os.getpid()}" if conn else None,
                "transport": "ipc",
                "socket_dir": str(self._socket_dir) if self._socket_dir else None,
                "kernel_spec": self._spec_desc or (self._settings.kernel.name or "this server's Python"),
                "current_job": None
                if ex is None
                else {"job_id": ex.job_id, "status": ex.status, "seconds": round(ex.elapsed(), 1),
                      "promoted": ex.promoted},
                "plugins": {
                    "loaded": [p.get("source", p.get("name")) for p in boot.get("loaded", [])],
                    "failed": [
                        {"plugin": p.get("source", p.get("name")), "error": p.get("error", "")}
                        for p in boot.get("failed", [])
                    ],
                },
                "bootstrap_errors": list(boot.get("errors", [])),
                "parent_death_watch": bool(boot.get("lifeline", False))
                or (self._reaper is not None and self._reaper.poll() is None),
                "kernel_log": str(self._settings.kernel_log_file),
                "runtime_dir": str(self._settings.runtime_dir),
                "session_notebook": self._notebook_status(),
            }

    def _notebook_status(self) -> str | None:
        """The session notebook's path (with why it is not being written, if so); None when off."""
        rec = self.recorder
        if rec is None or rec.path is None:
            return None
        return f"{rec.path} (not written: {rec.error})" if rec.error else str(rec.path)

    def _summary(self) -> str:
        st = self.status()
        parts = [f"Kernel ready (pid {st['pid']}, {st['kernel_spec']})."]
        parts.append(f"Connection file: {st['connection_file']} (share it: {st['connect_command']}).")
        loaded, failed = st["plugins"]["loaded"], st["plugins"]["failed"]
        if loaded:
            parts.append(f"Plugins loaded: {', '.join(Path(p).name if '/' in p else p for p in loaded)}.")
        if failed:
            names = "; ".join(f"{f['plugin']} ({f['error']})" for f in failed)
            parts.append(f"Plugins that failed and were skipped: {names}; see {st['kernel_log']}.")
        if st["bootstrap_errors"]:
            parts.append(f"Bootstrap problems logged in {st['kernel_log']}.")
        if st["session_notebook"]:
            parts.append(f"Session notebook: {st['session_notebook']}.")
        return " ".join(parts)


def _silent(code: str) -> dict[str, Any]:
    return {"code": code, "silent": True, "store_history": False, "user_expressions": {},
            "allow_stdin": False, "stop_on_error": False}


def _busy(ex: Execution) -> KernelBusy:
    return KernelBusy(
        f"Busy: {ex.job_id} is still running ({ex.elapsed():.0f} s). poll_job(\"{ex.job_id}\") shows its "
        "output; interrupt_kernel stops it.",
        job_id=ex.job_id,
    )


def _shutdown_at_exit(ref: weakref.ReferenceType[KernelHost]) -> None:
    host = ref()
    if host is not None and host._proc is not None:
        with contextlib.suppress(Exception):
            host.shutdown()
