"""The docs tools: read, search, write.

Thin: each calls the docs store (``biopb_mcp.docs``) and hands back its text; a write is also
announced to resource subscribers and noted in the session notebook.
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from biopb_mcp.server.doc_answers import budget, cut_diff_report, cut_hits, doc_page
from biopb_mcp.server.result_size import text_pages
from biopb_mcp.server.state import AppState
from biopb_mcp.server.tool import READ_ONLY, tool
from biopb_mcp.text import answer_size
from biopb_mcp.text.doc_views import read_doc as read_text
from biopb_mcp.text.docs import FOR_AGENT, format_hits, write_report

__all__ = ["AUTHORING_GATE", "LAB_FACTS", "register_doc_tools"]

AUTHORING_GATE = """\
Before writing, hold the doc to these rules:
- Write only a procedure you have validated end to end with the user, with several steps; never a
  dataset-specific one (no file names, sample ids or one-off numbers from this session).
- Phrase the index hook as the user's request ("segment nuclei in a 3D stack"), not as a title.
- Update an existing doc rather than write a near-duplicate: read the index first, and prefer an
  old/new edit to a new file.
- Verify that every name, flag or call the doc quotes still exists (inspect_object or a quick run)
  before relying on it: a local doc has no contract test behind it.
- Link with [[id]] what this doc depends on or hands off to, not everything it mentions.
See the shipped doc "authoring" for checkpoint types and how to write parameter rules."""
"""What keeps the docs store worth reading; the tail of write_doc's description."""


LAB_FACTS = (
    "A standing fact of the lab (an instrument's pixel size, a frame interval, a channel order, a table "
    "format, where results go) is not a procedure: keep it as a short fact doc of its own, saying what it "
    "covers and where it came from. A new rule narrower or wider than an existing one is written with its "
    'scope beside the old rule ("for X, ...; everything else keeps ..."), never replacing it silently. '
    "A lab doc that disagrees with a shipped procedure wins."
)
"""Where lab facts and rules of different scope go; the last paragraph of write_doc's description."""


def register_doc_tools(mcp: MCPServer, state: AppState) -> None:
    store = state.store

    limit = state.settings.kernel.max_result_bytes

    @tool(mcp, READ_ONLY)
    def read_doc(id: str, page: int = 1) -> str:  # noqa: A002 - the agent-facing parameter name
        """Read a doc by id, as the index lists it (e.g. "authoring"). read_doc("index") re-reads the
        doc index; "<id>@diff" shows how a local copy differs from the shipped one; "<id>@history"
        lists its saved versions and "<id>@v<N>" reads one. Read the reference docs and the matching
        procedure before non-trivial work. An unknown id answers with the closest ids. A doc longer
        than one answer holds comes a page at a time (whole lines, page 1 first); a note at the end
        of each page names the call that reads the next (page=2, ...)."""
        text = read_text(store, id, FOR_AGENT)
        shown = doc_page(text, id, page, limit)
        if shown is None:
            raise ToolError(answer_size.no_such_page(id, page, len(text_pages(text, budget(limit)))))
        _note_in_notebook(state, f"**read_doc** `{id}`" + (f" page {page}" if page != 1 else ""))
        return shown

    @tool(mcp, READ_ONLY)
    def search_docs(query: str, max_results: int = 5) -> str:
        """Full-text search over the docs the index lists (its entries and its New shipped docs;
        ignored docs and local docs without an index line are not searched, only read by id).
        Use it for a literal you hit — an exception name, a config key, a log line, a function —
        or when no index entry matches the request. Returns doc id, section and a snippet per hit;
        read_doc the hit to see it whole."""
        return cut_hits(format_hits(store.search_docs(query, max_results), query, FOR_AGENT), limit)

    write_description = (
        'Create or edit a doc in the local docs tier (the index too: id "index"). body alone creates or '
        "replaces the whole doc; old+new replaces exactly one occurrence of old (refused when it matches "
        "zero or several times). Writing a shipped id makes a local copy. A new doc gets an index line "
        'automatically: under the heading section names (e.g. section="Lab"; made if the index has '
        "none), else under '## Unfiled'. section is only for creating a doc with body: it is refused "
        "with old/new or for a doc that exists (move an existing line with an old/new edit of "
        '"index"). Returns the diff (of the index too, for a new doc; a diff longer than one answer holds is '
        "cut, with a note: the write still happened). Nothing is ever deleted; "
        'earlier versions stay readable with read_doc("<id>@history").\n'
        "Use it when the user confirms a procedure worked, or asks you to remember or correct "
        "something.\n" + AUTHORING_GATE.strip() + "\n" + LAB_FACTS
    )

    @tool(mcp, ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False), write_description)
    async def write_doc(
        id: str,  # noqa: A002 - the agent-facing parameter name
        body: str | None = None,
        old: str | None = None,
        new: str | None = None,
        section: str | None = None,
    ) -> str:
        result = await anyio.to_thread.run_sync(store.write_doc, id, body, old, new, section)
        text = cut_diff_report(write_report(result, FOR_AGENT), id, limit)
        _note_in_notebook(state, f"**write_doc** `{id}`\n\n```diff\n{text.strip()}\n```")
        if state.notifier is not None:
            await state.notifier.after_write(result)
        return text


def _note_in_notebook(state: AppState, text: str) -> None:
    """A markdown cell in the session notebook, when one is being recorded."""
    recorder = state.kernel.recorder
    if recorder is not None:
        recorder.markdown(text)
