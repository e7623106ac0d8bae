"""The docs store: two tiers of markdown docs and the agent-edited index that lists them.

Nothing here imports mcp, jupyter_client or the kernel: the server and the CLI adapt this package,
never the other way round. The caps live in this one place: raising one
later touches nothing but the constant.
"""

from __future__ import annotations

BODY_MAX_LINES = 300
"""A doc is read whole into the agent's context, so write_doc refuses a body longer than this."""

INDEX_MAX_ENTRIES = 200
"""The index is inlined into every handshake; a write leaving it with more entries is refused."""

ID_MAX_CHARS = 200
"""Longest id the grammar accepts."""

QUERY_MAX_CHARS = 1_000
"""Longest search query: a pasted error message fits; a pasted file is refused before any work."""

FILE_MAX_BYTES = 5_000_000
"""A file bigger than this is not read as a doc (a hand-dropped dataset, not markdown)."""

# The store imports the caps above, so these imports come after them.
from biopb_mcp.docs.store import (  # noqa: E402
    SHIPPED_DIR,
    AUTHORING_GATE,
    DocInfo,
    DocStore,
    WriteResult,
)

__all__ = [
    "AUTHORING_GATE",
    "BODY_MAX_LINES",
    "FILE_MAX_BYTES",
    "ID_MAX_CHARS",
    "INDEX_MAX_ENTRIES",
    "QUERY_MAX_CHARS",
    "SHIPPED_DIR",
    "DocInfo",
    "DocStore",
    "WriteResult",
]
