"""The docs store: two tiers of markdown docs and the agent-edited index that lists them.

Nothing here imports mcp, jupyter_client or the kernel: the server and the CLI adapt this package,
never the other way round. `DocStore` is the facade and the only thing an adapter calls; its
parts are the `shelf` (both tiers, shadowing, withholding, reading), the `listing` (the index
file, and the one `visibility` model of what the docs show), the `history`, the change feed
(`changes`) and `search`. The caps live in `limits`.
"""

from __future__ import annotations

from biopb_mcp.docs.limits import (
    BODY_MAX_LINES,
    FILE_MAX_BYTES,
    ID_MAX_CHARS,
    INDEX_MAX_BYTES,
    INDEX_MAX_ENTRIES,
    INDEX_MAX_LINES,
    QUERY_MAX_CHARS,
)
from biopb_mcp.docs.store import (
    SHIPPED_DIR,
    DocInfo,
    DocStore,
    WriteResult,
)

__all__ = [
    "BODY_MAX_LINES",
    "FILE_MAX_BYTES",
    "ID_MAX_CHARS",
    "INDEX_MAX_BYTES",
    "INDEX_MAX_ENTRIES",
    "INDEX_MAX_LINES",
    "QUERY_MAX_CHARS",
    "SHIPPED_DIR",
    "DocInfo",
    "DocStore",
    "WriteResult",
]
