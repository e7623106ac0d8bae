"""A session notebook on disk: valid JSON after every write, appended to in place, never rewritten.

The file is ``<head> <first cell>, <setup slot>, <cell>, … <cell> TAIL``, one cell a line (JSON
escapes every newline inside a string). Appending writes the new cells where ``TAIL`` was and
``TAIL`` after them, in one write: the cost of an append is the size of what is appended, never
of the notebook, and the writer holds nothing of what it wrote before. A process that dies (even
by SIGKILL) before or after that write leaves a valid notebook; only a kill landing inside the
write of several pages can leave it torn, and :func:`mend_torn` closes it at the next start,
dropping the torn cell.

The setup slot holds a cell that changes during the session: it is exactly one page at a
page-aligned offset, so rewriting it is one write the kernel completes or never starts (it checks
for a fatal signal between pages, never inside one), padded with spaces, which JSON ignores.

The file is created under a random temp name (``O_EXCL|O_NOFOLLOW``, 0600) renamed into place,
then opened again and checked to be exactly that file before anything is appended: nothing
planted in the folder (a link, a hard link, a swapped file) is ever written through. It stays
locked (``flock``) while it is written, so :func:`mend_torn` never touches a live notebook.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import stat
from pathlib import Path

from biopb_mcp.fs import file_locks, nofollow

logger = logging.getLogger(__name__)

__all__ = ["NOTEBOOK_NAME", "SLOT_BYTES", "TAIL", "NotebookFile", "mend_torn"]

SLOT_BYTES = 4096
"""The setup cell's slot: one page at a page-aligned offset (any page size is a multiple)."""

TAIL = b"\n ]\n}\n"
"""What closes the notebook after its last cell; each append overwrites it and writes it anew."""

NOTEBOOK_NAME = re.compile(r"session-[0-9]{8}-[0-9]{6}-[0-9]+-[0-9]+\.ipynb")
"""The names session notebooks get (``session-<date>-<time>-<pid>-<n>.ipynb``)."""


class NotebookFile:
    """One session notebook, open for appends (one writer thread)."""

    def __init__(self, path: Path, fd: int, end: int, slot: int) -> None:
        self.path = path
        self._fd = fd
        self._end = end
        """Offset of ``TAIL``: where the next cell goes."""
        self._slot = slot

    @classmethod
    def create(
        cls, directory: Path, name: str, head: bytes, first: bytes, slot: bytes, cells: list[bytes]
    ) -> NotebookFile:
        """Write a new notebook: ``head`` (the JSON up to and with ``"cells": [``), the ``first``
        cell, the ``slot`` cell (exactly ``SLOT_BYTES``), then ``cells``.

        Raises:
            OSError: it cannot be written, or what is at its name is not what was written.
        """
        assert len(slot) == SLOT_BYTES
        start = head + first + b",\n"
        offset = (len(start) // SLOT_BYTES + 1) * SLOT_BYTES
        start += b" " * (offset - len(start) - 1) + b"\n"
        body = start + slot + b"".join(b",\n" + c for c in cells) + TAIL
        nofollow.write_atomic(directory, name, body, durable=False)
        with nofollow.open_dir(directory) as dir_fd:
            fd = nofollow.open_file(dir_fd, name, os.O_RDWR | os.O_NONBLOCK)
        try:
            st = os.fstat(fd)
            if (
                not stat.S_ISREG(st.st_mode)
                or st.st_nlink != 1
                or st.st_uid != os.getuid()
                or st.st_size != len(body)
                or os.pread(fd, len(body), 0) != body
            ):
                raise OSError(errno.EEXIST, f"{name} in {directory} changed under the writer")
            file_locks.lock(fd, wait=False)
        except BaseException:
            os.close(fd)
            raise
        return cls(directory / name, fd, len(body) - len(TAIL), offset)

    @property
    def size(self) -> int:
        """Bytes in the file."""
        return self._end + len(TAIL)

    def append(self, cells: list[bytes]) -> None:
        """Put ``cells`` where the closing was, and the closing after them: one write.

        Raises:
            OSError: the write failed (a full disk); the notebook is closed where it was.
        """
        if not cells:
            return
        data = b"".join(b",\n" + c for c in cells) + TAIL
        try:
            view, offset = memoryview(data), self._end
            while view:
                written = os.pwrite(self._fd, view, offset)
                view, offset = view[written:], offset + written
        except OSError:
            with contextlib.suppress(OSError):
                os.pwrite(self._fd, TAIL, self._end)
                os.ftruncate(self._fd, self.size)
            raise
        self._end += len(data) - len(TAIL)

    def write_slot(self, slot: bytes) -> None:
        """Replace the setup cell (``slot`` is exactly ``SLOT_BYTES``); a failure leaves the old one.

        Raises:
            OSError: the write failed.
        """
        assert len(slot) == SLOT_BYTES
        os.pwrite(self._fd, slot, self._slot)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


def mend_torn(directory: Path) -> list[Path]:
    """Close the session notebooks in ``directory`` that a killed writer left torn; returns them.

    Torn means its closing is missing: the writer died inside the write of a cell. The last whole
    cell is kept, what follows is cut, and the closing written. A notebook whose writer is alive
    (it holds a lock on it) or that is another user's is left alone. Never raises.
    """
    mended: list[Path] = []
    try:
        names = [n for n in os.listdir(directory) if NOTEBOOK_NAME.fullmatch(n)]
    except (FileNotFoundError, NotADirectoryError):  # nothing recorded there yet
        return []
    except OSError as exc:
        logger.warning("could not look for torn session notebooks in %s: %s", directory, exc)
        return []
    try:
        with nofollow.open_dir(directory) as dir_fd:
            for name in names:
                with contextlib.suppress(OSError):
                    fd = nofollow.open_file(dir_fd, name, os.O_RDWR | os.O_NONBLOCK)
                    try:
                        if _mend(fd):
                            mended.append(directory / name)
                    finally:
                        os.close(fd)
    except OSError as exc:
        logger.warning("could not look for torn session notebooks in %s: %s", directory, exc)
    return mended


def _mend(fd: int) -> bool:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_size < len(TAIL):
        return False
    if os.pread(fd, len(TAIL), st.st_size - len(TAIL)) == TAIL:
        return False
    try:
        file_locks.lock(fd, wait=False)
    except OSError:  # its writer is alive and mid-write
        return False
    size = os.fstat(fd).st_size
    if os.pread(fd, len(TAIL), size - len(TAIL)) == TAIL:
        return False
    cut = _last_whole_cell_end(fd, size)
    if cut is None:
        return False
    os.pwrite(fd, TAIL, cut)
    os.ftruncate(fd, cut + len(TAIL))
    return True


def _last_whole_cell_end(fd: int, size: int) -> int | None:
    """Offset just past the last complete cell of a torn notebook (each cell is one line)."""
    window = 1 << 16
    while True:
        start = max(0, size - window)
        data = os.pread(fd, size - start, start)
        at = data.rfind(b"\n{")
        if at >= 0 or start == 0:
            break
        window *= 4
    if at < 0:
        return None
    line = data[at + 1 :].split(b"\n", 1)[0]
    line = line[:-1] if line.endswith(b",") else line  # torn just after the next cell's comma
    try:
        cell = json.loads(line)
    except ValueError:
        cell = None
    if isinstance(cell, dict) and "cell_type" in cell:
        return start + at + 1 + len(line)
    before = start + at  # the torn cell's line starts after ",\n": cut before the comma
    return before - 1 if before > 0 and os.pread(fd, 1, before - 1) == b"," else before
