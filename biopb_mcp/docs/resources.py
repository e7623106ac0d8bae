"""The docs as MCP resources, minus MCP: URIs, the paged listing and what each entry says.

The listing is a view over the store, never a second surface: the index opens the first
page, then every id the store's visibility lists (``DocStore.listed_ids()``), sorted by id. The cursor is the URI of the
last resource on a page and a request resumes *after it by comparison*, never by offset, so it
holds no state on the server: it survives a restart, and a doc created behind it between two
requests is left out of that walk instead of shifting every later page.

Cost per page: the sorted listed ids, a bisect to the cursor, then the entries of only the
(about) ``PAGE_SIZE`` docs on the page; no other doc is read. The store keeps the visibility and
the frontmatter, validated by stats, and ``Listing`` the sorted ids, so a page stays cheap with
10,000 listed docs; the caches never decide what a cursor means.

This module imports nothing from mcp: ``biopb_mcp.server.resources.handlers`` adapts it to the protocol.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from biopb_mcp.docs.ids import check_id
from biopb_mcp.docs.store import DocStore
from biopb_mcp.docs.visibility import Visibility
from biopb_mcp.errors import DocError, InvalidCursor, InvalidDocId

logger = logging.getLogger(__name__)

URI_PREFIX = "biopb://docs/"
"""Every docs resource URI starts with this; the rest is a read_doc reference."""

INDEX_URI = URI_PREFIX + "index"
"""The rendered index, the first resource of every walk."""

DOC_URI_TEMPLATE = URI_PREFIX + "{+id}"
"""The one template: ``{+id}`` (reserved expansion) keeps the ``/`` in ids and the ``@`` of views."""

MIME_TYPE = "text/markdown"

PAGE_SIZE = 100
"""Resources per ``resources/list`` page; the index counts on the first one."""

INDEX_NAME = "Docs index"
INDEX_DESCRIPTION = (
    "The rendered docs index: one line per doc with the request it answers. "
    "Read it first; read a doc as biopb://docs/<id>."
)


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
            f"(starting {URI_PREFIX!r})",
            cursor=cursor[:80],
            prefix=URI_PREFIX,
        )
    doc_id = cursor[len(URI_PREFIX) :]
    if doc_id == "index":
        return None
    try:
        return check_id(doc_id)  # the store's own grammar: a cursor can only name an id we listed
    except InvalidDocId as exc:
        raise InvalidCursor(
            f"Invalid cursor {cursor[:80]!r}: {exc}", cursor=cursor[:80], prefix=URI_PREFIX, problem=exc
        ) from None


class Listing:
    """The walk over one store. Thread-safe.

    The ids come from the store's :class:`~biopb_mcp.docs.visibility.Visibility` (kept while the
    index, the manifest and every folder of both tiers keep their stamps), sorted once per
    visibility; each entry's title and description come from the store, which caches parsed
    frontmatter per file. The caches only save work; every answer is what the disk says now.
    """

    def __init__(self, store: DocStore) -> None:
        self.store = store
        self.rebuilds = 0
        """How many times the listed ids were sorted anew (tests and the bench read it)."""
        self._lock = threading.Lock()
        self._sorted: tuple[Visibility, list[str]] | None = None

    def ids(self) -> list[str]:
        """The listed ids, sorted."""
        seen = self.store.visibility()
        with self._lock:
            if self._sorted is None or self._sorted[0] is not seen:
                self._sorted = (seen, sorted(set(seen.listed)))
                self.rebuilds += 1
            return self._sorted[1]

    def entries(self, doc_ids: Sequence[str]) -> list[ResourceEntry]:
        """The entries of the readable docs among ``doc_ids``, in order (`DocStore.summaries`:
        one folder open per folder, the store's frontmatter cache)."""
        out = []
        for doc_id, found in self.store.shelf.summaries(doc_ids).items():
            if isinstance(found, DocError):
                logger.warning("resources/list: skipping unreadable doc %r: %s", doc_id, found)
                continue
            out.append(
                ResourceEntry(uri=doc_uri(doc_id), name=found.title or doc_id, description=found.description or "")
            )
        return out

    def page(self, cursor: str | None = None, page_size: int = PAGE_SIZE) -> Page:
        """One page of the walk: the index, then the listed docs in id order, resuming after ``cursor``.

        Blocking (reads disk): call from a worker thread.

        Raises:
            InvalidCursor: ``cursor`` is malformed.
        """
        after = parse_cursor(cursor) if cursor is not None else None  # malformed: refuse before any I/O
        entries = [index_entry()] if cursor is None else []
        ids = self.ids()
        pos = 0 if after is None else bisect.bisect_right(ids, after)
        while pos < len(ids) and len(entries) < page_size:
            batch = ids[pos : pos + page_size - len(entries)]  # docs that cannot be read are skipped
            pos += len(batch)
            entries += self.entries(batch)
        # Only promise a next page that has something on it: look ahead for one readable doc.
        more = False
        while pos < len(ids) and not more:
            more = bool(self.entries(ids[pos : pos + 1]))
            pos += 1
        return Page(entries=entries, next_cursor=entries[-1].uri if more and entries else None)


def list_page(store: DocStore, cursor: str | None = None, page_size: int = PAGE_SIZE) -> Page:
    """One page with no cache kept between calls (the server keeps a ``Listing``)."""
    return Listing(store).page(cursor, page_size)


def walk(store: DocStore, page_size: int = PAGE_SIZE) -> list[ResourceEntry]:
    """Every listed resource, page by page (tests, bench)."""
    listing = Listing(store)
    out: list[ResourceEntry] = []
    cursor: str | None = None
    while True:
        page = listing.page(cursor, page_size)
        out.extend(page.entries)
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor
