"""The docs store's caps, in one place: raising one later touches nothing but the constant."""

from __future__ import annotations

BODY_MAX_LINES = 300
"""A doc is read whole into the agent's context, so a write leaving a body longer than this is refused."""

INDEX_MAX_ENTRIES = 200
"""The index is inlined into every handshake; a write leaving it with more entries is refused."""

INDEX_MAX_LINES = 600
"""Lines of the index file a write may leave (entries, headings and prose together): the whole
file is inlined into every handshake and re-parsed and diffed on every index write."""

INDEX_MAX_BYTES = 100_000
"""Bytes of the index file a write may leave, for the same reason (200 entries of long hooks fit)."""

ID_MAX_CHARS = 200
"""Longest id the grammar accepts."""

QUERY_MAX_CHARS = 1_000
"""Longest search query: a pasted error message fits; a pasted file is refused before any work."""

FILE_MAX_BYTES = 5_000_000
"""A file bigger than this is not read as a doc (a hand-dropped dataset, not markdown)."""

QUERY_BUDGET_S = 2.0
"""Seconds a search query may spend ranking (the refresh of changed docs aside): searches queue
behind each other, so a query that matches most of a pathological doc is stopped and refused."""
