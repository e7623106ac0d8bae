"""The read views of a doc as facts: as read, `@diff`, `@history`, `@v<N>`, and the index.

The store answers a reference (`index`, `<id>`, `<id>@diff`, `<id>@history`, `<id>@v<N>`) with
one of these; ``biopb_mcp.text.doc_views`` words them for their reader (an agent is told the
tool call to make next, a person at a terminal the command).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from biopb_mcp.docs.frontmatter import parse
from biopb_mcp.docs.history import sha
from biopb_mcp.docs.ids import INDEX_ID
from biopb_mcp.docs.textdiff import unified_diff

if TYPE_CHECKING:
    from biopb_mcp.docs.history import Version
    from biopb_mcp.docs.index import IndexFacts
    from biopb_mcp.docs.store import DocStore

__all__ = [
    "DiffPage",
    "DocPage",
    "HistoryPage",
    "IndexDiffPage",
    "IndexPage",
    "Origin",
    "VersionPage",
    "View",
    "diff_page",
    "doc_page",
    "history_page",
    "index_diff_page",
    "version_page",
    "when",
]


class Origin(StrEnum):
    """Where the doc that wins for an id sits: derived from the tiers, never stored."""

    SHIPPED = "shipped"
    LOCAL = "local"
    SHADOW = "shadow"
    """A local copy of a shipped doc: it wins over the shipped text."""


def when(epoch: float) -> str:
    """A file time as the views show it."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


@dataclass(frozen=True)
class IndexPage:
    """`index`: what the rendered index shows."""

    facts: IndexFacts


@dataclass(frozen=True)
class DocPage:
    """A doc as read: its text and where it comes from.

    ``updated`` is the frontmatter's date, else the file's time; None for a shipped doc with no
    date (a shipped file's mtime is when this copy was installed, not when it was written): it
    is then of ``release``.
    """

    doc_id: str
    origin: Origin
    text: str
    updated: str | None
    release: str


@dataclass(frozen=True)
class DiffPage:
    """`<id>@diff`: a local copy against the shipped text of this release (``diff`` empty when
    they are equal, or when one side is missing)."""

    doc_id: str
    has_local: bool
    has_shipped: bool
    diff: str


@dataclass(frozen=True)
class IndexDiffPage:
    """`index@diff`: the local index against the one this release ships."""

    diff: str


@dataclass(frozen=True)
class HistoryPage:
    """`<id>@history`: the kept versions, oldest first, and how the file on disk relates to them.

    ``shipped_only``: no local copy was ever written (the shipped text is all there is).
    ``current_sha``: the hash of the file on disk, None when there is no local file.
    """

    doc_id: str
    versions: list[Version]
    keep: int
    enabled: bool
    shipped_only: bool
    current_sha: str | None


@dataclass(frozen=True)
class VersionPage:
    """`<id>@v<N>`: one kept version and its text."""

    doc_id: str
    version: Version
    text: str


View = IndexPage | DocPage | DiffPage | IndexDiffPage | HistoryPage | VersionPage


def doc_page(store: DocStore, doc_id: str, origin: Origin, path: Path, text: str) -> DocPage:
    updated = parse(text).updated
    if updated is None and origin != Origin.SHIPPED:
        try:
            updated = when(os.stat(path).st_mtime)
        except OSError:
            updated = "unknown"
    return DocPage(doc_id, origin, text, updated, store.version)


def diff_page(store: DocStore, doc_id: str) -> DiffPage:
    local = store.shelf.read_local(doc_id)
    shipped = store.shelf.read_shipped(doc_id)
    if local is None and shipped is None:
        raise store.shelf.not_found(doc_id)
    body = ""
    if local is not None and shipped is not None:
        body = unified_diff(shipped, local, f"{doc_id} (shipped)", f"{doc_id} (local copy)")
    return DiffPage(doc_id, local is not None, shipped is not None, body)


def index_diff_page(store: DocStore) -> IndexDiffPage:
    local = store.listing.index_text()[0]
    shipped = store.listing.shipped_index_text()
    return IndexDiffPage(unified_diff(shipped, local, "index (shipped)", "index (local)"))


def history_page(store: DocStore, doc_id: str) -> HistoryPage:
    current = store.listing.index_text()[0] if doc_id == INDEX_ID else store.shelf.read_local(doc_id)
    history = store.history
    kept = history.versions(doc_id)
    shipped_only = doc_id != INDEX_ID and current is None and not kept
    if shipped_only and not store.shelf.has_shipped(doc_id):
        raise store.shelf.not_found(doc_id)
    return HistoryPage(
        doc_id, kept, history.keep, history.enabled, shipped_only, sha(current) if current is not None else None
    )


def version_page(store: DocStore, doc_id: str, n: int) -> VersionPage:
    version, text = store.history.read(doc_id, n)
    return VersionPage(doc_id, version, text)
