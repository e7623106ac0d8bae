"""How a server and the ``%biopb`` magics inside the same kernel know of each other.

The two never talk directly: the magics run in the scientist's kernel (a notebook, a console),
the server in the agent's MCP client, and either may start first or go away. They share two small
files in the private runtime dir, named after the kernel (a hash of its connection key, so the
same kernel gets the same name whatever path its connection file was reached by):

* ``agent-<id>.json``, written by the server only: its pid and transport, whether it owns the
  kernel, the session notebook it records into, and the code the agent last submitted. The
  magics read it for ``%biopb status`` and ``%biopb log``.
* ``pause-<id>.json``, written by the magics only: while it exists the server runs none of the
  agent's code in that kernel. Its presence is the whole signal; the content (when, why) is
  shown to the agent.

One writer per file, each write atomic (temp file + rename, 0600): a reader sees the previous
file or the new one, never half of one. This module knows nothing of MCP or of IPython.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from biopb_mcp.runtime_files import pid_alive, private_runtime_dir

__all__ = ["AgentPresence", "KernelLink", "Pause", "link_id"]

MAX_REASON_CHARS = 500
"""A pause reason longer than this is cut: it is shown to the agent, not stored as a document."""

CODE_HEAD_CHARS = 200
"""Characters of the agent's last submitted code kept in the presence file."""


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

    @property
    def alive(self) -> bool:
        """Whether the server that wrote this is still running."""
        return pid_alive(self.server_pid)


@dataclass
class Pause:
    """The scientist's pause (the ``pause-<id>.json`` file)."""

    since: float
    reason: str = ""


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

    def _path(self, kind: str, *, create: bool) -> Path | None:
        directory = private_runtime_dir(self.runtime_dir, create=create)
        return None if directory is None else directory / f"{kind}-{self.kernel_id}.json"

    # -- the server's side -------------------------------------------------------------------------
    def announce(self, presence: AgentPresence) -> None:
        """Write the presence file (raises OSError when the runtime dir is unusable)."""
        path = self._path("agent", create=True)
        assert path is not None
        _write_json(path, asdict(presence))

    def note_submitted(self, job_id: str, code: str) -> None:
        """Record the code the agent just submitted; silently skipped without a presence file."""
        presence = self.presence()
        if presence is None or presence.server_pid != os.getpid():
            return
        presence.last_job, presence.last_submitted = job_id, time.time()
        presence.last_code = code[:CODE_HEAD_CHARS]
        with contextlib.suppress(OSError):
            self.announce(presence)

    def withdraw(self) -> None:
        """Remove the presence file if this process wrote it (a server leaving)."""
        presence = self.presence()
        if presence is None or presence.server_pid != os.getpid():
            return
        with contextlib.suppress(OSError):
            path = self._path("agent", create=False)
            if path is not None:
                path.unlink()

    def paused(self) -> Pause | None:
        """The scientist's pause, or None. An unreadable pause file still pauses (the safe side)."""
        try:
            path = self._path("pause", create=False)
        except OSError:
            return None
        if path is None:
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return Pause(since=_mtime(path))
        if not isinstance(data, dict):
            return Pause(since=_mtime(path))
        since = data.get("since")
        return Pause(since=float(since) if isinstance(since, (int, float)) else _mtime(path),
                     reason=str(data.get("reason", ""))[:MAX_REASON_CHARS])

    # -- the scientist's side ----------------------------------------------------------------------
    def presence(self) -> AgentPresence | None:
        """The last presence a server wrote for this kernel (its server may be gone: ``alive``)."""
        try:
            path = self._path("agent", create=False)
            if path is None:
                return None
            data = json.loads(path.read_text(encoding="utf-8"))
            return AgentPresence(**{k: v for k, v in data.items() if k in AgentPresence.__dataclass_fields__})
        except (OSError, ValueError, TypeError):
            return None

    def pause(self, reason: str = "") -> Pause:
        """Pause the agent in this kernel (idempotent: a second pause updates the reason)."""
        pause = Pause(since=time.time(), reason=reason.strip()[:MAX_REASON_CHARS])
        path = self._path("pause", create=True)
        assert path is not None
        _write_json(path, asdict(pause))
        return pause

    def resume(self) -> bool:
        """End the pause; False when there was none."""
        path = self._path("pause", create=False)
        if path is None:
            return False
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        return True


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return time.time()


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` atomically with ``data``; the file is 0600 from its first byte."""
    # one temp name per thread: two writers never truncate each other's half-written file
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with open(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
