"""Logging set-up: the server log file, optionally stderr, never stdout (the stdio JSON-RPC wire).

Whoever can reach the server can make it log: a malformed HTTP request makes uvicorn log a line,
a refused one makes the guard log one, and anyone on the machine can send thousands a second. So
every record passes a rate limit per line of code (:class:`RateLimitedHandler`: a burst, then a
count reported in one line), the file rotates at a size cap, and stderr, which nobody rotates,
takes at most :data:`STDERR_MAX_BYTES` in the server's lifetime.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import threading
import time
from dataclasses import dataclass

from biopb_mcp.config.settings import Settings
from biopb_mcp.errors import ConfigError, ConfigProblem
from biopb_mcp.text.config import config_warning

__all__ = [
    "LOG_BACKUPS",
    "LOG_BURST",
    "LOG_FORMAT",
    "LOG_MAX_BYTES",
    "LOG_WINDOW",
    "STDERR_MAX_BYTES",
    "BoundedStreamHandler",
    "PrivateRotatingFileHandler",
    "RateLimitedHandler",
    "setup_logging",
]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(process)d]: %(message)s"
"""One line per record; the pid tells two servers sharing a log file apart."""

LOG_MAX_BYTES = 10 * 1024 * 1024
"""Size at which the server log is rotated to ``server.log.1``: whatever floods it, the disk is safe."""

LOG_BACKUPS = 2
"""Rotated copies kept (``server.log.1`` … ``.2``): the log never takes more than ~3 × LOG_MAX_BYTES."""

LOG_BURST = 50
"""Records one line of code may log per ``LOG_WINDOW``; the rest are counted and reported in one line."""

LOG_WINDOW = 60.0
"""Seconds of one rate-limit window."""

STDERR_MAX_BYTES = 1_000_000
"""Most bytes the log writes to stderr in a server's lifetime: stderr is whatever the parent gave
(a terminal, a pipe, a file it keeps), and nobody rotates it. The log file keeps everything after."""

_OURS = "_biopb_mcp_handler"
"""Attribute marking handlers this module installed, so a second call replaces them."""


def setup_logging(settings: Settings, *, stderr: bool) -> None:
    """Send the root logger to ``settings.log_file`` (dir 0700, file 0600) and, if asked, stderr.

    Idempotent: handlers from an earlier call are closed and replaced. Logs every entry of
    ``settings.warnings`` (deprecated keys and the like) once the handlers are in place.

    Raises:
        ConfigError: the log file cannot be created; the message names it and the keys that move it.
    """
    log_file = settings.log_file
    try:
        log_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # the handler creates every file 0600: logs quote agent code and doc text; a path that is
        # not UTF-8 (a lone surrogate) is written as its escape, never a "Logging error"
        file_handler: logging.Handler = PrivateRotatingFileHandler(
            log_file, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8", errors="backslashreplace"
        )
    except OSError as exc:
        raise ConfigError(
            f"cannot write the log file {log_file}: {exc.strerror or exc}",
            key="server.log_file",
            kind=ConfigProblem.LOG_UNWRITABLE,
            config_file=str(settings.config_file),
        ) from None
    handlers = [file_handler]
    if stderr:
        handlers.append(BoundedStreamHandler(sys.stderr, STDERR_MAX_BYTES, f"see {log_file} for the rest"))

    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _OURS, False)]:
        root.removeHandler(old)
        old.close()
    formatter = logging.Formatter(LOG_FORMAT)
    for handler in handlers:
        handler.setFormatter(formatter)
    limited = RateLimitedHandler(handlers, LOG_BURST, LOG_WINDOW)
    setattr(limited, _OURS, True)
    root.addHandler(limited)
    root.setLevel(settings.server.log_level)
    log = logging.getLogger(__name__)
    for warning in settings.warnings:
        log.warning(config_warning(warning))


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A size-capped log whose every file, rotated or new, is created 0600.

    The stock handler opens the fresh file after a rollover with ``open()``, i.e. with the
    umask's mode (usually 0644), and the log quotes agent code and doc text.
    """

    def _open(self):  # type: ignore[no-untyped-def]  # the stdlib signature is untyped
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return open(fd, self.mode, encoding=self.encoding, errors=self.errors)


@dataclass
class _Site:
    """One line of code's records in the current window."""

    start: float
    logged: int = 0
    suppressed: int = 0
    sample: str = ""
    level: int = logging.WARNING


class RateLimitedHandler(logging.Handler):
    """Hands records to ``targets``, at most ``burst`` per line of code per ``window`` seconds.

    The rest of a window are counted; the count, with the first one's message, is logged in one
    line once the window is over (at the next record, or when logging shuts down). Keyed by the
    call site rather than the message: a line that formats its message itself logs a different
    text each time.
    """

    def __init__(self, targets: list[logging.Handler], burst: int = LOG_BURST, window: float = LOG_WINDOW) -> None:
        super().__init__()
        self.targets = targets
        self.burst, self.window = burst, window
        self._sites: dict[tuple[str, str, int], _Site] = {}
        self._pending: set[tuple[str, str, int]] = set()  # sites with a count not reported yet
        self._summaries = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        now = time.monotonic()
        key = (record.name, record.pathname, record.lineno)
        with self._summaries:
            due = self._due(now)
            site = self._sites.get(key)
            if site is None or now - site.start >= self.window:
                site = self._sites[key] = _Site(start=now)
            passes = site.logged < self.burst
            if passes:
                site.logged += 1
            else:
                if not site.suppressed:
                    site.sample, site.level = _first_line(record), record.levelno
                site.suppressed += 1
                self._pending.add(key)
        for summary in due:
            self._forward(summary)
        if passes:
            self._forward(record)

    def _due(self, now: float, every: bool = False) -> list[logging.LogRecord]:
        """Summary records of the sites whose window is over (all of them with ``every``)."""
        out = []
        for key in [k for k in self._pending if every or now - self._sites[k].start >= self.window]:
            self._pending.discard(key)
            site = self._sites.pop(key)
            name, path, line = key
            out.append(
                logging.LogRecord(
                    name,
                    site.level,
                    path,
                    line,
                    "%d more records from %s:%d were not logged in %.0f s (at most %d are, per line of "
                    "code); the first: %s",
                    (site.suppressed, os.path.basename(path), line, now - site.start, self.burst, site.sample),
                    None,
                )
            )
        return out

    def _forward(self, record: logging.LogRecord) -> None:
        for target in self.targets:
            if record.levelno >= target.level:
                target.handle(record)

    def flush(self) -> None:
        with self._summaries:
            due = self._due(time.monotonic(), every=True)
        for summary in due:
            self._forward(summary)
        for target in self.targets:
            try:
                target.flush()
            except (OSError, ValueError):  # a stream closed under us (a parent gone, a test's capture)
                pass

    def close(self) -> None:
        try:
            self.flush()
        finally:
            for target in self.targets:
                target.close()
            super().close()


def _first_line(record: logging.LogRecord, limit: int = 160) -> str:
    """The start of a record's message, for a summary line: never a traceback, never 8 KB."""
    try:
        message = record.getMessage()
    except (TypeError, ValueError):
        message = str(record.msg)
    first = message.partition("\n")[0]
    return first if len(first) <= limit else first[:limit] + "…"


class BoundedStreamHandler(logging.StreamHandler):  # type: ignore[type-arg]  # generic only in typeshed
    """A stream handler that stops after ``max_bytes`` with one line saying where the rest goes."""

    def __init__(self, stream: object, max_bytes: int, rest: str) -> None:
        super().__init__(stream)
        self.max_bytes, self.rest = max_bytes, rest
        self.written = 0
        self.spent = False

    def emit(self, record: logging.LogRecord) -> None:
        if self.spent:
            return
        try:
            text = self.format(record) + self.terminator
            note = f"(stderr: {self.written:,} bytes of log written, the most it takes; {self.rest})\n"
            if (
                self.written + len(text.encode("utf-8", "replace")) + len(note) > self.max_bytes
            ):  # room is kept for the note
                self.spent = True
                text = note
            self.stream.write(text)
            self.written += len(text.encode("utf-8", "replace"))
            self.flush()
        except RecursionError:
            raise
        except Exception:  # the stdlib handlers' contract: a failed emit never raises
            self.handleError(record)
