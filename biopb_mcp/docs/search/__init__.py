"""Search over the docs the index surfaces: SQLite FTS5 rows per section (``fts``, ``fts_file``),
what to re-read before a query (``freshness``), how a doc splits (``sections``), the order of
hits (``ranking``) and the query itself (``query``)."""
