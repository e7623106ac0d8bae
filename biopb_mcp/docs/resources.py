"""The docs as MCP resources, minus MCP: URIs, the paged listing and what each entry says.

The listing is a view over the store (DESIGN.md "Resources", seed 000): the index opens the first
page, then every id ``DocStore.listed_ids()`` returns, sorted by id. The cursor is the URI of the
last resource on a page and a request resumes *after it by comparison*, never by offset, so it
holds no state on the server: it survives a restart, and a doc created behind it between two
requests is left out of that walk instead of shifting every later page.

Cost per page: one ``listed_ids()`` and a sort, a bisect to the cursor, then ``info()`` for only
the (about) ``PAGE_SIZE`` docs on the page; no other doc body is read.

This module imports nothing from mcp: ``biopb_mcp.subscriptions`` adapts it to the protocol.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass

from biopb_mcp.docs.store import DocStore
from biopb_mcp.docs.ids import check_id
from biopb_mcp.errors import DocError, DocNotFound, DocUnreadable, InvalidDocId

logger = logging.getLogger(__name__)

URI_PREFIX = "biopb://docs/"
"""Every docs resource URI starts with this; the rest is a read_doc reference."""

INDEX_URI = URI_PREFIX + "index"
"""The rendered index, the first resource of every walk."""

DOC_URI_TEMPLATE = URI_PREFIX + "{+id}"
"""The one template: ``{+id}`` (reserved expansion) keeps the ``/`` in ids and the ``@`` of views."""

MIME_TYPE = "text/markdown"

PAGE_SIZE = 100
"""Resources per ``resources/list`` page (DESIGN.md); the index counts on the first one."""

INDEX_NAME = "Docs index"
INDEX_DESCRIPTION = (
    "The rendered docs index: one line per doc with the request it answers. "
    "Read it first; read a doc as biopb://docs/<id>."
)

class InvalidCursor(DocError):
    """A ``resources/list`` cursor that is not the URI of a docs resource."""


@dataclass(frozen=True)
class ResourceEntry:
    """One listed resource, in protocol-neutral form."""

    uri: str
    name: str
    description: str
    mime_type: str = MIME_TYPE


@dataclass(frozen=True)
class Page:
    """One page of the walk; ``next_cursor`` is None on the last page."""

    entries: list[ResourceEntry]
    next_cursor: str | None


def doc_uri(doc_id: str) -> str:
    """The resource URI of a doc id (ids are URI-safe by their grammar: no escaping needed)."""
    return URI_PREFIX + doc_id


def index_entry() -> ResourceEntry:
    """The index as a listed resource."""
    return ResourceEntry(uri=INDEX_URI, name=INDEX_NAME, description=INDEX_DESCRIPTION)


def parse_cursor(cursor: str) -> str | None:
    """The id a cursor points at, or None when it points at the index (the walk starts at docs).

    Raises:
        InvalidCursor: the cursor is not the URI of a docs resource.
    """
    if not cursor.startswith(URI_PREFIX):
        raise InvalidCursor(
            f"Invalid cursor {cursor[:80]!r}: a cursor is the URI of the last resource of a page "
            f"(starting {URI_PREFIX!r}); pass back the nextCursor you received, or none to start over."
        )
    doc_id = cursor[len(URI_PREFIX) :]
    if doc_id == "index":
        return None
    try:
        return check_id(doc_id)  # the store's own grammar: a cursor can only name an id we listed
    except InvalidDocId as exc:
        raise InvalidCursor(
            f"Invalid cursor {cursor[:80]!r}: {exc} Pass back the nextCursor you received, "
            "or none to start over."
        ) from None


def describe(store: DocStore, doc_id: str) -> ResourceEntry | None:
    """The listing entry for one doc, or None when the file cannot be read (logged, never raised).

    A listing must never break on one bad file (DESIGN.md), so an unreadable doc is skipped with
    a warning and a doc deleted since ``listed_ids()`` is skipped quietly.
    """
    try:
        info = store.info(doc_id)
    except DocNotFound:
        logger.debug("doc %r vanished while listing; skipped", doc_id)
        return None
    except (DocUnreadable, OSError, UnicodeDecodeError) as exc:
        logger.warning("resources/list: skipping unreadable doc %r: %s", doc_id, exc)
        return None
    return ResourceEntry(uri=doc_uri(doc_id), name=info.title or doc_id, description=info.description or "")


def list_page(store: DocStore, cursor: str | None = None, page_size: int = PAGE_SIZE) -> Page:
    """One page of the walk: the index, then the listed docs in id order, resuming after ``cursor``.

    Blocking (reads disk): call from a worker thread.

    Raises:
        InvalidCursor: ``cursor`` is malformed.
    """
    after = parse_cursor(cursor) if cursor is not None else None  # malformed: refuse before any I/O
    entries = [index_entry()] if cursor is None else []
    ids = sorted(set(store.listed_ids()))
    start = 0 if after is None else bisect.bisect_right(ids, after)
    pos = start
    while pos < len(ids) and len(entries) < page_size:
        entry = describe(store, ids[pos])
        pos += 1
        if entry is not None:
            entries.append(entry)
    # Only promise a next page that has something on it: look ahead for one readable doc.
    more = any(describe(store, ids[i]) is not None for i in range(pos, len(ids)))
    next_cursor = entries[-1].uri if more and entries else None
    return Page(entries=entries, next_cursor=next_cursor)


def walk(store: DocStore, page_size: int = PAGE_SIZE) -> list[ResourceEntry]:
    """Every listed resource, page by page (for tests, the bench and a pack-like dump)."""
    out: list[ResourceEntry] = []
    cursor: str | None = None
    while True:
        page = list_page(store, cursor, page_size)
        out.extend(page.entries)
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor
