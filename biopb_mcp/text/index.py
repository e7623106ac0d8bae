"""The rendered index: the file with what it cannot know, then the tails, each opening with the
sentence that tells the agent what to do, so it acts on them unprompted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from biopb_mcp.docs.index import IndexFacts
from biopb_mcp.errors import DocUnreadable
from biopb_mcp.text.unreadable import unreadable_text

if TYPE_CHECKING:
    from biopb_mcp.docs.store import DocStore

__all__ = [
    "NEW_TAIL_HEADING",
    "NEW_TAIL_SENTENCE",
    "STALE_TAIL_HEADING",
    "STALE_TAIL_SENTENCE",
    "index_text",
    "render_index",
    "unreadable_note",
]

NEW_TAIL_HEADING = "## New shipped docs"
NEW_TAIL_SENTENCE = (
    "This release ships these docs and your index neither lists nor ignores them: file each one "
    'by moving its line under a heading of your index with write_doc("index", old=…, new=…), '
    "or add its id to the `ignored:` line."
)
STALE_TAIL_HEADING = "## Shipped docs your local copy may be behind on"
STALE_TAIL_SENTENCE = (
    "The shipped text of these docs changed in the last release, but your local copy still "
    "shadows it: run the read_doc call on each line to see the differences, then merge what you "
    "want into your copy with write_doc (or leave it as it is)."
)


def unreadable_note(problem: DocUnreadable) -> str:
    """The line a rendered index opens with when the local index file cannot be read."""
    return (
        f"> The local index could not be read ({unreadable_text(problem)}) Showing the shipped index instead; "
        'fix the file, or replace it with write_doc("index", body=…).'
    )


def render_index(store: DocStore, *, hide_ignored: bool = False) -> str:
    """The index as read_doc("index") and the handshake show it: suffixes and tails added.

    `hide_ignored=True` shows each `ignored:` line as a count instead of the ids.
    """
    return index_text(store.index_facts(hide_ignored=hide_ignored))


def index_text(facts: IndexFacts) -> str:
    out = facts.body
    if facts.new_docs:
        tail = [NEW_TAIL_HEADING, NEW_TAIL_SENTENCE, ""]
        tail += [f"- {doc_id}: {desc}".rstrip() for doc_id, desc in facts.new_docs]
        out += "\n\n" + "\n".join(tail)
    if facts.stale_docs:
        tail = [STALE_TAIL_HEADING, STALE_TAIL_SENTENCE, ""]
        tail += [
            f'- {doc_id}: {desc} — read_doc("{doc_id}@diff")' if desc else f'- {doc_id}: read_doc("{doc_id}@diff")'
            for doc_id, desc in facts.stale_docs
        ]
        out += "\n\n" + "\n".join(tail)
    out += "\n"
    if facts.unreadable:
        out = unreadable_note(facts.unreadable) + "\n\n" + out
    return out
