"""The search index's file: opened only when it is ours, kept private, rebuilt rather than altered.

The file lives in the state dir, which the config may point anywhere. So it is opened without
following a link, created 0600 (SQLite gives its `-wal` and `-shm` the main file's mode; older
ones are made private), and marked with an application_id. A file of ours of another layout is
unlinked and made anew, never its tables dropped one by one; anything else at the name (a link,
a FIFO, another user's file, another program's database) is left alone, byte for byte
(:class:`ForeignFile`), and the caller keeps its index in memory.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["APPLICATION_ID", "ForeignFile", "Replaced", "file_id", "open_file", "unlink_files"]

logger = logging.getLogger(__name__)

APPLICATION_ID = 0x62696F70
"""Kept in the file's application_id ("biop"): marks the file as a search index of this server,
so a database of another program is never taken for one. (Releases before it left 0.)"""

_OUR_TABLES = frozenset(
    {
        "roots",
        "docs",
        "sections",
        "sections_data",
        "sections_idx",
        "sections_content",
        "sections_docsize",
        "sections_config",
    }
)
"""Every table any release of the index made: a file with application_id 0 is ours only if it
holds none but these."""

_SIDECARS = ("-wal", "-shm")

FileId = tuple[int, int]
"""(st_dev, st_ino) of the file at the index's name."""


class ForeignFile(Exception):
    """What sits at the index's name is not an index file of ours; it must be left alone."""


class Replaced(Exception):
    """The file was ours, of another layout, and has been unlinked (or was swapped meanwhile): open again."""


def file_id(path: Path) -> FileId | None:
    """The identity of what is at ``path`` now (a link itself, never its target); None when nothing is."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def open_file(
    path: Path, connect: Callable[[str], sqlite3.Connection], schema: Sequence[str], version: int
) -> tuple[sqlite3.Connection, FileId]:
    """A connection to the index file at ``path``, ready at ``version`` (``schema`` made in an empty
    file), and the file's identity.

    Raises:
        ForeignFile: the name holds something that is not ours; it was not changed.
        Replaced: it held ours of another layout, now unlinked; call again.
        sqlite3.Error: the file is damaged (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``) or busy.
    """
    fd, claimed = _claim(path)
    try:
        conn = connect(os.fspath(path))
        try:
            _prepare(path, conn, claimed, schema, version)
        except BaseException:
            conn.close()
            raise
    finally:
        os.close(fd)  # SQLite holds its own descriptor now
    return conn, claimed


def unlink_files(path: Path) -> None:
    """Remove the index file and its sidecars (names only: a link is removed, never followed)."""
    for suffix in ("", *_SIDECARS):
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            pass


def _claim(path: Path) -> tuple[int, FileId]:
    """Open (creating it 0600) the index file, never through a link nor blocking on a FIFO;
    returns the fd and the file's identity. Its sidecars are made private too; a link in their
    place is removed.

    Raises:
        ForeignFile: a link, not a regular file, or a file of another user is at the name.
    """
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if os.path.islink(name):
            raise ForeignFile("it is a symbolic link") from None
        raise ForeignFile(exc.strerror or str(exc)) from None
    try:
        _make_private(fd)
        st = os.fstat(fd)
        for suffix in _SIDECARS:
            _claim_sidecar(name + suffix)
    except BaseException:
        os.close(fd)
        raise
    return fd, (st.st_dev, st.st_ino)


def _claim_sidecar(name: str) -> None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    except OSError:
        if os.path.islink(name):  # SQLite itself would refuse it; what it points to is untouched
            os.unlink(name)
            return
        raise
    try:
        _make_private(fd)
    finally:
        os.close(fd)


def _make_private(fd: int) -> None:
    """Mode 0600 on an open regular file of this user (the index holds doc text).

    Raises:
        ForeignFile: not a regular file, or another user's.
    """
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise ForeignFile("it is not a regular file")
    if st.st_uid != os.getuid():
        raise ForeignFile(f"it belongs to user id {st.st_uid}")
    if st.st_mode & 0o077:
        os.fchmod(fd, 0o600)


def _header(conn: sqlite3.Connection) -> tuple[int, int, frozenset[str]]:
    """(application_id, user_version, table names) of a database, read without writing it."""
    app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    tables = frozenset(
        r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    )
    return app_id, version, tables


def _prepare(path: Path, conn: sqlite3.Connection, claimed: FileId, schema: Sequence[str], version: int) -> None:
    """Make ``conn``'s file a ready index of ``version``; only a file of ours is ever written
    (the WAL mode too: setting it rewrites the header)."""
    app_id, found, tables = _header(conn)
    if file_id(path) != claimed:  # swapped since it was claimed: never trust it
        raise Replaced
    if not (app_id == APPLICATION_ID or (app_id == 0 and tables <= _OUR_TABLES)):
        raise ForeignFile(f"it is a database of another program (tables {', '.join(sorted(tables)[:5])})")
    if tables and found == version:
        _set_modes(conn)
        if app_id == 0:  # an index of the release before the mark
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("SELECT 1 FROM docs LIMIT 1").fetchall()  # a damaged file fails here
        return
    conn.execute("BEGIN IMMEDIATE")  # another server may be creating or replacing it right now
    try:
        if file_id(path) != claimed:
            raise Replaced
        app_id, found, tables = _header(conn)
        if tables and found == version and app_id == APPLICATION_ID:
            conn.execute("COMMIT")  # made by the other server meanwhile
            _set_modes(conn)
            return
        if tables:
            logger.info("Search index %s has schema %d, this server uses %d: rebuilding it", path, found, version)
            unlink_files(path)
            raise Replaced
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        for statement in schema:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    _set_modes(conn)


def _set_modes(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")  # a cache: a lost last commit is re-read
