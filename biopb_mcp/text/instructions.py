"""The ``initialize`` / ``server/discover`` instructions: a pure function of the docs store.

Composed for each connecting client (a server middleware calls it), so an index edited by hand
between two sessions shows up in the next one without restarting anything shared. The order puts
what the agent must do first on top: start the kernel, the index header, the index itself, read the
references, the standing guardrails, ask before destructive steps.
"""

from __future__ import annotations

import logging
from typing import Protocol

from biopb_mcp.docs.index import IndexFacts
from biopb_mcp.text.index import index_text

logger = logging.getLogger(__name__)

__all__ = ["compose_instructions"]


class _RendersIndex(Protocol):
    def index_facts(self, *, hide_ignored: bool = False) -> IndexFacts: ...


START_LINE = (
    "Call start_kernel first: it starts the IPython kernel that execute_code, inspect_object and "
    "the other kernel tools use (starting can take a few seconds; it is not started for you)."
)
"""Step 1: the kernel is lazy, so the agent must ask for it."""

INDEX_HEADER = (
    "Below is the doc index of this server: your and your lab's knowledge for this work. "
    'Re-read it any time with read_doc("index"); edit it with write_doc("index", old=..., new=...).'
)
"""Step 2: one line saying what the inlined block is and how to reach it again."""

READ_FIRST_LINE = (
    "Before non-trivial work, read the reference docs the index lists (read_doc(id)) and follow "
    "the procedure that matches the user's request; search_docs(query) finds a section by keyword, "
    "such as an error message or a function name."
)
"""Step 4."""

GUARDRAILS = (
    "Standing guardrails:\n"
    "- execute_code is real code execution as the user, with the user's files and permissions; "
    "it is not a sandbox.\n"
    "- Never modify or overwrite raw data; read it, and write every output to a results folder "
    "beside it (create one if needed).\n"
    "- Show the user intermediate results (images, counts) at each checkpoint a procedure names "
    "before going on.\n"
    "- A long computation becomes a job: poll it with poll_job, stop it with interrupt_kernel."
)
"""Step 5: short on purpose; the procedures carry the rest."""

ASK_FIRST_LINE = (
    "Destructive steps (deleting, moving or overwriting files, restarting the kernel with unsaved "
    "work) always ask the user first."
)
"""Step 6."""


INDEX_MAX_CHARS = 60_000
"""Largest index inlined whole. At the 200-entry cap an index is about 25 KB; only a
hand-grown one gets past this, and a client may drop an initialize result that large."""


def _bounded(index: str) -> str:
    """The index, cut at a line boundary past INDEX_MAX_CHARS with a note saying how to see the rest."""
    if len(index) <= INDEX_MAX_CHARS:
        return index
    head = index[: index.rfind("\n", 0, INDEX_MAX_CHARS) + 1 or INDEX_MAX_CHARS]
    hidden = index.count("\n", len(head)) + 1
    return (
        head.rstrip()
        + f"\n\n(The index is cut here: {hidden} more lines, {len(index) - len(head):,} characters. It is far "
        'over the 200-entry cap; read_doc("index") shows it whole. Ask the user before trimming it '
        "with write_doc.)"
    )


def _render_index_or_note(store: _RendersIndex) -> str:
    """The rendered index, or one clear line when it cannot be rendered (never fail the handshake)."""
    try:
        # The ignored: line names docs the agent decided not to list; spelling those ids out in
        # every session's context would list them after all (and the bench's docs-off arm
        # would leak its hidden procedures). read_doc("index") still shows the line to edit.
        return _bounded(index_text(store.index_facts(hide_ignored=True)).strip())
    except Exception as exc:  # top-level: a broken index must not break initialize
        logger.exception("Rendering the doc index for the handshake failed")
        return (
            f"(The doc index could not be rendered: {type(exc).__name__}: {exc}. "
            'Call read_doc("index") to see the error, and tell the user.)'
        )


def compose_instructions(store: _RendersIndex) -> str:
    """Compose the instructions a client receives at ``initialize`` or ``server/discover``."""
    return "\n\n".join(
        [
            START_LINE,
            INDEX_HEADER,
            _render_index_or_note(store),
            READ_FIRST_LINE,
            GUARDRAILS,
            ASK_FIRST_LINE,
        ]
    )
