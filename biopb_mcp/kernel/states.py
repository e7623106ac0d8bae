"""The kernel's states and an execution's statuses, as values the server and clients can compare."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from biopb_mcp.errors import KernelProblem


class KernelState(StrEnum):
    """Where the one kernel is in its life; a ``str``, so it compares and serialises as its value."""

    NOT_STARTED = "not_started"
    STARTING = "starting"
    READY = "ready"
    DEAD = "dead"
    """The process exited without being asked; its namespace is lost."""
    ERROR = "error"
    """The last start did not reach ready."""
    GONE = "gone"
    """A joined kernel (not ours) went away or was restarted by its frontend: a new start joins
    it again, nothing here can bring it back."""


class ExecutionStatus(StrEnum):
    """Where one execution is: ``running`` until the first terminal status."""

    RUNNING = "running"
    OK = "ok"
    ERROR = "error"
    """The code raised."""
    INTERRUPTED = "interrupted"
    """KeyboardInterrupt, or an interrupt that landed before the code began."""
    DEAD = "dead"
    """The kernel died under it."""
    ABORTED = "aborted"
    """A restart or shutdown while it ran, or the kernel aborted the request."""


class Ending(StrEnum):
    """Why the host ended a running execution: text writes its note from this."""

    RESTARTED = "restarted"
    """restart_kernel stopped the kernel under it; its namespace is gone."""
    SHUT_DOWN = "shut_down"
    """The server shut the kernel down under it."""
    KERNEL_LOST = "kernel_lost"
    """The kernel died, or a joined one went (``kernel_lost`` says which)."""


@dataclass(frozen=True)
class HostEnding:
    """The host's facts about an execution it ended: ``why``, and for a lost kernel how it went
    (``cause``: ``exit code 1``) and its last log lines (``log_tail``; "" for a joined kernel)."""

    why: Ending
    cause: str = ""
    log_tail: str = ""


FINISHED = frozenset(s for s in ExecutionStatus if s is not ExecutionStatus.RUNNING)
"""Terminal statuses."""


@dataclass(frozen=True)
class KernelStatus:
    """A snapshot of the one kernel, as facts (``server_status`` and start_kernel word them).

    ``owned``: this server started the kernel and ends it; False when it joined the user's
    (``kernel.existing``). ``interrupt``: ``signal`` (SIGINT to a local pid) or
    ``interrupt_request`` (a message on the control channel). ``socket_dir``: set when the runtime
    dir's path was too long for IPC sockets. ``current_job``: job_id, status, seconds, promoted.
    ``parent_death_watch``: the kernel (or a reaper beside it) watches the server's lifeline.
    ``server_pid``: the server's own pid, which the scientist's console is pointed at.
    ``cause`` and ``log_tail``: why the kernel is ``error``, ``dead`` or ``gone``, as the host's
    ``KernelNotReady`` carries them ("" in the other states); ``failed_kind`` and ``failed_details``
    the failed start's kind and facts (``error`` only, else ``other`` and none).
    """

    state: KernelState
    cause: str
    log_tail: str
    failed_kind: KernelProblem
    failed_details: dict[str, object]
    owned: bool
    interrupt: str | None
    kernel_host: str | None
    pid: int | None
    connection_file: str | None
    transport: str
    socket_dir: str | None
    kernel_spec: str
    current_job: dict[str, Any] | None
    plugins_loaded: list[str]
    builtin_helpers: list[str]
    plugins_failed: list[dict[str, str]]
    bootstrap_errors: list[str]
    parent_death_watch: bool
    kernel_log: str
    runtime_dir: str
    session_notebook: str | None
    server_pid: int
    existing: str | None = None
    """The ``kernel.existing`` spec a joined kernel was found by."""
    other_cell: dict[str, Any] | None = None
    """A cell another client (the scientist's console or notebook) runs now: source, code, seconds."""
