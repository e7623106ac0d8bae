"""How a server and the ``%biopb`` magics inside the same kernel know of each other.

The two never talk directly: the magics run in the scientist's kernel (a notebook, a console),
the server in the agent's MCP client, and either may start first or go away. They share two small
files in the private runtime dir, named after the kernel (a hash of its connection key, so the
same kernel gets the same name whatever path its connection file was reached by):

* ``agent-<id>.json``, written by the server only: its pid and transport, whether it owns the
  kernel, the session notebook it records into, the code the agent last submitted, and the
  request it last withdrew behind the scientist's cell. The magics read it for ``%biopb
  status`` and ``%biopb log``, and a cell hook in the kernel for the withdrawal note.
* ``pause-<id>.json``, written by the magics only: while it exists the server runs none of the
  agent's code in that kernel. Its presence is the whole signal; the content (when, why) is
  shown to the agent.

Besides the files, each of the agent's execute requests carries ``AGENT_REQUEST_KEY`` in its
message metadata, so code in the kernel can tell the agent's cells from the scientist's as they
run (the live notebook cells of ``%load_ext biopb_mcp``).

One writer per file, each write atomic (a random temp name made ``O_EXCL|O_NOFOLLOW``, 0600,
renamed into place): a reader sees the previous file or the new one, never half of one. Anyone
who can write the runtime dir can also plant files there, so every read is checked: no link
followed, a regular file only (opened non-blocking: a FIFO never hangs a reader), a bounded size,
and each field of the right type and range. A file that fails is ignored with a log line. This
module knows nothing of MCP or of IPython.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeGuard

from biopb_mcp.fs import nofollow
from biopb_mcp.fs.runtime import pid_alive, private_runtime_dir

logger = logging.getLogger(__name__)

__all__ = ["AGENT_REQUEST_KEY", "AgentPresence", "KernelLink", "Pause", "link_id"]

AGENT_REQUEST_KEY = "biopb"
"""Key of the agent's execute requests' metadata: ``{"agent": True, "job": "job-3"}``."""

MAX_REASON_CHARS = 500
"""A pause reason longer than this is cut: it is shown to the agent, not stored as a document."""

CODE_HEAD_CHARS = 200
"""Characters of the agent's last submitted code kept in the presence file."""

MAX_FILE_BYTES = 16 * 1024
"""Largest link file read: what the server writes is well under 1 kB."""

MAX_PATH_CHARS = 4096
"""Longest path a link file may name (PATH_MAX)."""

MAX_PID = 1 << 22
"""Largest pid Linux hands out (PID_MAX_LIMIT)."""

MAX_STAMP = float(1 << 32)
"""Latest time a link file may name (2106): anything later is not a time this server wrote."""


def link_id(info: dict[str, Any], connection_file: Path | None = None) -> str:
    """The name shared by every party of one kernel: a hash of its connection key.

    A kernel without a key (authentication off) falls back to its connection file's real path.
    The key itself never appears in a file name.
    """
    key = info.get("key", "")
    if isinstance(key, bytes):
        key = key.decode("ascii", "replace")
    if not key and connection_file is not None:
        key = "path:" + os.path.realpath(connection_file)
    return hashlib.sha256(f"biopb-kernel-link:{key}".encode()).hexdigest()[:20]


@dataclass
class AgentPresence:
    """What a server tells the magics about itself (the ``agent-<id>.json`` file)."""

    server_pid: int
    transport: str
    owns_kernel: bool
    connection_file: str
    since: float = field(default_factory=time.time)
    session_notebook: str | None = None
    last_job: str | None = None
    last_code: str | None = None
    last_submitted: float | None = None
    exited: float | None = None
    """When the server left (it keeps the file so the magics can say so); None while it runs."""
    withdrawn_job: str | None = None
    withdrawn_code: str | None = None
    withdrawn_at: float | None = None
    """The agent's last request withdrawn while the scientist's cell ran (never sent): the
    kernel's cell hook tells the scientist after that cell."""

    @property
    def alive(self) -> bool:
        """Whether the server that wrote this is still running (a server that left said so)."""
        return self.exited is None and pid_alive(self.server_pid)


@dataclass
class Pause:
    """The scientist's pause (the ``pause-<id>.json`` file)."""

    since: float
    reason: str = ""


def _stamp(value: object) -> TypeGuard[float]:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value <= MAX_STAMP
    )


_Check = Callable[[object], bool]


def _text(limit: int) -> _Check:
    return lambda value: isinstance(value, str) and len(value) <= limit


def _optional(check: _Check) -> _Check:
    return lambda value: value is None or check(value)


_PRESENCE_FIELDS: dict[str, _Check] = {
    "server_pid": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_PID,
    "transport": _text(32),
    "owns_kernel": lambda v: isinstance(v, bool),
    "connection_file": _text(MAX_PATH_CHARS),
    "since": _stamp,
    "session_notebook": _optional(_text(MAX_PATH_CHARS)),
    "last_job": _optional(_text(64)),
    "last_code": _optional(_text(CODE_HEAD_CHARS)),
    "last_submitted": _optional(_stamp),
    "exited": _optional(_stamp),
    "withdrawn_job": _optional(_text(64)),
    "withdrawn_code": _optional(_text(CODE_HEAD_CHARS)),
    "withdrawn_at": _optional(_stamp),
}
"""Each field of the presence file and what a valid value is."""

assert set(_PRESENCE_FIELDS) == {f.name for f in fields(AgentPresence)}


def _presence_of(data: dict[str, Any]) -> AgentPresence:
    """The presence ``data`` describes; ValueError naming the first bad field."""
    for name, valid in _PRESENCE_FIELDS.items():
        if name not in data:
            if name in ("server_pid", "transport", "owns_kernel", "connection_file"):
                raise ValueError(f"no {name}")
            continue
        if not valid(data[name]):
            raise ValueError(f"{name} is not valid ({str(data[name])[:40]!r})")
    return AgentPresence(**{k: v for k, v in data.items() if k in _PRESENCE_FIELDS})


class KernelLink:
    """The two files of one kernel in ``runtime_dir``; every method is safe to call from any side.

    Args:
        runtime_dir: the configured runtime dir (``server.runtime_dir``); the files go into its
            private directory (see ``runtime_files.private_runtime_dir``).
        kernel_id: :func:`link_id` of the kernel.
    """

    def __init__(self, runtime_dir: Path, kernel_id: str) -> None:
        self.runtime_dir = Path(runtime_dir)
        self.kernel_id = kernel_id
        self._warned: set[tuple[str, str]] = set()

    def _dir(self, *, create: bool) -> Path | None:
        return private_runtime_dir(self.runtime_dir, create=create)

    def _name(self, kind: str) -> str:
        return f"{kind}-{self.kernel_id}.json"

    def _read(self, kind: str) -> tuple[dict[str, Any] | None, str | None, bool]:
        """The file's JSON object, why it is not one (None: no file, or a good one), and whether
        a regular file is there at all."""
        try:
            directory = self._dir(create=False)
            if directory is None:
                return None, None, False
            raw, _st = nofollow.read_bytes(directory, self._name(kind), max_bytes=MAX_FILE_BYTES)
        except FileNotFoundError:
            return None, None, False
        except nofollow.TooBig as exc:
            return None, f"it is {exc.size:,} bytes (at most {MAX_FILE_BYTES:,})", True
        except nofollow.LinkRefused:
            return None, "it is a symbolic link", False
        except OSError as exc:
            return None, f"it is not a regular file one can read ({exc.strerror or exc})", False
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return None, "it is not JSON", True
        if not isinstance(data, dict):
            return None, "it is not a JSON object", True
        return data, None, True

    def _ignored(self, kind: str, why: str) -> None:
        """Log a bad link file once per reason (execute_code reads the pause file on every call)."""
        if (kind, why) in self._warned:
            return
        self._warned.add((kind, why))
        logger.warning(
            "ignoring the %%biopb link file %s in the runtime dir %s: %s", self._name(kind), self.runtime_dir, why
        )

    # -- the server's side -------------------------------------------------------------------------
    def announce(self, presence: AgentPresence) -> None:
        """Write the presence file (raises OSError when the runtime dir is unusable)."""
        directory = self._dir(create=True)
        assert directory is not None
        nofollow.write_atomic(directory, self._name("agent"), json.dumps(asdict(presence)).encode(), durable=False)

    def note_submitted(self, job_id: str, code: str) -> None:
        """Record the code the agent just submitted; silently skipped without a presence file."""
        presence = self.presence()
        if presence is None or presence.server_pid != os.getpid():
            return
        presence.last_job, presence.last_submitted = job_id[:64], time.time()
        presence.last_code = code[:CODE_HEAD_CHARS]
        with contextlib.suppress(OSError):
            self.announce(presence)

    def note_withdrawn(self, job_id: str, code: str) -> None:
        """Record a request of the agent's withdrawn behind the scientist's cell; silently skipped
        without a presence file of this server."""
        presence = self.presence()
        if presence is None or presence.server_pid != os.getpid():
            return
        presence.withdrawn_job, presence.withdrawn_at = job_id[:64], time.time()
        presence.withdrawn_code = code[:CODE_HEAD_CHARS]
        with contextlib.suppress(OSError):
            self.announce(presence)

    def agent_file(self) -> Path:
        """Where the presence file is (its private dir is made if missing; raises OSError when
        the runtime dir is unusable)."""
        directory = self._dir(create=True)
        assert directory is not None
        return directory / self._name("agent")

    def leave(self) -> None:
        """Say this server left (if this process wrote the presence file); never raises.

        For a kernel the server joined, the file stays, marked ``exited``: the scientist's
        ``%biopb status`` then says the agent has exited, with what it last ran, as it does after
        the server was killed. A kernel the server owned ends with it: its file goes.
        """
        presence = self.presence()
        if presence is None or presence.server_pid != os.getpid():
            return
        with contextlib.suppress(OSError):
            if presence.owns_kernel:
                directory = self._dir(create=False)
                if directory is not None:
                    nofollow.unlink(directory, self._name("agent"))
            else:
                presence.exited = time.time()
                self.announce(presence)

    def paused(self) -> Pause | None:
        """The scientist's pause, or None.

        A regular pause file pauses, whatever it holds (the safe side): content that is not what
        the magics write is ignored (the time falls back to the file's, the reason to none).
        Anything else at that name (a link, a FIFO, a folder) is ignored with a log line: it does
        not pause.
        """
        data, why, regular = self._read("pause")
        if not regular:
            if why is not None:
                self._ignored("pause", why)
            return None
        data = data or {}
        since, reason = data.get("since"), data.get("reason", "")
        if why is None and not (_stamp(since) and isinstance(reason, str)):
            why = "its since or reason is not valid"
        if why is not None:
            self._ignored("pause", f"{why}; its content is ignored, the pause holds")
        return Pause(
            since=float(since) if _stamp(since) else self._mtime("pause"),
            reason=reason[:MAX_REASON_CHARS] if isinstance(reason, str) else "",
        )

    def _mtime(self, kind: str) -> float:
        with contextlib.suppress(OSError):
            directory = self._dir(create=False)
            if directory is not None:
                return nofollow.lstat(directory, self._name(kind)).st_mtime
        return time.time()

    # -- the scientist's side ----------------------------------------------------------------------
    def presence(self) -> AgentPresence | None:
        """The last presence a server wrote for this kernel (its server may be gone: ``alive``)."""
        data, why, _regular = self._read("agent")
        if data is None:
            if why is not None:
                self._ignored("agent", why)
            return None
        try:
            return _presence_of(data)
        except ValueError as exc:
            self._ignored("agent", str(exc))
            return None

    def pause(self, reason: str = "") -> Pause:
        """Pause the agent in this kernel (idempotent: a second pause updates the reason)."""
        pause = Pause(since=time.time(), reason=reason.strip()[:MAX_REASON_CHARS])
        directory = self._dir(create=True)
        assert directory is not None
        nofollow.write_atomic(directory, self._name("pause"), json.dumps(asdict(pause)).encode(), durable=False)
        return pause

    def resume(self) -> bool:
        """End the pause; False when there was none."""
        directory = self._dir(create=False)
        if directory is None:
            return False
        try:
            nofollow.lstat(directory, self._name("pause"))
        except FileNotFoundError:
            return False
        nofollow.unlink(directory, self._name("pause"))
        return True
