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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biopb_mcp.kernel.existing import find_existing, read_connection_info
from biopb_mcp.runtime_files import pid_alive

logger = logging.getLogger(__name__)

__all__ = ["HEARTBEAT_GRACE", "IDENTITY_EXPRESSION", "AttachedKernel", "Heartbeat", "bootstrap_code"]

HEARTBEAT_GRACE = 6.0
"""Seconds without a heartbeat before a kernel with no local pid counts as gone: generous, as a
kernel on a loaded node (or at the far end of a tunnel) can answer late without being dead."""

IDENTITY_EXPRESSION = (
    "__import__('json').dumps([__import__('os').getpid(), __import__('socket').gethostname()])"
)
"""Evaluated in the kernel as a silent user expression: its pid and the machine it runs on."""


class Heartbeat:
    """jupyter-client's heartbeat channel on its own zmq context, with a "last beat" clock."""

    def __init__(self, info: dict[str, Any]) -> None:
        import zmq
        from jupyter_client.channels import HBChannel

        self._ctx = zmq.Context()
        if info["transport"] == "ipc":
            address = f"ipc://{info['ip']}-{info['hb_port']}"
        else:
            address = f"tcp://{info['ip']}:{info['hb_port']}"
        self._channel = HBChannel(context=self._ctx, address=address)
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


@dataclass
class AttachedKernel:
    """What the server knows of a kernel it joined: where, which process, how to interrupt it.

    Args:
        spec: the connection file as configured (``kernel.existing`` / ``--existing``): a path,
            a name looked up in Jupyter's runtime dir, or ``kernel-*.json`` for the newest.
    """

    spec: str
    connection_file: Path | None = None
    info: dict[str, Any] = field(default_factory=dict)
    pid: int | None = None
    """The kernel's pid, when it runs on this machine and is alive; else None."""
    reported_pid: int | None = None
    host: str | None = None
    interrupt_mode: str = "signal"
    kernel_name: str = ""
    session: str | None = None
    """The kernel's session id (on every message it sends): a new one means it was restarted."""
    restarted: threading.Event = field(default_factory=threading.Event)
    _heartbeat: Heartbeat | None = None

    def locate(self) -> dict[str, Any]:
        """Find and read the connection file (again: a restart may have rewritten it).

        Raises:
            KernelError: no file, or not a connection file; the message says which.
        """
        self.connection_file = find_existing(self.spec)
        self.info = read_connection_info(self.connection_file)
        self.kernel_name = str(self.info.get("kernel_name") or "")
        self.interrupt_mode = _interrupt_mode(self.kernel_name)
        self.pid = self.reported_pid = self.host = self.session = None
        self.restarted.clear()
        return self.info

    def identify(self, answer: Any, session: str | None) -> None:
        """Take the kernel's answer to ``IDENTITY_EXPRESSION`` and the session id of its reply."""
        self.session = session
        if isinstance(answer, list) and len(answer) == 2 and isinstance(answer[0], int):
            self.reported_pid, self.host = answer[0], str(answer[1])
            # a tunnelled kernel also shows a loopback address, but the name of another machine
            here = self.info.get("transport") == "ipc" or _is_loopback(str(self.info.get("ip", "")))
            local = here and self.host == socket.gethostname()
            self.pid = self.reported_pid if local and pid_alive(self.reported_pid) else None
        if self.pid is None:
            self._heartbeat = Heartbeat(self.info)

    def saw_message(self, msg: dict[str, Any]) -> None:
        """Any message from the kernel: one from another session means the kernel was replaced."""
        sender = msg.get("header", {}).get("session")
        if self.session and sender and sender != self.session:
            self.restarted.set()

    def is_alive(self) -> bool:
        """Still the kernel that was joined: same process (or heartbeat), not restarted."""
        if self.restarted.is_set():
            return False
        if self.pid is not None:
            return pid_alive(self.pid)
        return self._heartbeat.alive() if self._heartbeat is not None else True

    def interrupt_by_signal(self) -> bool:
        """Send SIGINT when the kernel's mode is ``signal`` and its pid is local; False otherwise.

        Like jupyter-client, signal the kernel's process group when the kernel leads one (so its
        subprocesses stop too), never this server's own group.
        """
        if self.interrupt_mode != "signal" or self.pid is None:
            return False
        try:
            pgid = os.getpgid(self.pid)
            if pgid == self.pid and pgid != os.getpgrp():
                os.killpg(pgid, signal.SIGINT)
            else:
                os.kill(self.pid, signal.SIGINT)
        except ProcessLookupError:
            return False
        return True

    def why_gone(self) -> str:
        """Why the joined kernel is no longer there (for the not-ready message)."""
        if self.restarted.is_set():
            return "the kernel was restarted from its frontend (its namespace is new)"
        if self.pid is not None:
            return f"the kernel process (pid {self.pid}) exited: its frontend shut it down or restarted it"
        return (f"the kernel stopped answering its heartbeat for {HEARTBEAT_GRACE:g} s (shut down, "
                "restarted, or the tunnel to it closed)")

    def close(self) -> None:
        """Stop watching the kernel (the kernel itself is left alone)."""
        if self._heartbeat is not None:
            self._heartbeat.close()
            self._heartbeat = None

    def describe(self) -> dict[str, Any]:
        """The attach part of the kernel status."""
        return {
            "mode": "attached",
            "owner": "its frontend (a notebook, console or remote Jupyter); this server only joined it",
            "existing": self.spec,
            "kernel_host": self.host,
            "interrupt": ("signal" if self.interrupt_mode == "signal" and self.pid is not None
                          else "interrupt_request on the control channel"),
        }


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


ATTACHED_ENV = "BIOPB_MCP_ATTACHED"
"""Tells the bootstrap the kernel is not the server's: it must leave the kernel's shutdown alone."""


def bootstrap_code(source: str, env: dict[str, str]) -> str:
    """The bootstrap as one silent cell for a joined kernel (``kernel.existing_plugins = true``).

    A joined kernel was not started with our environment, so the cell sets the variables the
    bootstrap reads, runs it once more even if an earlier attach ran it (once per attach), and
    takes the variables out of the kernel's environment again: the scientist's ``os.environ``
    is left as it was.
    """
    names = sorted({*env, ATTACHED_ENV})
    return "\n".join([
        f"__import__('os').environ.update({ {**env, ATTACHED_ENV: '1'}!r})",
        "globals().pop('__biopb_bootstrap__', None)",
        "try:",
        *("    " + line for line in source.splitlines()),
        "finally:",
        f"    [__import__('os').environ.pop(name, None) for name in {names!r}]",
        "",
    ])
