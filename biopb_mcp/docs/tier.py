"""A tier: one folder of docs, and the only code that turns an id into a file in it.

Two tiers make the store: the local one (writable, edited by the agent and by hand, possibly a
shared or synced folder) and the shipped one (read-only, part of the wheel). A tier knows where
an id's file is without ever leaving its root, which ids it holds, and how to read one.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from pathlib import Path

from biopb_mcp.docs.frontmatter import read_text_at, read_text_in
from biopb_mcp.docs.ids import DOC_SUFFIX, INDEX_ID, check_id, is_valid_id
from biopb_mcp.errors import DocProblem, DocUnreadable, InvalidDocId
from biopb_mcp.fs import nofollow
from biopb_mcp.fs.stamps import Stamp, stamp_of

__all__ = ["Found", "Peeked", "Tier", "doc_path", "scan_tier", "walk_tier"]

logger = logging.getLogger(__name__)


class Found(Enum):
    """What a batch peek found at an id's place in a tier."""

    NOTHING = "nothing"  # no file: the id is not in this tier
    FILE = "file"  # something that is not a link: it wins for its id, readable or not
    LINK = "link"  # a link on the way: only `Tier.read` decides whether it stays inside


@dataclass(frozen=True)
class Peeked:
    """One id of a batch peek; `text` is read only when the caller asked for it."""

    doc_id: str
    found: Found
    path: str = ""
    stamp: Stamp | None = None
    text: str | None = None
    error: DocUnreadable | None = None


class Tier:
    """One folder of docs: an id's path in it, the ids it holds, and reading one inside it."""

    def __init__(self, root: Path, *, writable: bool) -> None:
        self.root = Path(root)
        self.writable = writable
        self._root_str = os.fspath(self.root)

    def __repr__(self) -> str:
        return f"Tier({self.root!s}, writable={self.writable})"

    def path(self, doc_id: str) -> Path:
        """The checked path of `doc_id` here (see `doc_path`).

        Raises:
            InvalidDocId: bad id, or a path that resolves outside the tier.
        """
        return doc_path(self.root, doc_id)

    def file(self, doc_id: str) -> str:
        """Unchecked path string of a (valid) id: a cheap stat target, never opened."""
        return f"{self._root_str}{os.sep}{doc_id}{DOC_SUFFIX}"

    def exists(self, doc_id: str) -> bool:
        """Whether a regular file is there for `doc_id`; never for `index`, the index itself.

        An index line `- index: …` names no doc: counting the index file as one would list it a
        second time, under the index's own URI (a resources cursor there restarts the walk).
        """
        if doc_id == INDEX_ID:
            return False
        try:
            return stat.S_ISREG(os.stat(self.file(doc_id)).st_mode)
        except OSError:
            return False

    def peek_many(self, doc_ids: Iterable[str], want_text: Callable[[str, Stamp], bool]) -> Iterator[Peeked]:
        """What is at each id's place, and its text where `want_text(path, stamp)` asks for it.

        For a listing page: each folder is opened once with no link followed (as `read` opens
        every component per doc), then each doc costs one stat and, for a text, one open.
        Ids must be valid (they come from the store's own lists).
        """
        folders: dict[str, list[str]] = {}
        for doc_id in doc_ids:
            folders.setdefault(doc_id.rpartition("/")[0], []).append(doc_id)
        for folder, members in folders.items():
            try:
                with nofollow.open_dir(self.root, nofollow.split(folder)) as dir_fd:
                    for doc_id in members:
                        yield self._peek_at(dir_fd, doc_id, want_text)
            except FileNotFoundError:
                yield from (Peeked(doc_id, Found.NOTHING) for doc_id in members)
            except nofollow.LinkRefused:
                yield from (Peeked(doc_id, Found.LINK) for doc_id in members)
            except OSError as exc:  # NOTADIR is LinkRefused; this is a folder that cannot be opened
                logger.warning("Cannot open docs folder %s in %s: %s", folder, self.root, exc)
                yield from (Peeked(doc_id, Found.NOTHING) for doc_id in members)

    def _peek_at(self, dir_fd: int, doc_id: str, want_text: Callable[[str, Stamp], bool]) -> Peeked:
        name = doc_id.rpartition("/")[2] + DOC_SUFFIX
        path = self.file(doc_id)
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return Peeked(doc_id, Found.NOTHING)
        except OSError as exc:
            return Peeked(doc_id, Found.FILE, path, error=DocUnreadable(f"Cannot read {path}: {exc.strerror or exc}."))
        if stat.S_ISLNK(st.st_mode):
            return Peeked(doc_id, Found.LINK, path)
        stamp = stamp_of(st)
        if not want_text(path, stamp):
            return Peeked(doc_id, Found.FILE, path, stamp)
        try:
            return Peeked(doc_id, Found.FILE, path, stamp, read_text_at(dir_fd, name, path))
        except FileNotFoundError:  # removed since the stat
            return Peeked(doc_id, Found.NOTHING)
        except DocUnreadable as exc:
            return Peeked(doc_id, Found.FILE, path, stamp, error=exc)

    def has_doc(self, doc_id: str, folders: dict[str, bool] | None = None) -> bool:
        """Whether the walk (``scan_tier``) would yield ``doc_id`` here, found with one ``lstat``
        per segment instead of a walk: a valid id, no folder on the way a link or a non-folder,
        the file itself no folder, and a link only when it resolves inside the tier.

        ``folders`` (folder id -> whether it is a real folder), kept by the caller for one
        snapshot of the tier, spares the folders' ``lstat`` for every id after the first in
        them: the index's 200 entries in two folders cost 200 ``lstat``, not 600.
        """
        if doc_id == INDEX_ID or not is_valid_id(doc_id):
            return False
        folder = doc_id.rpartition("/")[0]
        if folder and not self._is_folder(folder, {} if folders is None else folders):
            return False
        root = self._root_str
        path = f"{root}{os.sep}{doc_id}{DOC_SUFFIX}"
        try:
            mode = os.lstat(path).st_mode
        except OSError:  # missing, or the root is no folder
            return False
        if stat.S_ISDIR(mode):
            return False
        if stat.S_ISLNK(mode) and not _inside(os.path.realpath(root), os.path.realpath(path)):
            logger.warning("Skipping %s: a symlink that leaves the docs tier", path)
            return False
        return True

    def _is_folder(self, folder: str, known: dict[str, bool]) -> bool:
        """Whether ``folder`` (an id's folder part) and each folder above it is a real folder here,
        not a link or a file; each answer kept in ``known``."""
        found = known.get(folder)
        if found is None:
            parent = folder.rpartition("/")[0]
            found = not parent or self._is_folder(parent, known)
            if found:
                try:
                    found = stat.S_ISDIR(os.lstat(f"{self._root_str}{os.sep}{folder}").st_mode)
                except OSError:  # missing, or the root is no folder
                    found = False
            known[folder] = found
        return found

    def scan(self, *, include_invalid: bool = False) -> Iterator[tuple[str | None, os.DirEntry[str]]]:
        """`(id, DirEntry)` of every doc file here (see `scan_tier`)."""
        return scan_tier(self.root, include_invalid=include_invalid)

    def files(self) -> dict[str, str]:
        """id -> file path of every doc file here, from one walk."""
        return {doc_id: entry.path for doc_id, entry in scan_tier(self.root) if doc_id is not None}

    def ids(self) -> list[str]:
        """Every id with a doc file here, in walk order."""
        return [doc_id for doc_id, _ in scan_tier(self.root) if doc_id is not None]

    def read(self, doc_id: str) -> str:
        """The doc's text, read with no link followed below the root except one that stays inside.

        A link inside the tier (`path` checks that) is read at the place it resolves to, again
        without following links: so a folder swapped for a link between the check and the read
        cannot lead out of the tier.

        Raises:
            InvalidDocId: the id resolves outside the tier.
            FileNotFoundError: no file for it here.
            DocUnreadable: not a readable UTF-8 text file.
        """
        check_id(doc_id)
        try:
            # No link is followed here, so a file this reads is inside the tier by construction.
            return read_text_in(self.root, doc_id + DOC_SUFFIX)
        except DocUnreadable as exc:
            if not isinstance(exc.__cause__, nofollow.LinkRefused):
                raise
        path = self.path(doc_id)  # a link on the way: InvalidDocId unless it stays inside
        root_real = os.path.realpath(self.root)
        rel = os.path.relpath(os.path.realpath(path), root_real)
        if rel.startswith(".." + os.sep) or rel == ".." or os.path.isabs(rel):
            raise _escapes(self.root, doc_id)
        return read_text_in(Path(root_real), rel.replace(os.sep, "/"))

    def read_file(self, name: str) -> str:
        """A file at the top of the tier by name (`index.md`), never through a link.

        Raises:
            FileNotFoundError: no such file.
            DocUnreadable: a link, a directory, not readable UTF-8 text.
        """
        return read_text_in(self.root, name)


def _escapes(tier: Path, doc_id: str) -> InvalidDocId:
    return InvalidDocId(
        f"Doc id {doc_id!r} resolves outside the docs tier {tier} (through a symlink); refusing to read or write it.",
        kind=DocProblem.ESCAPES_TIER,
        doc_id=doc_id,
    )


def _inside(root_real: str, path_real: str) -> bool:
    return path_real == root_real or path_real.startswith(root_real.rstrip(os.sep) + os.sep)


def doc_path(tier: Path, doc_id: str) -> Path:
    """The file for `doc_id` in `tier`, after checking it resolves inside the tier.

    Symlinks are followed and the result must stay inside the tier's own real path, so neither
    `..` nor a symlink can reach a file outside it. The returned path is the unresolved one (a
    write replaces a symlink inside the tier rather than writing through it).

    Raises:
        InvalidDocId: bad id, or a path that resolves outside the tier.
    """
    check_id(doc_id)
    root = os.fspath(tier)
    # Strings, not pathlib joins: this runs several times per listed doc on a 10,000-doc page walk.
    path = f"{root}{os.sep}{doc_id.replace('/', os.sep)}{DOC_SUFFIX}"
    if _crosses_symlink(root, path) and not _inside(_tier_root(root), os.path.realpath(path)):
        raise _escapes(tier, doc_id)
    return Path(path)


def _crosses_symlink(tier: str, path: str) -> bool:
    """Whether any existing component of `path` below `tier` is a symlink.

    An id has no `..` and no empty segment, so a path with no symlink below the tier is inside
    it by construction; only a symlink needs the full realpath check. One lstat per segment
    instead of realpath's one per component of the whole absolute path (a deep site-packages
    path made that most of a resources/list page).
    """
    current = tier
    for segment in path[len(tier) + 1 :].split(os.sep):
        current = f"{current}{os.sep}{segment}"
        try:
            mode = os.lstat(current).st_mode
        except OSError:  # missing (or not a directory): nothing further down exists to escape
            return False
        if stat.S_ISLNK(mode):
            return True
    return False


@lru_cache(maxsize=32)
def _tier_root(tier: str) -> str:
    """The real path of a tier's root, resolved once per process.

    Half the cost of a lookup was re-resolving a deep site-packages path. Caching it fails safe:
    if the root were re-pointed while the server runs, files under the new target would resolve
    outside the cached root and be refused, never let through.
    """
    return os.path.realpath(tier)


def scan_tier(tier: Path, *, include_invalid: bool = False) -> Iterator[tuple[str | None, os.DirEntry[str]]]:
    """Yield `(id, DirEntry)` for every `.md` file in `tier`, hidden names and the index skipped.

    Files whose names are outside the grammar yield `(None, entry)` only when `include_invalid`
    (for `check`). Symlinked directories are not descended; symlinked files that resolve outside
    the tier are skipped with a warning. Plain strings and DirEntry, not Path: this walks 10,000
    files for a listing, where pathlib's per-object cost dominates.
    """
    root = os.fspath(tier)
    if not os.path.isdir(root):
        return
    root_real = os.path.realpath(root)
    stack: list[tuple[str, str]] = [(root, "")]
    while stack:
        directory, prefix = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            logger.warning("Cannot list docs directory %s: %s", directory, exc)
            continue
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, f"{prefix}{name}/"))
                    continue
            except OSError:
                continue
            if not name.endswith(DOC_SUFFIX):
                continue
            doc_id: str | None = prefix + name[: -len(DOC_SUFFIX)]
            if doc_id == INDEX_ID:
                continue
            if not is_valid_id(doc_id):  # type: ignore[arg-type]
                doc_id = None
                if not include_invalid:
                    continue
            if entry.is_symlink() and not _inside(root_real, os.path.realpath(entry.path)):
                logger.warning("Skipping %s: a symlink that leaves the docs tier", entry.path)
                continue
            yield doc_id, entry


def walk_tier(tier: Path, *, include_invalid: bool = False) -> Iterator[tuple[str | None, Path]]:
    """`scan_tier` with Paths: `(id, path)` per doc file (see there)."""
    for doc_id, entry in scan_tier(tier, include_invalid=include_invalid):
        yield doc_id, Path(entry.path)
