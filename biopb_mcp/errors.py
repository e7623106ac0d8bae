"""biopb_mcp errors.

Every anticipated failure is one of these; the MCP layer turns them into tool errors whose text
reaches the agent, the CLI into one ``error: …`` line and an exit code.

* BiopbMcpError
  x ConfigError          a config file that cannot be used (syntax, type, unknown key)
  x DocError             anything the docs store refuses
    + InvalidDocId       an id outside the id grammar, or a path escaping its tier
    + DocNotFound        no doc by that id (carries the closest ids)
    + DocUnreadable      a file that exists but cannot be read as UTF-8 markdown
    + WriteRefused       a write the rules forbid: caps, old/new matching 0 or 2+ times, bad args
    + InvalidQuery       a search query that cannot be run (empty, whitespace)
  x KernelError          anything about the kernel the server manages
    + KernelNotReady     no usable kernel: state is not_started, starting, dead or error
    + KernelBusy         code is already running (carries its job id)
    + JobNotFound        no job by that id
"""

from __future__ import annotations

from pathlib import Path


class BiopbMcpError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigError(BiopbMcpError):
    """A config file that cannot be used; names the file, the line where known, and the key."""

    def __init__(
        self,
        message: str,
        *,
        path: Path | None = None,
        line: int | None = None,
        key: str | None = None,
    ) -> None:
        self.path, self.line, self.key = path, line, key
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(f"{where}{message}")


class DocError(BiopbMcpError):
    """Base of everything the docs store refuses."""


class InvalidDocId(DocError):
    """An id outside the grammar, or one that would reach outside its tier."""


class DocNotFound(DocError):
    """No doc by that id; ``suggestions`` holds the closest existing ids."""

    def __init__(self, message: str, *, doc_id: str = "", suggestions: list[str] | None = None) -> None:
        self.doc_id = doc_id
        self.suggestions = suggestions or []
        super().__init__(message)


class DocUnreadable(DocError):
    """A doc file exists but cannot be read (not UTF-8, binary, too large, permission)."""


class WriteRefused(DocError):
    """A write the store's rules forbid; nothing was changed."""


class InvalidQuery(DocError):
    """A search query that cannot be run, such as an empty one."""


class KernelError(BiopbMcpError):
    """Base of kernel-host failures."""


class KernelNotReady(KernelError):
    """No usable kernel; ``state`` is one of not_started, starting, dead, error, and ``reason``
    says why it died or could not start (the kernel's last log lines included), else ""."""

    def __init__(self, message: str, *, state: str, reason: str = "") -> None:
        self.state = state
        self.reason = reason
        super().__init__(message)


class KernelBusy(KernelError):
    """Code is already running; ``job_id`` names it ("" while an inspection holds the kernel)
    and ``seconds`` is how long it has run."""

    def __init__(self, message: str, *, job_id: str, seconds: float = 0.0) -> None:
        self.job_id = job_id
        self.seconds = seconds
        super().__init__(message)


class JobNotFound(KernelError):
    """No job by that id; ``recent`` holds the last few ids, ``kept`` how many are kept."""

    def __init__(self, message: str, *, job_id: str = "", recent: list[str] | None = None, kept: int = 0) -> None:
        self.job_id = job_id
        self.recent = recent or []
        self.kept = kept
        super().__init__(message)
