"""Doc answers (tools, resources, prompts) kept under ``kernel.max_result_bytes`` as sent.

The text is cut at line ends into pages (:func:`~biopb_mcp.server.result_size.text_pages`); a
page carries a note (:mod:`biopb_mcp.text.answer_size`) saying where it stops and how to read
on. A text that fits is returned as it is.
"""

from __future__ import annotations

from biopb_mcp.server.result_size import ENVELOPE_BYTES, NOTE_ROOM, json_size, text_page
from biopb_mcp.text import answer_size as notes

__all__ = ["budget", "cut_diff_report", "cut_hits", "doc_page", "first_page"]

WRAPPING_BYTES = 512
"""What wraps the text in its result besides the JSON-RPC envelope: the content block, the
resource's uri and mime type, a prompt's messages."""


def budget(limit: int, reserved: int = 0) -> int:
    """Bytes of text (as JSON) an answer of ``limit`` bytes can carry beside ``reserved`` bytes."""
    return max(limit - ENVELOPE_BYTES - WRAPPING_BYTES - NOTE_ROOM - reserved, 4096)


def doc_page(text: str, ref: str, page: int, limit: int) -> str | None:
    """Page ``page`` of a read_doc answer, with its note when the text makes more than one; None
    when there is no such page."""
    if page == 1 and json_size(text) <= budget(limit) + NOTE_ROOM:
        return text
    found = text_page(text, budget(limit), page)
    if found is None:
        return None
    if found.count == 1:
        return found.text
    note = notes.page_note(ref, found.number, found.count, found.first_line, found.last_line, found.total_lines, limit)
    return found.text + note


def first_page(text: str, ref: str, limit: int, reserved: int = 0) -> str:
    """A doc text as a resource or embedded in a prompt: whole when it fits beside ``reserved``
    bytes, else its first page and a note naming read_doc's next page."""
    if json_size(text) <= budget(limit, reserved) + NOTE_ROOM:
        return text
    found = text_page(text, budget(limit, reserved), 1)
    assert found is not None
    return found.text + notes.resource_cut_note(ref, found.count, found.last_line, found.total_lines, limit)


def cut_diff_report(text: str, doc_id: str, limit: int) -> str:
    """A write's report, cut to fit with a note that the write succeeded and how to read the doc."""
    if json_size(text) <= budget(limit) + NOTE_ROOM:
        return text
    found = text_page(text, budget(limit), 1)
    assert found is not None
    return found.text + notes.diff_cut_note(doc_id, found.last_line, found.total_lines, limit)


def cut_hits(text: str, limit: int) -> str:
    """Search hits, cut to fit with a note."""
    if json_size(text) <= budget(limit) + NOTE_ROOM:
        return text
    found = text_page(text, budget(limit), 1)
    assert found is not None
    return found.text + notes.hits_cut_note(found.last_line, found.total_lines, limit)
