"""The read views of a doc: as read (header + text), `@diff`, `@history` and `@v<N>`.

The next step a view suggests (how to read another view, how to restore) depends on who reads it,
an agent or a person at a terminal: the caller passes that vocabulary in as `calls`; without it
the views state only facts.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from biopb_mcp.docs.frontmatter import parse
from biopb_mcp.docs.ids import INDEX_ID
from biopb_mcp.docs.textdiff import unified_diff

if TYPE_CHECKING:
    from biopb_mcp.doc_messages import Calls
    from biopb_mcp.docs.store import DocStore

__all__ = ["ORIGIN_LOCAL", "ORIGIN_SHADOW", "ORIGIN_SHIPPED", "diff_view", "doc_view", "history_view",
           "index_diff_view", "version_view", "when"]

ORIGIN_SHIPPED = "shipped"
ORIGIN_LOCAL = "local"
ORIGIN_SHADOW = "local (shadows shipped)"


def when(epoch: float) -> str:
    """A file time as the views show it."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


def doc_view(store: DocStore, doc_id: str, origin: str, path: Path, text: str, calls: Calls | None = None) -> str:
    """A doc as read: one header line (id, origin, when it was updated), a blank line, the text."""
    updated = parse(text).updated
    if updated is None and origin == ORIGIN_SHIPPED:
        # a shipped file's mtime is when this copy was installed or cloned, not when it was written
        header = f"{doc_id} — {origin} with biopb-mcp {store.version}"
    else:
        if updated is None:
            try:
                updated = when(os.stat(path).st_mtime)
            except OSError:
                updated = "unknown"
        header = f"{doc_id} — {origin}, updated {updated}"
        if origin == ORIGIN_SHADOW and calls is not None:
            header += f"; {calls.read(doc_id + '@diff')} compares it with the shipped text"
    return header + "\n\n" + text


def diff_view(store: DocStore, doc_id: str, calls: Calls | None = None) -> str:
    """`<id>@diff`: a local copy against the shipped text of this release."""
    local = store.read_local(doc_id)
    shipped = store.read_shipped(doc_id)
    if local is None and shipped is None:
        raise store.not_found(doc_id)
    if local is None:
        reads = f"{calls.read(doc_id)} returns" if calls is not None else "it reads as"
        return f"{doc_id} has no local copy: {reads} the shipped text itself.\n"
    if shipped is None:
        return f"{doc_id} is a local doc with no shipped counterpart: there is nothing to diff against.\n"
    header = (
        f"{doc_id}@diff — your local copy against the shipped text of this release. The manifest "
        "keeps hashes, not old texts, so this diff mixes your own edits with the release's "
        "changes: '-' lines are only in the shipped text, '+' lines only in your copy."
    )
    body = unified_diff(shipped, local, f"{doc_id} (shipped)", f"{doc_id} (local copy)")
    return header + "\n\n" + (body if body else "(no differences: the copy equals the shipped text)") + "\n"


def index_diff_view(store: DocStore) -> str:
    """`index@diff`: the local index against the one this release ships."""
    local = store.index_text()[0]
    shipped = store.shipped_index_text()
    body = unified_diff(shipped, local, "index (shipped)", "index (local)")
    return (
        "index@diff — your local index against the index this release ships.\n\n"
        + (body if body else "(no differences)")
        + "\n"
    )


def history_view(store: DocStore, doc_id: str, calls: Calls | None = None) -> str:
    """`<id>@history`: the kept versions, newest last."""
    current = store.index_text()[0] if doc_id == INDEX_ID else store.read_local(doc_id)
    if doc_id != INDEX_ID and current is None and not store.history.versions(doc_id):
        if not store.has_shipped(doc_id):
            raise store.not_found(doc_id)
        return (
            f"No history for {doc_id!r}: it has no local copy yet (it is the shipped text). "
            f"Versions are kept from its first {calls.writer if calls is not None else 'write'} on.\n"
        )
    return store.history.listing(doc_id, current, calls)


def version_view(store: DocStore, doc_id: str, n: int, calls: Calls | None = None) -> str:
    """`<id>@v<N>`: one kept version, with how to restore it."""
    version, text = store.history.read(doc_id, n)
    header = (
        f"{doc_id}@v{n} — version {n}, saved {version.time} ({version.source}, "
        f"{version.size:,} bytes)."
    )
    if calls is not None:
        restore = calls.write(f'"{doc_id}"', "body=<the text below>")
        header += f" Restore it with {restore}."
    return header + "\n\n" + text
