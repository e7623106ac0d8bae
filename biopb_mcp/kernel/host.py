"""KernelHost: one lazily started IPython kernel, driven through a synchronous, thread-safe API.

The host is the facade the server uses. It composes a process side (``process.py``: where the
kernel runs and who owns it) with a client side (``client.py``: channels, executions, jobs) and
owns the state between them. Nothing here blocks longer than ``kernel.request_timeout``
(``startup_timeout`` for start/restart), and code already running makes ``submit``/``inspect``
answer ``KernelBusy`` at once instead of queueing behind it.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biopb_mcp.errors import KernelError, KernelNotOwned, KernelNotReady, KernelProblem, RestartRefused, StartFailed
from biopb_mcp.kernel.attached import (
    IDENTITY_EXPRESSION,
    AttachedKernel,
    bootstrap_code,
)
from biopb_mcp.kernel.client import KernelClient
from biopb_mcp.kernel.env import bootstrap_env
from biopb_mcp.kernel.events import ConnectionObserver, ExecutionEvents
from biopb_mcp.kernel.executions import Execution, ForeignCell, Rendered
from biopb_mcp.kernel.jobs import Jobs
from biopb_mcp.kernel.link import KernelLink, link_id
from biopb_mcp.kernel.probes import Probes
from biopb_mcp.kernel.process import (
    BOOTSTRAP_FILE,
    KernelProcess,
    LaunchedKernel,
    wait_deadline,
)
from biopb_mcp.kernel.recording import SessionRecording
from biopb_mcp.kernel.states import Ending, ExecutionStatus, HostEnding, KernelState, KernelStatus
from biopb_mcp.kernel.viewer import wake_expression

if TYPE_CHECKING:
    from biopb_mcp.config.settings import Settings
    from biopb_mcp.kernel.notebook import SessionRecorder

logger = logging.getLogger(__name__)


class StartOutcome(StrEnum):
    """What ``start``/``restart`` did."""

    STARTED = "started"
    ALREADY_RUNNING = "already_running"
    RESTARTED = "restarted"
    """A kernel ran and was replaced: its namespace is lost."""
    STARTED_BY_RESTART = "started_by_restart"
    """``restart`` found no kernel and started one."""


_REPLY_GRACE = 0.5
"""Seconds an interrupted request may stay idle without its reply before it counts as ended
(the reply travels on another socket than the idle status, so it can trail it a little)."""

TICK_SECONDS = 1.0
"""``run`` waits in ticks this long, calling its ``on_tick`` after each (a caller's progress note)."""


@dataclass(frozen=True)
class RunOutcome:
    """The result of ``run``: the execution's page (its first, when it finished in time), and
    whether it was promoted to a background job because it was still running."""

    page: Rendered
    promoted: bool


@dataclass(frozen=True)
class KernelStart:
    """The result of ``start``/``restart``: what happened, and the ready kernel's ``status()``."""

    outcome: StartOutcome
    status: KernelStatus


@dataclass(frozen=True)
class Interruption:
    """The result of ``interrupt``: the job it targeted (None: none of the agent's ran) and whether
    it stopped within ``waited`` seconds (``status`` is its status then).

    ``withdrawn``: the job was held, unsent, behind another client's cell and was ended without
    running. ``refused``: the job was sent but has not started, so a signal would have hit the
    cell the kernel runs instead (nothing was sent). ``behind``: that other client's cell, when
    known; the kernel never interrupts it for the agent.
    """

    job_id: str | None
    status: ExecutionStatus | None = None
    stopped: bool = False
    waited: float = 0.0
    withdrawn: bool = False
    refused: bool = False
    behind: ForeignCell | None = None


WITHDRAWN_NOTE = (
    "Withdrawn before it was sent: it was waiting behind another client's cell, "
    "which was not touched. None of this code ran."
)
"""The ending note of an execution withdrawn while held."""


class KernelHost:
    """The server's one kernel: lazy start, executions, jobs, inspection, clean shutdown.

    Args:
        settings: a ``biopb_mcp.config.settings.Settings`` (any object with its attributes works):
            ``kernel`` (name, promote_after, max_output_chars, max_image_bytes, max_images,
            startup_timeout, request_timeout), ``runtime_dir``, ``state_dir``,
            ``kernel_log_file``, ``plugins_dir``, ``config_file``.

        recorder: writes the session notebook (every execution, one notebook per kernel
            start); None records nothing.

    Nothing starts until ``start()``. All methods are thread-safe.
    """

    def __init__(self, settings: Settings, recorder: SessionRecorder | None = None) -> None:
        self._settings = settings
        self._lock = threading.RLock()  # guards the fields below; never held while waiting
        self._life = threading.Lock()  # serialises start / restart / shutdown
        self._closing = threading.Event()  # set by shutdown(): a start in progress gives up
        self._state = KernelState.NOT_STARTED
        self._cause = ""
        """Why the kernel is error, dead or gone: what failed, or how it exited."""
        self._log_tail = ""
        """The kernel's last log lines when it failed to start or died."""
        self._failed_on: StartFailed | None = None
        """The failed start's facts (setting to change, joined kernel), for the not-ready answer."""
        self._generation = 0
        self._process: KernelProcess | None = None
        self._spec_desc = ""
        self._bootstrap: dict[str, Any] = {}
        self._link: KernelLink | None = None
        self._recording = SessionRecording(recorder, lambda: self._settings) if recorder is not None else None
        self._client = KernelClient(
            settings, self._not_ready, notebook=self._recording.status if self._recording else lambda: None
        )
        if self._recording is not None:
            self._client.events.subscribe(self._recording)
        LIVE_HOSTS.add(self)

    # -- state -------------------------------------------------------------------------------------
    @property
    def state(self) -> KernelState:
        """``not_started`` | ``starting`` | ``ready`` | ``dead`` | ``error``."""
        return self._state

    @property
    def recorder(self) -> SessionRecorder | None:
        """The session notebook writer, if recording."""
        return self._recording.recorder if self._recording is not None else None

    @property
    def events(self) -> ExecutionEvents:
        """Subscribe here to hear what executions do (the session notebook is one subscriber)."""
        return self._client.events

    def _notebook_status(self) -> str | None:
        return self._recording.status() if self._recording is not None else None

    def _not_ready(self, state: KernelState | None = None) -> KernelNotReady:
        state = state or self._state
        lost = state in (KernelState.DEAD, KernelState.ERROR, KernelState.GONE)
        cause, log_tail = (self._cause, self._log_tail) if lost else ("", "")
        # a short statement, for logs: the reader's sentence is written from the fields (text.kernel)
        if state == KernelState.NOT_STARTED:
            text = "No kernel is running."
        elif state == KernelState.STARTING:
            text = "The kernel is still starting."
        elif state == KernelState.ERROR:
            text = f"The kernel could not start: {cause}"
        elif state == KernelState.DEAD and cause:
            text = f"The kernel died ({cause})."
        elif state == KernelState.GONE and cause:
            text = f"The joined kernel is gone: {cause}."
        else:
            text = f"The kernel is {state}."
        failed = self._failed_on if state == KernelState.ERROR else None
        return KernelNotReady(
            text,
            state=state,
            cause=cause,
            log_tail=log_tail,
            config_file=str(self._settings.config_file),
            setting=failed.setting if failed else None,
            wanted=failed.wanted if failed else "",
            joined=bool(failed and failed.joined),
            kind=failed.kind if failed else KernelProblem.OTHER,
            **(failed.details if failed else {}),
        )

    def _require_ready(self) -> None:
        if self._state != KernelState.READY:
            raise self._not_ready()

    def _new_process(self) -> KernelProcess:
        """The process side for the next start: the kernel ``kernel.existing`` names (joined, not
        owned), else a kernel this server launches and owns."""
        if self._settings.kernel.existing:
            return AttachedKernel(self._settings)
        return LaunchedKernel(self._settings)

    @property
    def owns_kernel(self) -> bool:
        """False when the server joins a kernel its frontend owns (``kernel.existing``)."""
        return not self._settings.kernel.existing

    @property
    def link(self) -> KernelLink | None:
        """The files shared with the ``%biopb`` magics in the current kernel; None before ready."""
        return self._link

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> KernelStart:
        """Start the kernel if none is running; the recovery path after ``dead``/``error``.

        Idempotent: with a ready kernel it only reports it. Blocks until the kernel answers and
        its bootstrap (plugins) ran, at most ``kernel.startup_timeout`` seconds.

        Returns:
            What happened, with the kernel's status (pid, connection file, plugins loaded/failed).

        Raises:
            KernelNotReady: the kernel could not start (state ``error``); the message says why
                (bad ``kernel.name``, the kernel's last log lines, a timeout) and what to do.
        """
        if not self._life.acquire(timeout=self._settings.kernel.startup_timeout):
            raise self._not_ready(KernelState.STARTING)
        try:
            with self._lock:
                process = self._process
                if self._state == KernelState.READY and process is not None and process.is_alive():
                    return KernelStart(StartOutcome.ALREADY_RUNNING, self.status())
            self._teardown()
            return KernelStart(StartOutcome.STARTED, self._launch())
        finally:
            self._life.release()

    def restart(self) -> KernelStart:
        """Kill the kernel (its whole process group) and start a fresh one.

        The running job, if any, ends as ``aborted``.

        Returns:
            ``restarted`` (a namespace was lost) or ``started_by_restart``, with the new kernel's status.

        Raises:
            RestartRefused: the configuration names a kernel that cannot start (a kernel spec
                that does not exist): checked first, so the running kernel is left as it was.
            KernelNotReady: the new kernel could not start (state ``error``).
        """
        if not self.owns_kernel:
            raise KernelNotOwned("the kernel belongs to its frontend", action="restart")
        if not self._life.acquire(timeout=self._settings.kernel.startup_timeout):
            raise self._not_ready(KernelState.STARTING)
        try:
            had = self._process is not None
            if had:
                self._check_next_start()
            self._teardown(HostEnding(Ending.RESTARTED))
            status = self._launch()
        finally:
            self._life.release()
        return KernelStart(StartOutcome.RESTARTED if had else StartOutcome.STARTED_BY_RESTART, status)

    def _check_next_start(self) -> None:
        """Refuse a restart whose new kernel cannot start, before the running one is stopped."""
        try:
            self._new_process().check()
        except StartFailed as exc:
            raise RestartRefused(
                f"Restart refused: {exc}",
                reason=str(exc),
                setting=exc.setting,
                wanted=exc.wanted,
                config_file=str(self._settings.config_file),
            ) from None

    def reconfigure(self, settings: Settings) -> None:
        """Use ``settings`` from the next start on (a running kernel keeps running as it is)."""
        with self._lock:
            self._settings = settings
        self._client.reconfigure(settings)

    def shutdown(self) -> None:
        """Stop the kernel and kill its process group; idempotent. State becomes ``not_started``."""
        self._closing.set()
        acquired = self._life.acquire(timeout=self._settings.kernel.startup_timeout)
        try:
            self._teardown(HostEnding(Ending.SHUT_DOWN))
            with self._lock:
                self._state, self._cause, self._log_tail = KernelState.NOT_STARTED, "", ""
        finally:
            self._closing.clear()
            if acquired:
                self._life.release()

    def _launch(self) -> KernelStatus:
        """Start phases, then connect and wait until ready; on failure clean up and raise KernelNotReady."""
        ks = self._settings.kernel
        process = self._new_process()
        with self._lock:
            self._state, self._cause, self._log_tail = KernelState.STARTING, "", ""
            self._generation += 1
            generation = self._generation
            self._process = process
        deadline = time.monotonic() + ks.startup_timeout

        def remaining() -> float:
            return wait_deadline(deadline, ks.startup_timeout, process, self._closing.is_set)

        try:
            conn = process.start(remaining)
            with self._lock:
                self._spec_desc = conn.description
            joined = process if isinstance(process, AttachedKernel) else None
            self._client.connect(conn.info, process.is_alive, _KernelWatch(self, generation, joined))
            # a joined kernel may be running its notebook's cell: control answers meanwhile
            probes = self._client.probes
            probes.wait_ready(remaining, channel="control" if joined else "shell")
            process.post_start()
            boot = self._join(joined, remaining) if joined else probes.fetch_bootstrap(remaining)
            if boot is None and conn.is_python and not joined:
                logger.warning("kernel bootstrap did not run via exec_files; running it now")
                probes.run_silent(BOOTSTRAP_FILE.read_text(encoding="utf-8"), remaining())
                boot = probes.fetch_bootstrap(remaining)
            with self._lock:
                if not process.is_alive():
                    raise StartFailed("the kernel exited right after starting.")
                self._bootstrap = boot or {}
                self._state = KernelState.READY
                self._client.open()
            for failure in self._bootstrap.get("failed", []):
                logger.warning("kernel plugin %s failed: %s", failure.get("source"), failure.get("error"))
            for err in self._bootstrap.get("errors", []):
                logger.warning("kernel bootstrap problem: %s", err)
            logger.info("kernel ready: pid %s, %s", process.pid, conn.file)
            self._client.events.kernel_ready(process.pid, conn.description)
            with self._lock:
                self._link = KernelLink(Path(self._settings.runtime_dir), link_id(conn.info, conn.file))
            return self.status()
        except (OSError, KernelError) as exc:  # StartFailed is a KernelError
            log = process.log_tail()
            self._teardown()
            with self._lock:
                self._state, self._cause, self._log_tail = KernelState.ERROR, str(exc), log
                self._failed_on = exc if isinstance(exc, StartFailed) else None
            logger.error("kernel start failed: %s%s", exc, f"\nLast kernel log lines:\n{log}" if log else "")
            raise self._not_ready() from None

    def _join(self, joined: AttachedKernel, remaining: Callable[[], float]) -> dict[str, Any] | None:
        """Learn who the joined kernel is and give it the viewer plugin's Qt wake-up (without it a
        request can hang a kernel idling in Qt's loop for good: see ``wake_expression``); push the
        bootstrap only when ``kernel.existing_plugins``."""
        probes = self._client.probes
        answer, session = probes.evaluate(IDENTITY_EXPRESSION, remaining())
        joined.identify(answer, session)
        waking, _ = probes.evaluate(wake_expression(), remaining())
        logger.info("joined kernel: Qt wake-up running now: %s", waking is True)
        if not self._settings.kernel.existing_plugins:
            return {}
        env = bootstrap_env(self._settings)
        probes.run_silent(bootstrap_code(BOOTSTRAP_FILE.read_text(encoding="utf-8"), env), remaining())
        return probes.fetch_bootstrap(remaining) or {"errors": ["the bootstrap did not run in the joined kernel"]}

    def _teardown(self, ending: HostEnding | None = None) -> None:
        """Forget the current kernel and run its stop phases (caller holds ``_life``); a running
        execution ends as aborted, ``ending`` saying why."""
        with self._lock:
            self._generation += 1  # a death report from the old IO thread is now ignored
            process, self._process = self._process, None
            self._bootstrap = {}
            self._link = None
        self._client.abandon(ExecutionStatus.ABORTED, ending)
        self._client.disconnect()
        if process is not None:
            process.shutdown()

    def _on_death(self, generation: int) -> None:
        """IO thread: the kernel process exited without us asking."""
        with self._lock:
            process = self._process
            if generation != self._generation or process is None:
                return
            how = process.exit_reason()
            if not process.owned:
                self._state, self._cause, self._log_tail = KernelState.GONE, how, ""
            else:
                self._state, self._cause, self._log_tail = KernelState.DEAD, how, process.log_tail()
            lost, ending = self._state, HostEnding(Ending.KERNEL_LOST, how, self._log_tail)
        logger.error("kernel %s (%s)", "gone" if not process.owned else "died", how)
        self._client.abandon(ExecutionStatus.DEAD, ending, kernel_lost=lost)

    # -- executions --------------------------------------------------------------------------------
    @property
    def jobs(self) -> Jobs:
        """Every execution by id: ``submit``/``wait`` (a caller that wants the Execution itself),
        ``render``, ``poll`` (a page by job id and offset), ``promote``."""
        return self._client.jobs

    @property
    def probes(self) -> Probes:
        """Questions to an idle kernel outside the agent's cells: ``inspect``, ``query``,
        ``query_when_idle``."""
        return self._client.probes

    def run(self, code: str, promote_after: float, on_tick: Callable[[float], bool] | None = None) -> RunOutcome:
        """Run ``code``: its page once it finished, or a background job once ``promote_after``
        seconds passed with it still running.

        Waits in ticks of ``TICK_SECONDS``, calling ``on_tick(seconds waited)`` after each; when it
        returns False (the caller gave up) or raises, the execution goes on as a job at once.
        ``input()`` in the code raises ``StdinNotImplementedError`` in the kernel (stdin is not
        offered).

        Raises:
            KernelNotReady: no ready kernel (nothing was sent).
            KernelBusy: code is already running; ``job_id`` names it.
        """
        jobs = self._client.jobs
        ex = jobs.submit(code)
        waited = 0.0
        while True:
            tick = min(TICK_SECONDS, max(promote_after - waited, 0.0))
            if jobs.wait(ex, tick):
                return RunOutcome(jobs.render(ex), promoted=False)
            waited += tick
            try:
                keep_waiting = on_tick is None or on_tick(waited)
            except BaseException:
                jobs.promote(ex)  # the code runs on whatever happened to the caller: a job it can find
                raise
            if not keep_waiting or waited >= promote_after:
                break
        jobs.promote(ex)
        return RunOutcome(jobs.poll(ex.job_id), promoted=True)

    def interrupt(self) -> Interruption:
        """Interrupt the running code (as the kernel's spec says) and wait briefly for it to stop.

        Returns:
            The job it targeted and whether it stopped (``job_id`` None: nothing ran).

        Raises:
            KernelNotReady: no running kernel.
        """
        jobs, cells = self._client.jobs, self._client.cells
        with self._lock:
            self._require_ready()
            process = self._process
            ex = jobs.current
        if ex is None or process is None:
            return Interruption(None, behind=cells.foreign)
        behind = cells.foreign
        if jobs.withdraw(ex, note=WITHDRAWN_NOTE):
            self._note_withdrawn(ex)
            return Interruption(ex.job_id, ex.status, stopped=True, withdrawn=True, behind=behind)
        wait = min(10.0, self._settings.kernel.request_timeout)
        # ipykernel ignores SIGINT until it starts handling a request, so a signal sent while the
        # request is still queued (a loaded machine) is dropped and the code runs on: send it once
        # the kernel has announced the code. Queued behind another client's cell (one that began
        # as ours was sent, or before this server joined), a signal would stop that cell: refused.
        if not ex.began.wait(0.0 if behind is not None else wait):
            behind = cells.foreign
            if behind is not None or not process.owned:
                return Interruption(ex.job_id, ex.status, refused=True, behind=behind)
        process.interrupt(self._client.send_interrupt_request)
        stopped = self._wait_stopped(ex, wait)
        return Interruption(ex.job_id, ex.status, stopped, wait)

    def _wait_stopped(self, ex: Execution, timeout: float) -> bool:
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
                    self._client.jobs.end(
                        ex,
                        ExecutionStatus.INTERRUPTED,
                        note="The interrupt arrived before the code started: none of it ran.",
                    )
            if now >= deadline:
                break
        return ex.done.is_set()

    def _note_withdrawn(self, ex: Execution) -> None:
        """Tell the scientist's side (their console or notebook shows it after their cell)."""
        link = self._link
        if link is not None:
            link.note_withdrawn(ex.job_id, ex.code)

    # -- status ------------------------------------------------------------------------------------
    def status(self) -> KernelStatus:
        """A snapshot of the kernel, as facts; never blocks on the kernel."""
        with self._lock:
            process = self._process
            proc = process.status() if process is not None else {}
            boot = self._bootstrap
            failed = self._failed_on if self._state == KernelState.ERROR else None
            return KernelStatus(
                state=self._state,
                cause=self._cause,
                log_tail=self._log_tail,
                failed_kind=failed.kind if failed else KernelProblem.OTHER,
                failed_details=dict(failed.details) if failed else {},
                owned=self.owns_kernel,
                interrupt=proc.get("interrupt", process.interrupt_mode if process else None),
                kernel_host=proc.get("kernel_host"),
                pid=proc.get("pid"),
                connection_file=proc.get("connection_file"),
                transport=proc.get("transport", "ipc"),
                socket_dir=proc.get("socket_dir"),
                kernel_spec=self._spec_desc or (self._settings.kernel.name or "this server's Python"),
                current_job=self._client.jobs.current_job(),
                plugins_loaded=[p.get("source", p.get("name")) for p in boot.get("loaded", [])],
                builtin_helpers=[
                    name for p in boot.get("builtin", []) if isinstance(p, dict) for name in p.get("names", [])
                ],
                plugins_failed=[
                    {"plugin": p.get("source", p.get("name")), "error": p.get("error", "")}
                    for p in boot.get("failed", [])
                ],
                bootstrap_errors=list(boot.get("errors", [])),
                parent_death_watch=bool(boot.get("lifeline", False)) or bool(proc.get("reaper")),
                kernel_log=str(self._settings.kernel_log_file),
                runtime_dir=str(self._settings.runtime_dir),
                session_notebook=self._notebook_status(),
                server_pid=os.getpid(),
                existing=proc.get("existing"),
                other_cell=self._client.cells.other_cell(),
            )


class _KernelWatch(ConnectionObserver):
    """The host's ear on one start's connection: a joined kernel checks each message's session
    (a new one: restarted by its frontend); a loss is reported with the start's generation, so a
    report from an older connection's IO thread is ignored."""

    def __init__(self, host: KernelHost, generation: int, joined: AttachedKernel | None) -> None:
        self._host = host
        self._generation = generation
        self._joined = joined

    def seen(self, msg: dict[str, Any]) -> None:
        if self._joined is not None:
            self._joined.saw_message(msg)

    def lost(self) -> None:
        self._host._on_death(self._generation)


class LiveHosts:
    """The hosts of this process that may still hold a kernel.

    Process-wide by nature: interpreter exit is one event of the process, so one exit hook walks
    every host still alive (held weakly, so a dropped host is not kept for the hook) and shuts
    down the kernels they own, instead of each host registering a hook of its own.
    """

    def __init__(self) -> None:
        self._hosts: weakref.WeakSet[KernelHost] = weakref.WeakSet()
        atexit.register(self.shutdown_all)

    def add(self, host: KernelHost) -> None:
        self._hosts.add(host)

    def shutdown_all(self) -> None:
        for host in list(self._hosts):
            if host._process is not None:
                with contextlib.suppress(Exception):
                    host.shutdown()


LIVE_HOSTS = LiveHosts()
"""The one registry of live hosts (see :class:`LiveHosts`)."""
