"""A kernel the server joins but does not own: the scientist's notebook kernel, or one on another
machine reached through an SSH tunnel.

Its frontend started it and alone may restart or shut it down, so the server only connects:
the connection file is found the way ``jupyter console --existing`` finds it
(:mod:`biopb_mcp.kernel.existing`); the kernel's pid is asked of the kernel itself and used only
when it is a live process on this machine; an interrupt follows the kernel spec's
``interrupt_mode`` (a signal to a local pid, else an ``interrupt_request`` on the control channel).
Whether the kernel is still the one joined is judged by its pid when local, by its heartbeat
otherwise, and by the session id on its messages (a restarted kernel has a new one).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biopb_mcp.errors import KernelError, StartFailed
from biopb_mcp.fs import process_groups
from biopb_mcp.fs.runtime import pid_alive
from biopb_mcp.kernel.env import ATTACHED_ENV
from biopb_mcp.kernel.existing import find_existing, read_connection_info
from biopb_mcp.kernel.process import Connection, KernelProcess

if TYPE_CHECKING:
    from biopb_mcp.config.settings import Settings

logger = logging.getLogger(__name__)

__all__ = [
    "HEARTBEAT_GRACE",
    "IDENTITY_EXPRESSION",
    "SESSION_PROBE_INTERVAL",
    "AttachedKernel",
    "Heartbeat",
    "SessionProbe",
    "bootstrap_code",
]

HEARTBEAT_GRACE = 6.0
"""Seconds without a heartbeat before a kernel with no local pid counts as gone: generous, as a
kernel on a loaded node (or at the far end of a tunnel) can answer late without being dead."""

IDENTITY_EXPRESSION = "__import__('json').dumps([__import__('os').getpid(), __import__('socket').gethostname()])"
"""Evaluated in the kernel as a silent user expression: its pid and the machine it runs on."""


class Heartbeat:
    """jupyter-client's heartbeat channel on its own zmq context, with a "last beat" clock."""

    def __init__(self, info: dict[str, Any]) -> None:
        import zmq

        from biopb_mcp.kernel.sockets import KernelSockets

        self._ctx = zmq.Context()
        self._channel = KernelSockets(info, self._ctx).heartbeat()
        self._channel.start()
        self._last_beat = time.monotonic()

    def alive(self, grace: float = HEARTBEAT_GRACE) -> bool:
        """True until the kernel has missed every beat for ``grace`` seconds."""
        now = time.monotonic()
        if self._channel.is_beating():
            self._last_beat = now
        return now - self._last_beat < grace

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a thread of jupyter-client's; best effort at teardown
            self._channel.stop()
            self._channel.close()
        self._ctx.term()


SESSION_PROBE_INTERVAL = 2.0
"""Seconds between the ``kernel_info_request``s that ask a kernel with no local pid who it is."""


class SessionProbe:
    """Asks a joined kernel its session id every ``SESSION_PROBE_INTERVAL`` seconds.

    A restarted kernel is known by the new session id on its messages; waiting for one on iopub
    alone misses a restart whose first messages went out while the subscription reconnected,
    and nothing else may ever arrive. A ``kernel_info_request`` on the control channel (answered
    even while the kernel runs code) brings a reply from whichever kernel now serves the
    connection file's ports, so a restart is seen within about two intervals whatever the
    traffic. It runs on its own zmq context and thread, apart from the host's channels.
    """

    def __init__(self, info: dict[str, Any], session: str, on_restart: Callable[[], None]) -> None:
        import zmq

        from biopb_mcp.kernel.sockets import KernelSockets

        self._expected = session
        self._on_restart = on_restart
        self._ctx = zmq.Context()
        self._sockets = KernelSockets(info, self._ctx)
        self._session = self._sockets.session()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="biopb-session-probe", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import zmq

        sock = self._sockets.connect("control")
        try:
            while not self._stop.is_set():
                self._session.send(sock, "kernel_info_request", {})
                deadline = time.monotonic() + SESSION_PROBE_INTERVAL
                while (left := deadline - time.monotonic()) > 0 and not self._stop.is_set():
                    if not sock.poll(int(min(left, 0.2) * 1000)):
                        continue
                    try:
                        _idents, msg = self._session.recv(sock, mode=zmq.NOBLOCK)
                    except (ValueError, KeyError, TypeError):  # bad signature or framing: not our kernel's
                        continue
                    sender = (msg or {}).get("header", {}).get("session")
                    if sender and sender != self._expected:
                        self._on_restart()
                        return
        except zmq.ZMQError:  # the context was closed under us: the probe is over
            pass
        finally:
            sock.close(linger=0)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(SESSION_PROBE_INTERVAL + 1)
        self._ctx.term()


class AttachedKernel(KernelProcess):
    """A kernel this server joins through an existing connection file and does not own.

    ``start`` finds and reads the connection file (again at every start: a frontend restart may
    have rewritten it); the host then connects and calls :meth:`identify` with the kernel's own
    answer to ``IDENTITY_EXPRESSION``. ``shutdown`` only stops watching: the kernel is left to
    its frontend.
    """

    owned = False

    def __init__(self, settings: Settings) -> None:
        self.spec = settings.kernel.existing
        self.connection_file: Path | None = None
        self.info: dict[str, Any] = {}
        self.kernel_name = ""
        self.reported_pid: int | None = None
        self.host: str | None = None
        self.session: str | None = None
        """The kernel's session id (on every message it sends): a new one means it was restarted."""
        self.restarted = threading.Event()
        self._pid: int | None = None
        self._heartbeat: Heartbeat | None = None
        self._probe: SessionProbe | None = None

    @property
    def pid(self) -> int | None:
        """The kernel's pid when it runs on this machine and was alive when joined; else None."""
        return self._pid

    def start(self, remaining: Callable[[], float]) -> Connection:
        """Find and read the connection file (raises StartFailed naming what is missing)."""
        try:
            self.connection_file = find_existing(self.spec)
            self.info = read_connection_info(self.connection_file)
        except KernelError as exc:
            raise StartFailed(f"cannot join the existing kernel: {exc}", joined=True) from None
        self.kernel_name = str(self.info.get("kernel_name") or "")
        self.interrupt_mode = _interrupt_mode(self.kernel_name)
        desc = f"joined kernel {self.kernel_name}" if self.kernel_name else "joined kernel"
        self.connection = Connection(dict(self.info), self.connection_file, desc, is_python=True)
        return self.connection

    def identify(self, answer: Any, session: str | None) -> None:
        """Take the kernel's answer to ``IDENTITY_EXPRESSION`` and the session id of its reply."""
        self.session = session
        if isinstance(answer, list) and len(answer) == 2 and isinstance(answer[0], int):
            self.reported_pid, self.host = answer[0], str(answer[1])
            # a tunnelled kernel also shows a loopback address, but the name of another machine
            here = self.info.get("transport") == "ipc" or _is_loopback(str(self.info.get("ip", "")))
            local = here and self.host == socket.gethostname()
            self._pid = self.reported_pid if local and pid_alive(self.reported_pid) else None
        if self._pid is None:
            self._heartbeat = Heartbeat(self.info)
            if session:
                self._probe = SessionProbe(self.info, session, self.restarted.set)

    def saw_message(self, msg: dict[str, Any]) -> None:
        """Any message from the kernel: one from another session means the kernel was replaced."""
        sender = msg.get("header", {}).get("session")
        if self.session and sender and sender != self.session:
            self.restarted.set()

    def is_alive(self) -> bool:
        """Still the kernel that was joined: same process (or heartbeat), not restarted."""
        if self.restarted.is_set():
            return False
        if self._pid is not None:
            return pid_alive(self._pid)
        return self._heartbeat.alive() if self._heartbeat is not None else True

    def exit_reason(self) -> str:
        """Why the joined kernel is no longer there."""
        if self.restarted.is_set():
            return "the kernel was restarted from its frontend (its namespace is new)"
        if self._pid is not None:
            return f"the kernel process (pid {self._pid}) exited: its frontend shut it down or restarted it"
        return (
            f"the kernel stopped answering its heartbeat for {HEARTBEAT_GRACE:g} s (shut down, "
            "restarted, or the tunnel to it closed)"
        )

    def _signals(self) -> bool:
        """True when an interrupt is a SIGINT: the spec says ``signal`` and the pid is local.

        Not on Windows: there only the process that launched a kernel holds its interrupt event,
        and ``os.kill`` with SIGINT would terminate the kernel instead of interrupting it.
        """
        return self.interrupt_mode == "signal" and self._pid is not None and os.name == "posix"

    def interrupt(self, send_interrupt_request: Callable[[], None]) -> None:
        """SIGINT when the spec's mode is ``signal`` and the pid is local; else ``interrupt_request``.

        Like jupyter-client, signal the kernel's process group when the kernel leads one (so its
        subprocesses stop too), never this server's own group.
        """
        if self._signals() and self._pid is not None:
            with contextlib.suppress(ProcessLookupError):
                pgid = process_groups.group_of(self._pid)
                if pgid is not None and pgid == self._pid and pgid != process_groups.own_group():
                    process_groups.signal_group(pgid, signal.SIGINT)
                else:
                    os.kill(self._pid, signal.SIGINT)
                return
        send_interrupt_request()

    def shutdown(self) -> None:
        """Stop watching the kernel; the kernel itself, its file and its namespace are left alone."""
        if self._heartbeat is not None:
            self._heartbeat.close()
            self._heartbeat = None
        if self._probe is not None:
            self._probe.close()
            self._probe = None

    def status(self) -> dict[str, Any]:
        out = super().status()
        out.update(
            pid=self._pid if self._pid is not None else self.reported_pid,
            mode="attached",
            existing=self.spec,
            kernel_host=self.host,
            interrupt="signal" if self._signals() else "interrupt_request",
        )
        return out


def _is_loopback(ip: str) -> bool:
    return ip in ("localhost", "::1", "0.0.0.0", "") or ip.startswith("127.")


def _interrupt_mode(kernel_name: str) -> str:
    """The kernel spec's ``interrupt_mode`` when the spec is installed here; ``signal`` otherwise."""
    if not kernel_name:
        return "signal"
    try:
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

        return KernelSpecManager().get_kernel_spec(kernel_name).interrupt_mode or "signal"
    except (NoSuchKernel, OSError, ValueError, json.JSONDecodeError):
        return "signal"


def bootstrap_code(source: str, env: dict[str, str]) -> str:
    """The bootstrap as one silent cell for a joined kernel (``kernel.existing_plugins = true``).

    A joined kernel was not started with our environment, so the cell sets the variables the
    bootstrap reads, runs it once more even if an earlier attach ran it (once per attach), and
    takes the variables out of the kernel's environment again: the scientist's ``os.environ``
    is left as it was.
    """
    names = sorted({*env, ATTACHED_ENV})
    return "\n".join(
        [
            f"__import__('os').environ.update({ {**env, ATTACHED_ENV: '1'}!r})",
            "globals().pop('__biopb_bootstrap__', None)",
            "try:",
            *("    " + line for line in source.splitlines()),
            "finally:",
            f"    [__import__('os').environ.pop(name, None) for name in {names!r}]",
            "",
        ]
    )
