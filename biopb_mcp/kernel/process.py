"""The process side of the kernel: where it runs, who owns it, its lifecycle in named phases.

``KernelProcess`` is the small interface the host needs from that side; ``LaunchedKernel`` is the
kernel this server starts and owns (its own session and process group, a lifeline pipe, a private
connection file). A kernel the server only joins through an existing connection file is a second
implementation: it cannot be restarted or shut down by us and interrupts as its spec says.
The channels, executions and jobs live on the client side (``client.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jupyter_client.connect import write_connection_file

from biopb_mcp.errors import KernelProblem, StartFailed, UnsafeRuntimeDir
from biopb_mcp.fs import process_groups
from biopb_mcp.fs.runtime import CONFIG_DIR_KEY, kernel_stem
from biopb_mcp.kernel import lifeline
from biopb_mcp.kernel.env import LIFELINE_FD_ENV, launch_env
from biopb_mcp.kernel.inside import INSIDE_DIR
from biopb_mcp.kernel.link import link_id

if TYPE_CHECKING:
    from biopb_mcp.config.settings import Settings

logger = logging.getLogger(__name__)

INLINE_MPL_BACKEND = "module://matplotlib_inline.backend_inline"
BOOTSTRAP_FILE = INSIDE_DIR / "bootstrap.py"
"""Run inside the kernel at start (see ``inside/bootstrap.py``)."""

SOCKETS = range(1, 6)
"""Port numbers of the five IPC sockets ``write_connection_file`` assigns (``<prefix>-<N>``)."""


def kernel_transport() -> str:
    """``ipc`` (Unix sockets in the private runtime dir: only this user can connect) where libzmq
    has it; else ``tcp`` on loopback (Windows builds without it), where any local process can
    connect and only the connection file's key keeps it out."""
    import zmq

    return "ipc" if zmq.has("ipc") else "tcp"


@dataclass
class Connection:
    """How to reach a kernel, and what kind it is."""

    info: dict[str, Any]
    """The connection info (as in the connection file): transport, ip, ports, key, scheme."""
    file: Path | None
    description: str
    """The kernel spec in a few words, for status."""
    is_python: bool
    """An IPython kernel: the bootstrap (plugins, lifeline watcher) can run in it."""


class KernelProcess(ABC):
    """Where a kernel runs and who owns it: what the host needs from the process side.

    ``start`` runs the start phases and returns how to connect; the host then connects a client,
    waits for ready and calls ``post_start``. ``shutdown`` runs the stop phases. All methods are
    called with the host's lifecycle lock held, except ``is_alive`` (the client's IO thread),
    ``interrupt`` and ``status``.
    """

    owned: bool = True
    """False for a kernel another frontend started: restart and shutdown are not ours to do."""
    interrupt_mode: str = "signal"
    """The spec's ``interrupt_mode``: ``signal`` (SIGINT to the process) or ``message``
    (``interrupt_request`` on the control channel)."""
    connection: Connection | None = None

    @property
    @abstractmethod
    def pid(self) -> int | None:
        """The kernel's pid when known and local."""

    @abstractmethod
    def start(self, remaining: Callable[[], float]) -> Connection:
        """Bring the kernel up far enough to connect; ``remaining()`` raises StartFailed once
        the start must give up."""

    def check(self) -> None:
        """Raise StartFailed when ``start`` would fail on its configuration (a kernel spec that
        does not exist), without starting anything: a restart checks before it stops the kernel."""
        return None

    def post_start(self) -> None:
        """Called once the kernel answered on every channel; nothing to do unless overridden."""
        return None

    @abstractmethod
    def is_alive(self) -> bool:
        """False once the kernel is gone (polled about every 200 ms from the IO thread)."""

    @abstractmethod
    def exit_reason(self) -> str:
        """How the kernel went away, in a few words (``exit code 1``, ``killed by signal SIGKILL``)."""

    def log_tail(self) -> str:
        """The kernel's last log lines since this start; empty when it has no log of ours."""
        return ""

    @abstractmethod
    def interrupt(self, send_interrupt_request: Callable[[], None]) -> None:
        """Interrupt the running code: a signal, or ``send_interrupt_request()`` on control."""

    @abstractmethod
    def shutdown(self) -> None:
        """Stop (owned) or leave (not owned) the kernel and remove what this start created."""

    def status(self) -> dict[str, Any]:
        """What this process adds to the host's status."""
        conn = self.connection
        return {
            "pid": self.pid,
            "connection_file": str(conn.file) if conn and conn.file else None,
            "transport": conn.info.get("transport", "ipc") if conn else "ipc",
            "socket_dir": None,
            "reaper": False,
        }


@dataclass
class LaunchPlan:
    """The outcome of ``pre_start``: everything ``launch`` needs, nothing started yet."""

    argv: list[str]
    env: dict[str, str]
    connection: Connection
    socket_prefix: Path
    socket_dir: Path | None
    """A short private dir holding the sockets when the runtime dir's path was too long."""
    log_path: Path


class LaunchedKernel(KernelProcess):
    """A kernel this server starts and owns: its own session, killed with its process group.

    Start phases: ``pre_start`` (spec, argv, env, connection file), ``launch`` (the process and
    the reaper watching the lifeline), ``post_start`` (tighten socket modes). Stop phases:
    ``request_shutdown`` (close the lifeline: the kernel exits by itself), ``finish_shutdown``
    (SIGTERM then SIGKILL the group, reap the reaper), ``cleanup_resources`` (connection file,
    sockets).
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._proc: subprocess.Popen[bytes] | None = None
        self._pgid: int | None = None
        self._lifeline_w: int | None = None
        self._reaper: subprocess.Popen[bytes] | None = None
        """Watchdog that kills the kernel's group when the lifeline closes (server death)."""
        self._plan: LaunchPlan | None = None
        self._log_start = 0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # -- start phases ------------------------------------------------------------------------------
    def start(self, remaining: Callable[[], float]) -> Connection:
        plan = self.pre_start()
        remaining()
        self.launch(plan)
        return plan.connection

    def pre_start(self) -> LaunchPlan:
        """Choose the spec, write a private connection file, build argv and env."""
        settings, ks = self._settings, self._settings.kernel
        try:
            runtime = lifeline.private_dir(Path(settings.runtime_dir))
        except OSError as exc:  # retrying cannot help: say which setting moves it
            said = f"cannot use the runtime dir {settings.runtime_dir} ({exc.strerror or exc})."
            setting, wanted = "server.runtime_dir", "to a writable directory"
            if isinstance(exc, UnsafeRuntimeDir):  # the reader is told the way past that subdirectory
                raise StartFailed(
                    said,
                    setting=setting,
                    wanted=wanted,
                    kind=KernelProblem.RUNTIME_DIR_UNSAFE,
                    runtime_dir=str(settings.runtime_dir),
                    refused=exc,
                ) from None
            raise StartFailed(said, setting=setting, wanted=wanted) from None
        stem = kernel_stem(os.getpid())
        conn = runtime / f"{stem}.json"
        argv, spec_env, desc, is_python = self._kernel_command(conn)
        prefix, sock_dir = lifeline.socket_prefix(runtime, stem)
        if sock_dir is not None:
            logger.info("runtime dir %s is too long for IPC socket paths; sockets in %s", runtime, sock_dir)
        # `biopb-mcp console` joins only kernels of its own config (Jupyter ignores extra keys)
        own: dict[str, Any] = {CONFIG_DIR_KEY: str(settings.config_dir)}
        transport = kernel_transport()
        _, info = write_connection_file(
            str(conn),
            ip=str(prefix) if transport == "ipc" else "127.0.0.1",
            transport=transport,
            key=uuid.uuid4().hex.encode(),
            kernel_name=ks.name or "python3",
            **own,
        )
        os.chmod(conn, 0o600)
        if is_python:
            argv.append(f"--IPKernelApp.exec_files={BOOTSTRAP_FILE}")
            # history in memory: kernels sharing the profile's SQLite file (other servers, the
            # user's own IPython) collide, and an interrupt landing in a history write puts
            # IPython's "Session/line number was not unique" notice into the next result;
            # the session notebook is the lasting record of what ran
            argv.append("--HistoryManager.hist_file=:memory:")
        log_path = Path(settings.kernel_log_file)
        env = {**os.environ, **spec_env}
        # the presence file the server shares with this kernel: its cell hook reads it
        agent_file = runtime / f"agent-{link_id(dict(info), conn)}.json"
        env.update(launch_env(settings, umask=lifeline.current_umask(), agent_file=agent_file))
        env.pop("JPY_PARENT_PID", None)
        if is_python and "MPLBACKEND" not in spec_env:
            # figures must come back to the agent as PNGs, whatever backend the user's shell
            # names (Agg shows nothing, a GUI backend opens windows on the user's screen);
            # the variable alone imports nothing, so kernel start does not pay for matplotlib
            env["MPLBACKEND"] = INLINE_MPL_BACKEND
        self._plan = LaunchPlan(argv, env, Connection(dict(info), conn, desc, is_python), prefix, sock_dir, log_path)
        self.connection = self._plan.connection
        return self._plan

    def check(self) -> None:
        """Find ``kernel.name``'s spec (raises StartFailed naming the specs there are)."""
        if self._settings.kernel.name:
            self._manager(None)

    def _manager(self, conn: Path | None) -> Any:
        """jupyter_client's KernelManager for ``kernel.name`` with its spec found; StartFailed if none."""
        from jupyter_client.kernelspec import NoSuchKernel
        from jupyter_client.manager import KernelManager

        name = self._settings.kernel.name
        manager = KernelManager(kernel_name=name, **({"connection_file": str(conn)} if conn else {}))
        try:
            spec = manager.kernel_spec
        except NoSuchKernel:
            try:
                known = ", ".join(sorted(manager.kernel_spec_manager.find_kernel_specs())) or "none installed"
            except Exception:  # listing is only a hint
                known = "unknown"
            raise StartFailed(
                f"no Jupyter kernel spec named {name!r} (available: {known}).",
                setting="kernel.name",
                wanted='to one of those, or to "" for the server\'s own Python',
            ) from None
        assert spec is not None  # a non-empty name either finds a spec or raises
        return manager

    def _kernel_command(self, conn: Path) -> tuple[list[str], dict[str, str], str, bool]:
        """(argv, extra env, description, is_python) for ``kernel.name``, formatted by jupyter_client."""
        name = self._settings.kernel.name
        if not name:
            argv = [sys.executable, "-m", "ipykernel_launcher", "-f", str(conn)]
            return argv, {}, f"this server's Python ({sys.executable})", True
        # jupyter_client's own formatting: {connection_file}, {resource_dir}, {prefix}, and a
        # bare "python" in argv[0] becomes this interpreter, exactly as `jupyter console` runs it
        manager = self._manager(conn)
        spec = manager.kernel_spec
        self.interrupt_mode = spec.interrupt_mode or "signal"
        argv = manager.format_kernel_cmd()
        return argv, dict(spec.env or {}), f"{name} ({spec.resource_dir})", spec.language == "python"

    def launch(self, plan: LaunchPlan) -> None:
        """Start the kernel process in its own session, with the lifeline and its reaper."""
        read_fd, write_fd = os.pipe()
        env = {**plan.env, LIFELINE_FD_ENV: str(read_fd)}
        try:
            lifeline.rotate_log(plan.log_path)
            self._log_start = plan.log_path.stat().st_size if plan.log_path.exists() else 0
            proc = lifeline.launch(plan.argv, env, plan.log_path, read_fd)
        except OSError as exc:
            os.close(write_fd)
            os.close(read_fd)
            raise StartFailed(f"could not run {plan.argv[0]!r}: {exc}.") from exc
        try:
            self._reaper = lifeline.launch_reaper(read_fd, proc.pid)
        except OSError as exc:  # the in-kernel watcher still covers Python kernels
            logger.warning("could not start the kernel reaper: %s", exc)
        finally:
            os.close(read_fd)
        self._proc, self._lifeline_w = proc, write_fd
        self._pgid = process_groups.group_of(proc.pid)

    def post_start(self) -> None:
        """Tighten the sockets to 0600 (bound under umask 0o077 already): agent code may print secrets."""
        if self._plan is None:
            return
        for n in SOCKETS:
            with contextlib.suppress(OSError):
                os.chmod(f"{self._plan.socket_prefix}-{n}", 0o600)

    # -- running -----------------------------------------------------------------------------------
    def is_alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_reason(self) -> str:
        code = self._proc.returncode if self._proc is not None else None
        if code is not None and code < 0:
            try:
                return f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def log_tail(self) -> str:
        if self._proc is None or self._plan is None:
            return ""
        return lifeline.log_tail(self._plan.log_path, self._log_start)

    def interrupt(self, send_interrupt_request: Callable[[], None]) -> None:
        """As jupyter_client's manager does: the spec's ``interrupt_mode`` says a message on
        control or a signal (see ``lifeline.interrupt``)."""
        if self.interrupt_mode == "message":
            send_interrupt_request()
        elif self._proc is not None:
            lifeline.interrupt(self._proc, self._pgid)

    # -- stop phases -------------------------------------------------------------------------------
    def shutdown(self) -> None:
        self.request_shutdown()
        self.finish_shutdown()
        self.cleanup_resources()

    def request_shutdown(self) -> None:
        """Close the lifeline: the kernel sees EOF and exits by itself, children included."""
        write_fd, self._lifeline_w = self._lifeline_w, None
        if write_fd is not None:
            with contextlib.suppress(OSError):
                os.close(write_fd)

    def finish_shutdown(self) -> None:
        """Kill what is left of the kernel's process group and reap the reaper."""
        if self._proc is not None:
            lifeline.kill_group(self._proc, self._pgid)
        reaper, self._reaper = self._reaper, None
        if reaper is not None:  # it saw the closed lifeline and finds the group gone: reap it
            try:
                reaper.wait(2.0)
            except subprocess.TimeoutExpired:
                reaper.kill()
                reaper.wait()

    def cleanup_resources(self) -> None:
        """Remove the connection file, the sockets and a fallback socket dir."""
        plan, self._plan = self._plan, None
        if plan is None:
            return
        sockets = [Path(f"{plan.socket_prefix}-{n}") for n in SOCKETS]
        lifeline.remove_quietly(plan.connection.file, *sockets, plan.socket_dir)

    def status(self) -> dict[str, Any]:
        out = super().status()
        out["socket_dir"] = str(self._plan.socket_dir) if self._plan and self._plan.socket_dir else None
        out["reaper"] = self._reaper is not None and self._reaper.poll() is None
        return out


def wait_deadline(deadline: float, timeout: float, process: KernelProcess, closing: Callable[[], bool]) -> float:
    """Seconds left before ``deadline``; raises StartFailed when the start must give up."""
    if closing():
        raise StartFailed("the server is shutting down.")
    if not process.is_alive() and process.pid is not None:
        raise StartFailed(f"the kernel process exited during start-up ({process.exit_reason()}).")
    left = deadline - time.monotonic()
    if left <= 0:
        raise StartFailed(
            f"the kernel did not become ready within {timeout} s.",
            setting="kernel.startup_timeout",
            wanted=f"to more than {timeout} s if the machine is slow",
        )
    return left
