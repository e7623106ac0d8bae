"""The knowledge pack: the rendered index and every listed doc as one markdown file.

For hosts that cannot speak MCP : paste the pack into a system prompt
or a project file and the agent has what read_doc would give it. A view over `DocStore` like
search: the index is `render_index()`, each doc is exactly its `read_doc` text, in the order the
index lists them. Deterministic: the same store gives the same bytes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from biopb_mcp.errors import DocNotFound, DocUnreadable, InvalidDocId
from biopb_mcp.text.doc_views import read_doc
from biopb_mcp.text.index import render_index
from biopb_mcp.text.unreadable import unreadable_text

if TYPE_CHECKING:
    from biopb_mcp.docs.store import DocStore

__all__ = ["PACK_DOC_PREFIX", "build_pack", "pack_heading"]

logger = logging.getLogger(__name__)

PACK_DOC_PREFIX = "# doc: "
"""Opens each part of the pack; distinct from a doc's own `# Title`, so a part is easy to find."""


def pack_heading(doc_id: str) -> str:
    """The separator line a part of the pack starts with (the index is the part ``index``)."""
    return f"{PACK_DOC_PREFIX}{doc_id}"


def build_pack(store: DocStore) -> str:
    """Render the index, then each doc it lists (``store.listed_ids()``), each under its id.

    A listed doc that cannot be read keeps its place with a one-line note instead of its text,
    so the pack is still written and the reader sees what is missing.
    """
    ids = store.listed_ids()
    parts = [
        "# biopb docs knowledge pack\n\n"
        f"The docs index, then the {len(ids)} docs it lists, each under a `{PACK_DOC_PREFIX}<id>` "
        'line. A link `[[id]]` or a read_doc("<id>") call refers to the part with that id. '
        "Made by `biopb-mcp docs pack`; regenerate it after the docs change.",
        f"{pack_heading('index')}\n\n{render_index(store).rstrip()}",
    ]
    for doc_id in ids:
        try:
            text = read_doc(store, doc_id).rstrip()
        except (DocNotFound, DocUnreadable, InvalidDocId) as exc:  # InvalidDocId: a symlink out of the tier
            logger.warning("pack leaves out doc %s: %s", doc_id, exc)
            said = unreadable_text(exc) if isinstance(exc, DocUnreadable) else exc
            text = f"(this doc could not be read when the pack was made: {said})"
        parts.append(f"{pack_heading(doc_id)}\n\n{text}")
    return "\n\n\n".join(parts) + "\n"
