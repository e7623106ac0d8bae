"""Output past what memory keeps of an execution, saved to a file as it arrives.

An execution keeps its transcript in memory up to a byte bound; what a print brings past it is
appended to ``<state dir>/outputs/<server>-job-N.txt`` (UTF-8, 0600, never through a link), whose
path the answer names, so the agent can still read it. The folder is kept within bounds like
the saved images, oldest first.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from biopb_mcp.fs import nofollow
from biopb_mcp.kernel import image_files

logger = logging.getLogger(__name__)

__all__ = ["MAX_FILE_BYTES", "Overflow"]

MAX_FILE_BYTES = 256 * 1024 * 1024
"""Bytes one execution may write to its file; what comes after is counted and lost."""


class Overflow:
    """The file holding one execution's output past its memory bound; opened on first write.

    Written from one thread (the one receiving the kernel's messages).
    """

    def __init__(self, directory: Path, name: str, max_bytes: int = MAX_FILE_BYTES) -> None:
        self.directory = Path(directory)
        self.name = name
        self.max_bytes = max_bytes
        self.chars = 0
        """Characters written to the file."""
        self.lost = 0
        """Characters neither kept in memory nor written (file full or unwritable)."""
        self.error: str | None = None
        self._fd: int | None = None
        self._bytes = 0

    @property
    def path(self) -> Path:
        return self.directory / self.name

    def write(self, text: str) -> None:
        """Append ``text``; past ``max_bytes``, or once a write failed, it is only counted."""
        if self.error is not None or self._bytes >= self.max_bytes:
            self.lost += len(text)
            return
        data = text.encode("utf-8", "surrogateescape")
        if self._bytes + len(data) > self.max_bytes:
            kept = data[: self.max_bytes - self._bytes].decode("utf-8", "ignore")  # whole characters
            self.lost += len(text) - len(kept)
            text, data = kept, kept.encode("utf-8", "surrogateescape")
        try:
            if self._fd is None:
                with nofollow.open_dir(self.directory, create=True) as dir_fd:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.name, dir_fd=dir_fd)
                    self._fd = nofollow.open_file(dir_fd, self.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            self.error = str(exc)
            self.lost += len(text)
            logger.warning("could not save output past the memory bound to %s: %s", self.path, exc)
            return
        self._bytes += len(data)
        self.chars += len(text)

    def close(self) -> None:
        """Close the file and keep the folder within bounds (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
            image_files.for_dir(self.directory).sweep(keep=self.name)
