"""biopb_mcp errors.

Every anticipated failure is one of these; the MCP layer turns them into tool errors whose text
reaches the agent, the CLI into one ``error: …`` line and an exit code. An error states facts: its
message and fields (ids, counts, limits, paths, job ids), and a kind where the next step depends
on the problem. The sentence a reader gets, next step included, is written by ``biopb_mcp.text``
(``text.failures`` for the agent or a terminal), which quotes the message whole or not at all.

* BiopbMcpError
  x ConfigError          a config file that cannot be used (kind: a ConfigProblem; file, line, key)
  x SdkMismatch          the installed MCP SDK lacks a private hook the server needs
  x UnsafeRuntimeDir     the runtime dir's private subdirectory is there but not private (an
                         OSError too: every reader of the runtime dir catches it as one)
  x DocError             anything the docs store refuses (kind: a DocProblem, plus fields)
    + InvalidDocId       an id outside the id grammar, or a path escaping its tier
    + DocNotFound        no doc by that id (carries the closest ids)
    + DocUnreadable      a file that exists but cannot be read as UTF-8 markdown
    + WriteRefused       a write the rules forbid: caps, old/new matching 0 or 2+ times, bad args
    + InvalidQuery       a search query that cannot be run (empty, whitespace, too costly)
    + InvalidCursor      a resources/list cursor that is not the URI of a docs resource
    + SearchUnavailable  search cannot run here (no FTS5, an index locked or broken)
  x KernelError          anything about the kernel the server manages (kind: a KernelProblem)
    + KernelNotReady     no usable kernel: state is not_started, starting, dead, gone or error
    + KernelBusy         code is already running (carries its job id)
    + JobNotFound        no job by that id
    + KernelNotOwned     restart/shutdown of a kernel the server joined but does not own
    + RestartRefused     a restart whose new kernel could not start: the running one is kept
    + StartFailed        a start that did not reach ready (the host's own signal: it becomes a
                         KernelNotReady or a RestartRefused before any reader sees it)

Exceptions outside the tree are internal signals that never reach a reader as they are: the
file layer's ``OSError`` subclasses (a refused link, a file too big, an unsafe runtime file, no
watcher), the search index's (a query past its deadline, a busy or foreign index file), the
config loader's malformed-line marker, and the classes of ``kernel/inside`` (which runs in the
kernel and imports nothing of this package). The CLI's ``UsageError`` is bad command-line usage,
worded by the CLI itself.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path


class BiopbMcpError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigProblem(StrEnum):
    """What a config refusal is about, where the reader's next step depends on it: the text layer
    adds that step to the facts. Any other refusal states its rule in its message."""

    OTHER = "other"
    CONFIG_DIR_NOT_A_DIR = "config_dir_not_a_dir"
    FILE_IS_A_DIR = "file_is_a_dir"
    NOT_UTF8 = "not_utf8"
    BAD_TOML = "bad_toml"
    FILE_EXISTS = "file_exists"
    """``config init`` found a config file there already."""
    FILE_UNWRITABLE = "file_unwritable"
    """``config init`` could not write the file (the config dir is moved by its variable)."""
    LOG_UNWRITABLE = "log_unwritable"
    """The server's log file cannot be created (``config_file`` in the details)."""
    TOKEN_UNKEPT = "token_unkept"
    """The stable HTTP token cannot be kept in the state dir (``config_file``)."""
    TOKEN_FILE_UNWRITABLE = "token_file_unwritable"
    """The HTTP token file cannot be written in the runtime dir (``config_file``)."""
    MARK_IS_DELIMITER = "mark_is_delimiter"
    """outputs.decimal_mark equals outputs.table_delimiter (the key is the mark's)."""


class ConfigError(BiopbMcpError):
    """A config file that cannot be used; names the file, the line where known, and the key.

    ``where`` is the ``<file>:<line>: `` lead of the message; ``kind`` (a ConfigProblem) and
    ``details`` (``config_dir``, ``reason``) let the text layer add what the reader should do.
    """

    def __init__(
        self,
        message: str,
        *,
        path: Path | None = None,
        line: int | None = None,
        key: str | None = None,
        kind: ConfigProblem = ConfigProblem.OTHER,
        **details: object,
    ) -> None:
        self.path, self.line, self.key = path, line, key
        self.kind, self.details = kind, details
        self.where = ""
        if path is not None:
            self.where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(f"{self.where}{message}")


class DocProblem(StrEnum):
    """What rule a docs refusal is about: the adapters (tools, CLI) phrase each kind for their reader."""

    EMPTY_ID = "empty_id"
    NOT_A_STRING = "not_a_string"
    ID_TOO_LONG = "id_too_long"
    VIEW_IN_ID = "view_in_id"
    ABSOLUTE_ID = "absolute_id"
    COLLECTION_ID = "collection_id"
    BAD_CHAR = "bad_char"
    EMPTY_SEGMENT = "empty_segment"
    DOT_SEGMENT = "dot_segment"
    HIDDEN_SEGMENT = "hidden_segment"
    BAD_ID = "bad_id"
    UNKNOWN_VIEW = "unknown_view"
    READ_ONLY_VIEW = "read_only_view"
    ESCAPES_TIER = "escapes_tier"
    INDEX_NOT_A_DOC = "index_not_a_doc"
    NOT_FOUND = "not_found"
    NO_DOC = "no_doc"
    NO_DOC_TO_EDIT = "no_doc_to_edit"
    NO_HISTORY = "no_history"
    NO_VERSION = "no_version"
    UNREADABLE = "unreadable"
    ARGS_BOTH = "args_both"
    ARGS_NEITHER = "args_neither"
    ARGS_HALF = "args_half"
    ARG_TYPE = "arg_type"
    BODY_EMPTY = "body_empty"
    OLD_EMPTY = "old_empty"
    NUL_IN_TEXT = "nul_in_text"
    BODY_TOO_BIG = "body_too_big"
    OLD_NOT_FOUND = "old_not_found"
    OLD_AMBIGUOUS = "old_ambiguous"
    BODY_CAP = "body_cap"
    INDEX_CAP = "index_cap"
    WRITE_FAILED = "write_failed"
    SECTION_WITH_EDIT = "section_with_edit"
    SECTION_EXISTING = "section_existing"
    BAD_SECTION = "bad_section"
    BAD_QUERY = "bad_query"
    EMPTY_QUERY = "empty_query"
    QUERY_TOO_LONG = "query_too_long"
    QUERY_TOO_COSTLY = "query_too_costly"
    BAD_CURSOR = "bad_cursor"
    NO_FTS5 = "no_fts5"
    INDEX_LOCKED = "index_locked"
    INDEX_FAILED = "index_failed"


class DocError(BiopbMcpError):
    """Base of everything the docs store refuses.

    The message states the facts and names no tool; ``kind`` (a DocProblem), ``doc_id`` and
    ``details`` (counts, limits, the offending part) let an adapter add what its reader should do.
    """

    default_kind = DocProblem.BAD_ID

    def __init__(
        self, message: str, *, kind: DocProblem | None = None, doc_id: str | None = None, **details: object
    ) -> None:
        self.kind = kind if kind is not None else self.default_kind
        self.doc_id = doc_id
        self.details = details
        super().__init__(message)


class InvalidDocId(DocError):
    """An id outside the grammar, or one that would reach outside its tier."""


class DocNotFound(DocError):
    """No doc by that id; ``suggestions`` holds the closest existing ids."""

    default_kind = DocProblem.NOT_FOUND

    def __init__(
        self,
        message: str,
        *,
        kind: DocProblem | None = None,
        doc_id: str = "",
        suggestions: list[str] | None = None,
        **details: object,
    ) -> None:
        self.suggestions = suggestions or []
        super().__init__(message, kind=kind, doc_id=doc_id, **details)


class Unreadable(StrEnum):
    """Why a doc file cannot be read, where the reader's next step depends on it: the text layer
    adds that step (rename, replace, move out, fix permissions, re-save) to the facts."""

    OTHER = "other"
    """No step to suggest: the message states the OS's reason, a link, a damaged version."""
    DIRECTORY = "directory"
    NOT_REGULAR = "not_regular"
    """A FIFO, a socket, a device: not a regular file."""
    TOO_BIG = "too_big"
    """Over the size a doc file may have (``size``, ``limit``)."""
    PERMISSION = "permission"
    BINARY = "binary"
    """Contains NUL bytes."""
    NOT_UTF8 = "not_utf8"
    """Not UTF-8 text (``byte``, the first bad one, at ``offset``)."""


class DocUnreadable(DocError):
    """A doc file exists but cannot be read (not UTF-8, binary, too large, permission).

    ``why`` (an Unreadable) says which case; ``details`` carry ``path`` and the case's numbers.
    """

    default_kind = DocProblem.UNREADABLE

    def __init__(
        self,
        message: str,
        *,
        why: Unreadable = Unreadable.OTHER,
        kind: DocProblem | None = None,
        doc_id: str | None = None,
        **details: object,
    ) -> None:
        self.why = why
        super().__init__(message, kind=kind, doc_id=doc_id, **details)


class WriteRefused(DocError):
    """A write the store's rules forbid; nothing was changed."""

    default_kind = DocProblem.WRITE_FAILED


class InvalidQuery(DocError):
    """A search query that cannot be run, such as an empty one."""

    default_kind = DocProblem.BAD_QUERY


class InvalidCursor(DocError):
    """A ``resources/list`` cursor that is not the URI of a docs resource; the client sees an
    invalid-params error. ``cursor`` is the cursor (cut to 80 characters), ``prefix`` what a
    docs URI starts with, ``problem`` the InvalidDocId the id grammar refused it with (when it
    names an id)."""

    default_kind = DocProblem.BAD_CURSOR


class SearchUnavailable(DocError):
    """Search cannot run; the rest of the docs store works. The kind says why: no FTS5 in this
    Python's sqlite3 (``sqlite_version``, ``error``), an index locked by another process while
    more docs changed than are searched without it (``path``, ``changed``, ``limit``), or an
    index file that failed (``path``, ``error``)."""

    default_kind = DocProblem.NO_FTS5


class SdkMismatch(BiopbMcpError):
    """The installed MCP SDK lacks a private hook this server relies on; raised when a server is
    built, before any client connects, so the CLI reports it as its ``error:`` line.

    ``installed`` is the SDK's version, ``missing`` the hooks it lacks, ``tested`` the version
    range they were tested on (a pip specifier, ``>=2.3,<2.4``).
    """

    def __init__(
        self, message: str, *, installed: str = "", missing: list[str] | None = None, tested: str = ""
    ) -> None:
        self.installed = installed
        self.missing = missing or []
        self.tested = tested
        super().__init__(message)


class UnsafeRuntimeDir(BiopbMcpError, PermissionError):
    """The private subdirectory ``path`` of the configured ``runtime_dir`` exists but is not a
    private directory of this user (a link, another owner, group/other access); nothing was changed.
    A PermissionError too, so whatever reads the runtime dir treats it as one more OSError."""

    def __init__(self, message: str, *, path: str, runtime_dir: str) -> None:
        self.path = path
        self.runtime_dir = runtime_dir
        super().__init__(message)


class KernelProblem(StrEnum):
    """What a plain kernel failure is about, where the reader's next step depends on it (the
    subclasses below carry their own fields instead). Any other failure states itself."""

    OTHER = "other"
    INSPECTION_STUCK = "inspection_stuck"
    CONSOLE_OTHER_CONFIG = "console_other_config"
    CONSOLE_NO_SERVER = "console_no_server"
    CONSOLE_NEEDS_EXTRA = "console_needs_extra"
    NO_ANSWER_AT_START = "no_answer_at_start"
    """A start's question got no answer (``seconds``): a joined kernel may be running a cell."""
    RUNTIME_DIR_UNSAFE = "runtime_dir_unsafe"
    """A start could not use the runtime dir (``runtime_dir``): ``refused`` is the UnsafeRuntimeDir."""


class KernelError(BiopbMcpError):
    """Base of kernel-host failures; ``kind`` (a KernelProblem) and ``details`` (such as the
    ``server_config_dir`` a console was pointed at) let the text layer add the next step."""

    def __init__(self, message: str, *, kind: KernelProblem = KernelProblem.OTHER, **details: object) -> None:
        self.kind = kind
        self.details = details
        super().__init__(message)


class KernelNotReady(KernelError):
    """No usable kernel; ``state`` is one of not_started, starting, dead, gone, error.

    ``cause`` is what failed (error: the failed start's own statement) or how the kernel went
    (dead, gone: ``exit code 1``), else ""; ``log_tail`` the kernel's last log lines then (dead,
    error; "" when it left none). A start that failed on a setting names it in ``setting`` (with
    what it should be, ``wanted``, and the ``config_file`` it is in); ``joined`` marks a failure
    to join the user's own kernel. ``kind`` and ``details`` are the failed start's (StartFailed's).
    """

    def __init__(
        self,
        message: str,
        *,
        state: str,
        cause: str = "",
        log_tail: str = "",
        setting: str | None = None,
        wanted: str = "",
        config_file: str = "",
        joined: bool = False,
        kind: KernelProblem = KernelProblem.OTHER,
        **details: object,
    ) -> None:
        self.state = state
        self.cause = cause
        self.log_tail = log_tail
        self.setting = setting
        self.wanted = wanted
        self.config_file = config_file
        self.joined = joined
        super().__init__(message, kind=kind, **details)


class KernelBusy(KernelError):
    """Code is already running; ``job_id`` names it ("" while an inspection holds the kernel)
    and ``seconds`` is how long it has run."""

    def __init__(self, message: str, *, job_id: str, seconds: float = 0.0) -> None:
        self.job_id = job_id
        self.seconds = seconds
        super().__init__(message)


class JobNotFound(KernelError):
    """No job by that id; ``recent`` holds the last few ids, ``kept`` how many are kept;
    ``notebook`` is the session notebook holding the cell of a job forgotten since."""

    def __init__(
        self,
        message: str,
        *,
        job_id: str = "",
        recent: list[str] | None = None,
        kept: int = 0,
        notebook: str | None = None,
    ) -> None:
        self.job_id = job_id
        self.recent = recent or []
        self.kept = kept
        self.notebook = notebook
        super().__init__(message)


class KernelNotOwned(KernelError):
    """A restart or shutdown asked of a kernel the server joined: it belongs to its frontend.
    ``action`` names what was refused."""

    def __init__(self, message: str, *, action: str) -> None:
        self.action = action
        super().__init__(message)


class RestartRefused(KernelError):
    """A restart refused before the running kernel was touched: the new kernel could not start
    (``reason``; ``setting`` names the config key that fixes it, ``wanted`` what it should be,
    ``config_file`` where it is set). The running kernel and its namespace are kept."""

    def __init__(
        self, message: str, *, reason: str, setting: str | None = None, wanted: str = "", config_file: str = ""
    ) -> None:
        self.reason = reason
        self.setting = setting
        self.wanted = wanted
        self.config_file = config_file
        super().__init__(message)


class StartFailed(KernelError):
    """A kernel start that did not reach ready; raised by the kernel's start phases and caught by
    the host, which keeps it as the reason of the KernelNotReady (or RestartRefused) a reader sees.

    The message states what failed; ``setting`` names the config key that fixes it (``wanted``:
    what it should be); ``joined``: joining the user's kernel failed; ``kind`` and ``details`` the
    facts a reader's hint is written from (a probe's ``seconds``, a refused runtime dir).
    """

    def __init__(
        self,
        message: str,
        *,
        setting: str | None = None,
        wanted: str = "",
        joined: bool = False,
        kind: KernelProblem = KernelProblem.OTHER,
        **details: object,
    ) -> None:
        super().__init__(message, kind=kind, **details)
        self.setting = setting
        self.wanted = wanted
        self.joined = joined
