"""The kernel's states and an execution's statuses, as values the server and clients can compare."""

from __future__ import annotations

from enum import StrEnum


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


FINISHED = frozenset(s for s in ExecutionStatus if s is not ExecutionStatus.RUNNING)
"""Terminal statuses."""
