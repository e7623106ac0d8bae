"""The read views of a doc in words: the header above a doc, `@diff`, `@history`, `@v<N>`.

The store returns the facts (``biopb_mcp.docs.views``); the next step a view suggests (how to
read another view, how to restore a version) depends on who reads it, named by ``calls``: the
agent's tool calls or a terminal's commands. Without it the views state only facts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from biopb_mcp.docs.views import (
    DiffPage,
    DocPage,
    HistoryPage,
    IndexDiffPage,
    IndexPage,
    Origin,
    VersionPage,
    View,
)
from biopb_mcp.text.index import index_text

if TYPE_CHECKING:
    from biopb_mcp.docs.store import DocStore
    from biopb_mcp.text.docs import Calls

__all__ = ["ORIGIN_WORDS", "origin_words", "read_doc", "render_view"]

ORIGIN_WORDS = {Origin.SHIPPED: "shipped", Origin.LOCAL: "local", Origin.SHADOW: "local (shadows shipped)"}
"""How a doc's origin reads in a header, a search hit or a listing."""


def origin_words(origin: Origin) -> str:
    return ORIGIN_WORDS[origin]


def read_doc(store: DocStore, ref: str, calls: Calls | None = None) -> str:
    """``ref`` (`index`, `<id>`, `<id>@diff`, `<id>@history`, `<id>@v<N>`) as its reader reads it.

    Raises what :meth:`DocStore.view` raises.
    """
    return render_view(store.view(ref), calls)


def render_view(view: View, calls: Calls | None = None) -> str:
    if isinstance(view, IndexPage):
        return index_text(view.facts)
    if isinstance(view, DocPage):
        return _doc(view, calls)
    if isinstance(view, DiffPage):
        return _diff(view, calls)
    if isinstance(view, IndexDiffPage):
        return (
            "index@diff — your local index against the index this release ships.\n\n"
            + (view.diff if view.diff else "(no differences)")
            + "\n"
        )
    if isinstance(view, HistoryPage):
        return _history(view, calls)
    return _version(view, calls)


def _doc(page: DocPage, calls: Calls | None) -> str:
    """One header line (id, origin, when it was updated), a blank line, the text."""
    origin = ORIGIN_WORDS[page.origin]
    if page.updated is None:
        header = f"{page.doc_id} — {origin} with biopb-mcp {page.release}"
    else:
        header = f"{page.doc_id} — {origin}, updated {page.updated}"
        if page.origin == Origin.SHADOW and calls is not None:
            header += f"; {calls.read(page.doc_id + '@diff')} compares it with the shipped text"
    return header + "\n\n" + page.text


def _diff(page: DiffPage, calls: Calls | None) -> str:
    doc_id = page.doc_id
    if not page.has_local:
        reads = f"{calls.read(doc_id)} returns" if calls is not None else "it reads as"
        return f"{doc_id} has no local copy: {reads} the shipped text itself.\n"
    if not page.has_shipped:
        return f"{doc_id} is a local doc with no shipped counterpart: there is nothing to diff against.\n"
    header = (
        f"{doc_id}@diff — your local copy against the shipped text of this release. The manifest "
        "keeps hashes, not old texts, so this diff mixes your own edits with the release's "
        "changes: '-' lines are only in the shipped text, '+' lines only in your copy."
    )
    return header + "\n\n" + (page.diff if page.diff else "(no differences: the copy equals the shipped text)") + "\n"


def _history(page: HistoryPage, calls: Calls | None) -> str:
    """Number, time, size, source and first changed line of each kept version."""
    doc_id, kept = page.doc_id, page.versions
    writer = calls.writer if calls is not None else "write"
    if page.shipped_only:
        return (
            f"No history for {doc_id!r}: it has no local copy yet (it is the shipped text). "
            f"Versions are kept from its first {writer} on.\n"
        )
    if not page.enabled and not kept:
        return f"No history for {doc_id!r}: version history is off (docs.history_keep = 0)."
    if not kept:
        return f"No history for {doc_id!r} yet: versions are kept from its first {writer} on (at most {page.keep})."
    head = f"History of {doc_id}: {len(kept)} version{'s' if len(kept) != 1 else ''} kept (at most {page.keep})."
    if calls is not None:
        head += f" Read one with {calls.read(f'{doc_id}@v<N>')}; restore one with {calls.restore(doc_id, None)}."
    lines = [head, ""]
    for v in kept:
        mark = " (current)" if v is kept[-1] and v.sha == page.current_sha else ""
        lines.append(f"- v{v.n}{mark} · {v.time} · {v.size:,} bytes · {v.source} · {v.change}")
    if page.current_sha is None:
        lines += ["", "There is no local file now (it was removed by hand)."]
    elif page.current_sha != kept[-1].sha:
        lines += [
            "",
            f"The file on disk differs from v{kept[-1].n} (edited outside the server); it will "
            "be kept as its own version before the next write.",
        ]
    return "\n".join(lines) + "\n"


def _version(page: VersionPage, calls: Calls | None) -> str:
    """One kept version, with how to restore it."""
    v = page.version
    header = f"{page.doc_id}@v{v.n} — version {v.n}, saved {v.time} ({v.source}, {v.size:,} bytes)."
    if calls is not None:
        header += f" Restore it with {calls.restore(page.doc_id, v.n)}."
    return header + "\n\n" + page.text
