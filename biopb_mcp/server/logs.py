"""Logging set-up: the server log file, optionally stderr, never stdout (the stdio JSON-RPC wire)."""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys

from biopb_mcp.config.settings import Settings
from biopb_mcp.errors import ConfigError

__all__ = ["LOG_BACKUPS", "LOG_FORMAT", "LOG_MAX_BYTES", "PrivateRotatingFileHandler", "setup_logging"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(process)d]: %(message)s"
"""One line per record; the pid tells two servers sharing a log file apart."""

LOG_MAX_BYTES = 10 * 1024 * 1024
"""Size at which the server log is rotated to ``server.log.1``: whatever floods it, the disk is safe."""

LOG_BACKUPS = 2
"""Rotated copies kept (``server.log.1`` … ``.2``): the log never takes more than ~3 × LOG_MAX_BYTES."""

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
        # the handler creates every file 0600: logs quote agent code and doc text
        file_handler: logging.Handler = PrivateRotatingFileHandler(
            log_file, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot write the log file {log_file}: {exc.strerror or exc}; set server.log_file "
            f"or server.state_dir in {settings.config_file} to a writable place",
            key="server.log_file") from None
    handlers = [file_handler]
    if stderr:
        handlers.append(logging.StreamHandler(sys.stderr))

    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _OURS, False)]:
        root.removeHandler(old)
        old.close()
    formatter = logging.Formatter(LOG_FORMAT)
    for handler in handlers:
        setattr(handler, _OURS, True)
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(settings.server.log_level)
    log = logging.getLogger(__name__)
    for message in settings.warnings:
        log.warning(message)


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A size-capped log whose every file, rotated or new, is created 0600.

    The stock handler opens the fresh file after a rollover with ``open()``, i.e. with the
    umask's mode (usually 0644), and the log quotes agent code and doc text.
    """

    def _open(self):  # type: ignore[no-untyped-def]  # the stdlib signature is untyped
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return open(fd, self.mode, encoding=self.encoding, errors=self.errors)
