"""Doc ids: the grammar and the `@view` suffix. Where an id's file is belongs to `tier`.

An id is the path of a `.md` file under its tier, minus `.md`: segments of `[A-Za-z0-9._-]`
joined by `/`. No segment is empty, `.` or `..`, or starts with `.` (so the store's own files —
`.history/`, `.lock`, `.shipped-manifest.json` — can never be named). `@` is outside the charset,
so whatever follows it is a view, never a doc. `index` is the index; an id ending in `/` is
reserved for collections (folders an index line may list whole).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from biopb_mcp.docs.limits import ID_MAX_CHARS
from biopb_mcp.errors import DocProblem, InvalidDocId

INDEX_ID = "index"
"""The reserved id of the index (`index.md` at the top of a tier)."""

DOC_SUFFIX = ".md"

VIEWS_HELP = '"<id>@diff", "<id>@history" or "<id>@v<N>"'

ID_CHARS_HELP = "ids use letters, digits, '.', '_', '-' and '/' between segments"
"""The charset rule, as a refusal of a character outside it states it."""

_ALLOWED = re.compile(r"[A-Za-z0-9._/-]*\Z")
_BAD_CHAR = re.compile(r"[^A-Za-z0-9._/-]")
_VERSION_VIEW = re.compile(r"v([1-9][0-9]{0,8})\Z")
# The whole grammar in one pattern (a segment may not start with '.', which also rules out '.'
# and '..'): the fast path for the index parser, which checks every entry on every render.
_VALID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*(?:/[A-Za-z0-9_-][A-Za-z0-9._-]*)*\Z")


@dataclass(frozen=True)
class Ref:
    """A parsed doc reference: the id and, after `@`, the view asked for."""

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
        InvalidDocId: with a message naming the rule broken (kind and fields let the text layer
            say what to write instead).
    """
    if is_valid_id(doc_id):
        return doc_id
    if not isinstance(doc_id, str) or doc_id == "":
        raise InvalidDocId("Empty doc id", kind=DocProblem.EMPTY_ID, doc_id="")
    shown = doc_id if len(doc_id) <= 80 else doc_id[:77] + "..."
    if len(doc_id) > ID_MAX_CHARS:
        raise InvalidDocId(
            f"Doc id {shown!r} is {len(doc_id)} characters; ids are at most {ID_MAX_CHARS}.",
            kind=DocProblem.ID_TOO_LONG,
            doc_id=doc_id,
            count=len(doc_id),
            limit=ID_MAX_CHARS,
        )
    if "@" in doc_id:
        raise InvalidDocId(
            f"{shown!r}: '@' is never part of an id; a suffix after '@' is a read-only view ({VIEWS_HELP}).",
            kind=DocProblem.VIEW_IN_ID,
            doc_id=doc_id,
        )
    if doc_id.startswith("/"):
        raise InvalidDocId(
            f"{shown!r} is an absolute path; ids are relative to the docs tier",
            kind=DocProblem.ABSOLUTE_ID,
            doc_id=doc_id,
        )
    if doc_id.endswith("/"):
        raise InvalidDocId(
            f"{shown!r} ends in '/': ids ending in '/' are reserved for collections",
            kind=DocProblem.COLLECTION_ID,
            doc_id=doc_id,
        )
    if not _ALLOWED.match(doc_id):
        bad = _BAD_CHAR.search(doc_id)
        char = bad.group(0) if bad else "?"
        raise InvalidDocId(
            f"Doc id {shown!r} contains {char!r}; {ID_CHARS_HELP}.",
            kind=DocProblem.BAD_CHAR,
            doc_id=doc_id,
            char=char,
            shown=shown,
        )
    for segment in doc_id.split("/"):
        if segment == "":
            raise InvalidDocId(
                f"Doc id {shown!r} has an empty segment ('//')",
                kind=DocProblem.EMPTY_SEGMENT,
                doc_id=doc_id,
            )
        if segment in (".", ".."):
            raise InvalidDocId(
                f"Doc id {shown!r} has a {segment!r} segment; ids cannot walk the directory tree.",
                kind=DocProblem.DOT_SEGMENT,
                doc_id=doc_id,
                segment=segment,
            )
        if segment.startswith("."):
            raise InvalidDocId(
                f"Doc id {shown!r} has a segment starting with '.' ({segment!r}); hidden names are "
                "the store's own files, never docs.",
                kind=DocProblem.HIDDEN_SEGMENT,
                doc_id=doc_id,
                segment=segment,
            )
    raise InvalidDocId(f"Doc id {shown!r} is outside the id grammar.", doc_id=doc_id)  # unreachable by design


def is_valid_id(doc_id: str) -> bool:
    """True when `doc_id` is in the grammar (`index` included)."""
    return isinstance(doc_id, str) and len(doc_id) <= ID_MAX_CHARS and _VALID.match(doc_id) is not None


def parse_ref(ref: str) -> Ref:
    """Split a doc reference into id and view: `x`, `x@diff`, `x@history`, `x@v3`.

    Raises:
        InvalidDocId: bad id, or a view that does not exist.
    """
    if not isinstance(ref, str):
        raise InvalidDocId("A doc id must be a string.", kind=DocProblem.NOT_A_STRING)
    doc_id, sep, view = ref.partition("@")
    check_id(doc_id)
    if not sep:
        return Ref(doc_id)
    if view in ("diff", "history"):
        return Ref(doc_id, view)
    match = _VERSION_VIEW.match(view)
    if match:
        return Ref(doc_id, "version", int(match.group(1)))
    raise InvalidDocId(
        f"Unknown view {ref!r}: the views are {VIEWS_HELP}.", kind=DocProblem.UNKNOWN_VIEW, doc_id=doc_id, view=view
    )


def check_write_id(doc_id: str) -> str:
    """An id a write accepts: the grammar, `index`, and never a view.

    Raises:
        InvalidDocId: with the reason, e.g. that `x@diff` is a read-only view.
    """
    if isinstance(doc_id, str) and "@" in doc_id:
        base = doc_id.partition("@")[0]
        raise InvalidDocId(f"{doc_id!r} is a read-only view, not a doc", kind=DocProblem.READ_ONLY_VIEW, doc_id=base)
    return check_id(doc_id)
