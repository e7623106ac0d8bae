"""Costly searches: a doc of megabytes of one word, and long pasted queries over thousands of docs.

An agent can write a doc of 5 MB of "the" (one line, under the line cap); a query of that word
repeated, under the 1,000-character cap, took 49 s, and every other search queued behind it.
Ordinary long queries (a pasted paragraph) took seconds on a 5,000-doc corpus. ``costly_queries``
times such queries and one plain query sent meanwhile from another thread; ``long_queries``
times passages of the corpus's own docs, which must be answered, never refused. Every query must
end (answered or refused as too costly) within the query budget plus a second.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from pathlib import Path
from random import Random

from biopb_mcp.docs.limits import FILE_MAX_BYTES, QUERY_BUDGET_S, QUERY_MAX_CHARS
from biopb_mcp.docs.search.query import search_docs
from biopb_mcp.docs.store import DocStore
from biopb_mcp.errors import DocProblem, InvalidQuery

__all__ = ["COSTLY_QUERIES", "costly_queries", "long_queries", "one_word_doc"]

SLACK_S = 1.0
"""How far past the budget a query may end (the refresh, the snippets, a loaded machine)."""


def _repeat(word: str, limit: int) -> str:
    return " ".join([word] * ((limit + 1) // (len(word) + 1)))


COSTLY_QUERIES = [_repeat("the", QUERY_MAX_CHARS - 5), "the", "the the", _repeat("the", 160) + " cat"]
"""What the review sent against a doc of one repeated word: the word under the length cap, alone,
twice, and a long run of it ending in another word."""


def one_word_doc(store: DocStore, doc_id: str = "the", word: str = "the", size: int = FILE_MAX_BYTES) -> int:
    """Write (through write_doc, as an agent would) a doc of one repeated word on one line, as big
    as the caps allow (or ``size``), listed in the index; its size on disk."""
    body = _repeat(word, min(size, FILE_MAX_BYTES) - 2)
    store.write_doc(doc_id, body=body)
    return len(store.doc_text(doc_id)[0].encode())


def _timed(store: DocStore, query: str, counts: Counter[str], row: str) -> float:
    """Seconds one search took; refusals as too costly counted under ``row``."""
    started = time.monotonic()
    try:
        search_docs(store, query, 10)
    except InvalidQuery as exc:
        if exc.kind is not DocProblem.QUERY_TOO_COSTLY:
            raise
        counts[row] += 1
    return time.monotonic() - started


def costly_queries(store: DocStore, rounds: int) -> Counter[str]:
    """Each of COSTLY_QUERIES ``rounds`` times, with a plain query sent meanwhile from another thread."""
    counts: Counter[str] = Counter()
    search_docs(store, "warm up the index", 1)  # the doc's indexing is not a query's cost
    slowest = waited_most = 0.0
    for _ in range(rounds):
        for query in COSTLY_QUERIES:
            started = threading.Event()
            waited: list[float] = []

            def plain(waited: list[float] = waited, started: threading.Event = started) -> None:
                started.wait(30)
                waited.append(_timed(store, "pixel size", counts, "search: plain queries refused"))

            other = threading.Thread(target=plain)
            other.start()
            started.set()
            took = _timed(store, query, counts, "search: costly queries refused as too costly")
            other.join(120)
            counts["search: costly queries sent"] += 1
            slowest = max(slowest, took)
            waited_most = max([waited_most, *waited])
            over = took > QUERY_BUDGET_S + SLACK_S
            counts["search: queries ending past the budget"] += int(over) + sum(
                w > 2 * QUERY_BUDGET_S + SLACK_S for w in waited
            )
    counts["search: slowest costly query (ms)"] = round(slowest * 1000)
    counts["search: longest wait of a plain query sent meanwhile (ms)"] = round(waited_most * 1000)
    return counts


def long_queries(store: DocStore, texts: list[str], queries: int, seed: int) -> Counter[str]:
    """``queries`` passages of 200 to 990 characters cut from ``texts`` (the corpus's docs)."""
    rng = Random(seed)
    counts: Counter[str] = Counter()
    search_docs(store, "warm up the index", 1)
    times = []
    for _ in range(queries):
        text = rng.choice(texts)
        size = rng.randint(200, 990)
        start = rng.randrange(max(1, len(text) - size))
        query = " ".join(text[start : start + size].split()) or "empty"
        took = _timed(store, query, counts, "search: ordinary long queries refused as too costly")
        counts["search: queries ending past the budget"] += int(took > QUERY_BUDGET_S + SLACK_S)
        times.append(took)
    counts["search: ordinary long queries sent"] += queries
    if times:
        counts["search: ordinary long queries, median (ms)"] = round(statistics.median(times) * 1000)
        counts["search: ordinary long queries, slowest (ms)"] = round(max(times) * 1000)
    return counts


def corpus_texts(docs: Path, limit: int = 500) -> list[str]:
    """The text of up to ``limit`` docs of a generated corpus, to cut passages from."""
    return [path.read_text(encoding="utf-8") for path in sorted(docs.rglob("*.md"))[:limit] if path.name != "index.md"]
