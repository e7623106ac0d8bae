"""The folder of saved images (``<state dir>/images``): written safely, kept bounded.

An image too big to attach, or past ``max_images`` in one execution, is saved there and its path
shown to the agent instead. Every server of one state dir saves there, run after run, so the folder
is swept, oldest first, down to its bounds: once when a server first saves, and again whenever
the files it saved since might have pushed it over. An image the agent was shown may therefore
be gone a few hundred images later; the session notebook keeps them at full size.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

from biopb_mcp.fs import nofollow
from biopb_mcp.fs.atomic import sweep_stale_temps

logger = logging.getLogger(__name__)

__all__ = ["IMAGE_FOLDERS", "MAX_BYTES", "MAX_FILES", "ImageFiles", "ImageFolders", "for_dir"]

MAX_FILES = 500
"""Saved images kept in the folder, across every server of the state dir."""

MAX_BYTES = 512 * 1024 * 1024
"""Bytes of saved images kept in the folder."""

_SWEEP_EVERY = 50
"""Saves between sweeps of a folder this process keeps within bounds: other servers of the state
dir save there too (a sweep lists the whole folder, so not at every save)."""


class ImageFiles:
    """Saves images into one folder and keeps it within ``max_files`` and ``max_bytes``."""

    def __init__(self, directory: Path, *, max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES) -> None:
        self.directory = Path(directory)
        self.max_files = max_files
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._since_sweep: int | None = None
        """Saves since the last sweep; None until this process swept once."""
        self._files = 0
        self._bytes = 0
        """The folder's size as of the last sweep plus what this process saved since."""

    def save(self, name: str, data: bytes | Iterable[bytes]) -> Path:
        """Write ``data`` (bytes, or chunks written as they come) as ``name`` (0600, never through
        a link planted there) and sweep if due.

        Raises:
            OSError: the folder or the file cannot be written.
        """
        written = 0

        def counted(chunks: Iterable[bytes]) -> Iterator[bytes]:
            nonlocal written
            for chunk in chunks:
                written += len(chunk)
                yield chunk

        if isinstance(data, bytes):
            nofollow.write_atomic(self.directory, name, data, durable=False)
            written = len(data)
        else:
            nofollow.write_atomic(self.directory, name, counted(data), durable=False)
        with self._lock:
            self._files += 1
            self._bytes += written
            due = (
                self._since_sweep is None
                or self._since_sweep + 1 >= _SWEEP_EVERY
                or self._files > self.max_files
                or self._bytes > self.max_bytes
            )
            self._since_sweep = (self._since_sweep or 0) + 1
        if due:
            self.sweep(keep=name)
        return self.directory / name

    def sweep(self, keep: str | None = None) -> int:
        """Remove the oldest images until the folder is within bounds; returns how many went.

        Only regular files are counted and removed (a folder or a link there is left alone), and
        ``keep`` (the image just saved) never goes. Never raises.
        """
        entries: list[tuple[float, int, str]] = []
        kept: list[int] = []
        try:
            with nofollow.open_dir(self.directory) as dir_fd:
                for name in os.listdir(dir_fd):
                    if name.startswith("."):  # a save in flight (its temp file): never counted
                        continue
                    with contextlib.suppress(OSError):
                        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                        if stat.S_ISREG(st.st_mode):
                            if name == keep:
                                kept.append(st.st_size)
                            else:
                                entries.append((st.st_mtime, st.st_size, name))
                entries.sort()
                count = len(entries) + len(kept)
                total = sum(size for _, size, _ in entries) + sum(kept)
                removed = 0
                for _mtime, size, name in entries:
                    if count <= self.max_files and total <= self.max_bytes:
                        break
                    with contextlib.suppress(FileNotFoundError):  # another server swept it first
                        os.unlink(name, dir_fd=dir_fd)
                    count, total, removed = count - 1, total - size, removed + 1
            sweep_stale_temps(self.directory)  # temp files of servers killed mid-save
        except FileNotFoundError:
            return 0
        except OSError as exc:
            logger.warning("could not sweep the saved images in %s: %s", self.directory, exc)
            return 0
        with self._lock:
            self._since_sweep, self._files, self._bytes = 0, count, total
        if removed:
            logger.info("removed the %d oldest saved images from %s", removed, self.directory)
        return removed


class ImageFolders:
    """The one :class:`ImageFiles` per folder in this process.

    Process-wide (:data:`IMAGE_FOLDERS`): every kernel host of the process that saves into one
    folder (a restart, a second server in one process) must share that folder's sweep schedule
    and running size; two schedules would each count only their own saves, and the folder could
    run past its bounds until the next sweep.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._folders: dict[str, ImageFiles] = {}

    def for_dir(self, directory: Path) -> ImageFiles:
        """The ImageFiles of ``directory`` (made on first use)."""
        key = os.path.abspath(directory)
        with self._lock:
            found = self._folders.get(key)
            if found is None:
                found = self._folders[key] = ImageFiles(Path(key))
            return found


IMAGE_FOLDERS: Final = ImageFolders()
"""This process's image folders (see :class:`ImageFolders` for why there is one)."""


def for_dir(directory: Path) -> ImageFiles:
    """The one ImageFiles of ``directory`` in this process (its sweep schedule is per folder)."""
    return IMAGE_FOLDERS.for_dir(directory)
