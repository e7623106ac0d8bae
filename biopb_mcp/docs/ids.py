"""Doc ids: the grammar, the `@view` suffix, and resolving an id to a path that stays in its tier.

An id is the path of a `.md` file under its tier, minus `.md`: segments of `[A-Za-z0-9._-]`
joined by `/`. No segment is empty, `.` or `..`, or starts with `.` (so the store's own files —
`.history/`, `.lock`, `.shipped-manifest.json` — can never be named). `@` is outside the charset,
so whatever follows it is a view, never a doc. `index` is the index; an id ending in `/` is
reserved for collections (folders an index line may list whole).
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from biopb_mcp.docs import ID_MAX_CHARS
from biopb_mcp.errors import InvalidDocId

logger = logging.getLogger(__name__)

INDEX_ID = "index"
"""The reserved id of the index (`index.md` at the top of a tier)."""

DOC_SUFFIX = ".md"

VIEWS_HELP = '"<id>@diff", "<id>@history" or "<id>@v<N>"'

_ALLOWED = re.compile(r"[A-Za-z0-9._/-]*\Z")
_BAD_CHAR = re.compile(r"[^A-Za-z0-9._/-]")
_VERSION_VIEW = re.compile(r"v([1-9][0-9]{0,8})\Z")
# The whole grammar in one pattern (a segment may not start with '.', which also rules out '.'
# and '..'): the fast path for the index parser, which checks every entry on every render.
_VALID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*(?:/[A-Za-z0-9_-][A-Za-z0-9._-]*)*\Z")


@dataclass(frozen=True)
class Ref:
    """A parsed read_doc argument: the id and, after `@`, the view asked for."""

    doc_id: str
    view: str | None = None  # None | "diff" | "history" | "version"
    version: int | None = None

    @property
    def text(self) -> str:
        """The reference as the agent would type it."""
        if self.view is None:
            return self.doc_id
        return f"{self.doc_id}@v{self.version}" if self.view == "version" else f"{self.doc_id}@{self.view}"


def check_id(doc_id: str) -> str:
    """Return `doc_id` if it is in the grammar (or is `index`), else raise InvalidDocId saying why.

    Raises:
        InvalidDocId: with a message naming the rule broken and what to write instead.
    """
    if is_valid_id(doc_id):
        return doc_id
    if not isinstance(doc_id, str) or doc_id == "":
        raise InvalidDocId("Empty doc id: give the id the index lists, e.g. read_doc(\"index\").")
    shown = doc_id if len(doc_id) <= 80 else doc_id[:77] + "..."
    if len(doc_id) > ID_MAX_CHARS:
        raise InvalidDocId(
            f"Doc id {shown!r} is {len(doc_id)} characters; ids are at most {ID_MAX_CHARS}."
        )
    if "@" in doc_id:
        raise InvalidDocId(
            f"{shown!r}: '@' is never part of an id; a suffix after '@' is a read-only view "
            f"({VIEWS_HELP})."
        )
    if doc_id.startswith("/"):
        raise InvalidDocId(
            f"{shown!r} is an absolute path; ids are relative to the docs tier (drop the leading '/')."
        )
    if doc_id.endswith("/"):
        raise InvalidDocId(
            f"{shown!r} ends in '/': ids ending in '/' are reserved for collections; "
            "name a doc inside it instead, e.g. 'group/name'."
        )
    if not _ALLOWED.match(doc_id):
        bad = _BAD_CHAR.search(doc_id)
        char = bad.group(0) if bad else "?"
        hint = " (use '/' to separate segments)" if char == "\\" else ""
        raise InvalidDocId(
            f"Doc id {shown!r} contains {char!r}{hint}; ids use letters, digits, '.', '_', '-' "
            "and '/' between segments."
        )
    for segment in doc_id.split("/"):
        if segment == "":
            raise InvalidDocId(f"Doc id {shown!r} has an empty segment ('//'); remove the extra '/'.")
        if segment in (".", ".."):
            raise InvalidDocId(
                f"Doc id {shown!r} has a {segment!r} segment; ids cannot walk the directory tree."
            )
        if segment.startswith("."):
            raise InvalidDocId(
                f"Doc id {shown!r} has a segment starting with '.' ({segment!r}); hidden names are "
                "the store's own files, never docs."
            )
    raise InvalidDocId(f"Doc id {shown!r} is outside the id grammar.")  # unreachable by design


def is_valid_id(doc_id: str) -> bool:
    """True when `doc_id` is in the grammar (`index` included)."""
    return isinstance(doc_id, str) and len(doc_id) <= ID_MAX_CHARS and _VALID.match(doc_id) is not None


def parse_ref(ref: str) -> Ref:
    """Split a read_doc argument into id and view: `x`, `x@diff`, `x@history`, `x@v3`.

    Raises:
        InvalidDocId: bad id, or a view that does not exist.
    """
    if not isinstance(ref, str):
        raise InvalidDocId("A doc id must be a string.")
    doc_id, sep, view = ref.partition("@")
    check_id(doc_id)
    if not sep:
        return Ref(doc_id)
    if view in ("diff", "history"):
        return Ref(doc_id, view)
    match = _VERSION_VIEW.match(view)
    if match:
        return Ref(doc_id, "version", int(match.group(1)))
    raise InvalidDocId(f"Unknown view {ref!r}: the views are {VIEWS_HELP}.")


def check_write_id(doc_id: str) -> str:
    """An id write_doc accepts: the grammar, `index`, and never a view.

    Raises:
        InvalidDocId: with the reason, e.g. that `x@diff` is a read-only view.
    """
    if isinstance(doc_id, str) and "@" in doc_id:
        base = doc_id.partition("@")[0]
        raise InvalidDocId(
            f"{doc_id!r} is a read-only view, not a doc; write to the doc id itself"
            + (f" ({base!r})." if is_valid_id(base) else ".")
        )
    return check_id(doc_id)


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
    path = tier.joinpath(*doc_id.split("/")[:-1], doc_id.rsplit("/", 1)[-1] + DOC_SUFFIX)
    if _crosses_symlink(os.fspath(tier), os.fspath(path)) and not _inside(
        _tier_root(os.fspath(tier)), os.path.realpath(path)
    ):
        raise InvalidDocId(
            f"Doc id {doc_id!r} resolves outside the docs tier {tier} (through a symlink); "
            "refusing to read or write it."
        )
    return path


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


def escapes(tier: Path, path: Path) -> bool:
    """True when `path` (inside `tier` by name) resolves outside it through a symlink."""
    return not _inside(os.path.realpath(tier), os.path.realpath(path))


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
