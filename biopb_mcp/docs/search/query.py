"""Full-text search over the docs store: `##` sections ranked by BM25, the exact phrase first.

Search is a view over `DocStore`: the doc list, origins and texts come from the store's API; the
rows live in an SQLite FTS5 index (`biopb_mcp.docs.search.fts`), in a file the caller names (the server
keeps it in its state dir) or in memory. Before each query the docs that may have changed
(`biopb_mcp.docs.search.freshness` says which: every one, or those folder watches name) are stat'ed and
compared with the (inode, mtime_ns, size) they were indexed at, so an edit (by write_doc, by hand,
by another server) is seen on the very next search, and a restarted server re-reads only the
files that changed. A doc modified within a couple of seconds of being read is re-read and
compared until that is safe (`filecache.is_settled`). Nothing is invalidated by time.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import logging
import os
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from biopb_mcp.docs.limits import QUERY_MAX_CHARS
from biopb_mcp.docs.search.freshness import Freshness
from biopb_mcp.docs.search.fts import FtsIndex, Indexed, Ranked, SearchUnavailable, digest
from biopb_mcp.docs.search.sections import ATOM, split_sections, tokenize
from biopb_mcp.docs.views import Origin
from biopb_mcp.errors import DocError, InvalidQuery
from biopb_mcp.fs.stamps import Stamp, is_settled, stamp_of

if TYPE_CHECKING:
    from biopb_mcp.docs.store import DocStore

__all__ = [
    "Hit",
    "SearchUnavailable",
    "search_docs",
    "shown_query",
    "snippet",
    "split_sections",
    "tokenize",
    "warm_index",
]

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

MAX_RESULTS_LIMIT = 50
"""Largest max_results a caller may ask for; more is noise for an agent's context."""

SNIPPET_CHARS = 200
"""Target length of a hit's snippet, in characters."""

_CACHED_CORPORA = 4
"""How many stores keep an open index in this process (a server has one)."""

_WRITE_BATCH = 100
"""Docs indexed per write transaction: short enough that another server's writes wait little."""


@dataclass(frozen=True)
class Hit:
    """One matching section: where it is, a one-line snippet around the match, and its score."""

    doc_id: str
    heading: str
    snippet: str
    origin: Origin
    score: float


def _without_heading(text: str) -> str:
    """A `##` section's text minus its heading line, which a hit already shows."""
    if text.startswith("##"):
        rest = text.partition("\n")[2]
        return rest if rest.strip() else text
    return text


def snippet(text: str, query: str, width: int = SNIPPET_CHARS) -> str:
    """One line of about ``width`` chars around the first exact match, else the densest term hits."""
    center = _phrase_center(text, query)
    if center is None:
        center = _densest(text, set(tokenize(query)), width)
    start = max(0, min(center - width // 2, len(text) - width))
    end = min(len(text), start + width)
    # Widen to whole words so the snippet neither starts nor ends mid-word.
    while start > 0 and not text[start - 1].isspace() and start > center - width:
        start -= 1
    while end < len(text) and not text[end].isspace() and end < center + width:
        end += 1
    body = " ".join(text[start:end].split())
    return ("…" if text[:start].strip() else "") + body + ("…" if text[end:].strip() else "")


_WORD = re.compile(r"\S+")


def _phrase_center(text: str, query: str) -> int | None:
    """Middle of the first place ``text`` holds the query's words in order, any whitespace between
    them, case folded; None when it does not.

    A substring search over the folded words, mapped back to ``text``: linear, where a regex of
    the words joined by ``\\s+`` retries at every position a long repetitive query could start.
    """
    words = query.lower().split()
    if not words:
        return None
    spans = [m.span() for m in _WORD.finditer(text)]
    folded = [text[a:b].lower() for a, b in spans]
    pos = " ".join(folded).find(" ".join(words))
    if pos < 0:
        return None
    starts = list(itertools.accumulate((len(w) + 1 for w in folded[:-1]), initial=0))

    def original(at: int) -> int:
        k = bisect.bisect_right(starts, at) - 1
        a, b = spans[k]
        return min(a + at - starts[k], b)  # lower() can change a word's length: stay inside it

    last = pos + len(" ".join(words)) - 1
    return (original(pos) + original(last) + 1) // 2


def _densest(text: str, terms: set[str], width: int) -> int:
    """Center of the ``width``-char window holding the most term occurrences (0 when none)."""
    positions = [m.start() for m in ATOM.finditer(text.lower()) if m.group() in terms]
    if not positions:
        low = text.lower()
        positions = [p for t in terms if (p := low.find(t)) >= 0]
    if not positions:
        return 0
    positions.sort()
    best, best_count, left = positions[0], 0, 0
    for right, pos in enumerate(positions):
        while pos - positions[left] > width:
            left += 1
        if right - left + 1 > best_count:
            best_count, best = right - left + 1, (positions[left] + pos) // 2
    return best


@dataclass
class _Corpus:
    """One store's search state: its index, what it knows of the docs' changes, and the lock
    that serialises this process's use of both."""

    index: FtsIndex
    lock: threading.Lock
    freshness: Freshness = field(default_factory=Freshness)

    def close(self) -> None:
        self.index.close()
        self.freshness.close()


_corpora: OrderedDict[tuple[str, str, str], _Corpus] = OrderedDict()
_corpora_lock = threading.Lock()


def _corpus_for(store: DocStore) -> _Corpus:
    db = store.search_db
    key = (str(store.local_dir), str(store.shipped_dir), "" if db is None else os.fspath(db))
    with _corpora_lock:
        corpus = _corpora.get(key)
        if corpus is None:
            corpus = _corpora[key] = _Corpus(_open_index(db), threading.Lock())
            while len(_corpora) > _CACHED_CORPORA:
                evicted = _corpora.popitem(last=False)[1]
                with evicted.lock:  # a search still running on it finishes first
                    evicted.close()
        _corpora.move_to_end(key)
        return corpus


def _open_index(db: Path | None) -> FtsIndex:
    """The index in ``db``; in memory when that file cannot be used (a read-only state dir), so
    search still works, only without surviving a restart."""
    if db is not None:
        try:
            Path(db).parent.mkdir(parents=True, exist_ok=True)
            return FtsIndex(db)
        except (OSError, sqlite3.Error) as exc:
            logger.warning("Cannot keep the search index in %s (%s): keeping it in memory", db, exc)
    return FtsIndex(None)


def _refresh(store: DocStore, corpus: _Corpus) -> tuple[dict[str, Origin], set[int]]:
    """Bring the index up to date with the store.

    Returns id -> origin of the searchable docs and the index rows they occupy.
    """
    index, freshness = corpus.index, corpus.freshness
    index.reopen_if_replaced()
    rows = index.rows()
    reloads = index.reloads
    try:
        return _refresh_rows(store, index, freshness, rows, reloads)
    except BaseException:
        freshness.failed()
        raise


def _refresh_rows(store: DocStore, index: FtsIndex, freshness: Freshness, rows: dict[tuple[str, str], Indexed],
                  reloads: int) -> tuple[dict[str, Origin], set[int]]:
    listing, checked = freshness.suspects(store, rows, index.generation)
    stale: list[tuple[tuple[str, str], str, Stamp]] = []
    missing: set[tuple[str, str]] = set()
    unsettled = False
    for key, doc_id, path, _ in checked:
        try:
            st = os.stat(path)
        except OSError:
            missing.add(key)  # vanished between listing and stat: dropped below like any gone doc
            freshness.seen(key, None)
            continue
        now = stamp_of(st)
        freshness.seen(key, now)
        entry = rows.get(key)
        # An unreadable doc is read again when checked: a chmod moves only its ctime.
        if entry is None or entry.stamp != now or not entry.settled or entry.digest is None:
            stale.append((key, doc_id, now))
    answer = listing.answer
    if not stale and not missing and answer is not None and answer[0] == index.generation:
        freshness.refreshed(index.generation, False, others_wrote=index.reloads != reloads)
        return answer[1], answer[2]
    for start in range(0, len(stale), _WRITE_BATCH):
        batch = []
        chunk = stale[start : start + _WRITE_BATCH]
        read_at = time.time_ns()  # before any read: a change during one is never trusted
        texts = store.texts([doc_id for _, doc_id, _ in chunk])
        for key, doc_id, now in chunk:
            read = texts.get(doc_id)
            if read is None:
                missing.add(key)
                continue
            text: str | None = None
            if isinstance(read, DocError):
                entry = rows.get(key)
                if entry is None or entry.stamp != now or entry.digest is not None:
                    logger.warning("Search skips the unreadable doc %s: %s", doc_id, read)
            else:
                text = read
            settled = is_settled(now, read_at)
            unsettled = unsettled or not settled
            batch.append((key, doc_id, now, settled, text))
        with index.writing():
            for (root, doc_id), _, now, settled, text in batch:
                index.put(root, doc_id, now, None if text is None else digest(text), settled,
                          functools.partial(split_sections, doc_id, text or ""))
    keys = {target[0] for target in listing.targets} - missing
    mine = {os.fspath(store.local_dir), os.fspath(store.shipped_dir)}
    gone = [key for key in index.rows() if key[0] in mine and key not in keys]
    if gone:
        with index.writing():
            index.drop(gone)
    rows = index.rows()
    origins = {}
    for key, doc_id, _, origin in listing.targets:
        entry = rows.get(key)
        if key in keys and entry is not None and entry.digest is not None:
            origins[doc_id] = origin
    allowed = index.row_ids(keys)
    listing.answer = (index.generation, origins, allowed)
    freshness.refreshed(index.generation, unsettled, others_wrote=index.reloads != reloads)
    return origins, allowed


def _run(store: DocStore, work: Callable[[_Corpus], _T]) -> _T:
    """Run ``work`` on the store's index under its lock; a corrupt index file is rebuilt once."""
    corpus = _corpus_for(store)
    with corpus.lock:
        try:
            return work(corpus)
        except sqlite3.Error as exc:
            if not corpus.index.recover(exc):
                raise SearchUnavailable(f"The search index {store.search_db or '(in memory)'} failed: {exc}") from exc
        return work(corpus)


def search_docs(store: DocStore, query: str, max_results: int = 5) -> list[Hit]:
    """Search the sections of the docs the index surfaces for ``query``; best first, at most
    ``max_results``.

    Covers what `DocStore.surfaced_ids` names, both tiers with shadowing applied (a shadowed
    shipped doc is searched in its local text only); ignored, banked and unindexed local docs
    are readable by exact id only. A section holding the whole query as
    written (case-insensitive) ranks above any that does not.

    Raises:
        InvalidQuery: the query is empty or whitespace or over QUERY_MAX_CHARS, or max_results is
            outside 1..50.
        SearchUnavailable: this Python's sqlite3 lacks FTS5, or the index file cannot be used.
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidQuery(
            "Search query is empty: give words or a literal to look for, e.g. an exception "
            "message, a config key or a function name."
        )
    if len(query) > QUERY_MAX_CHARS:
        raise InvalidQuery(
            f"Search query is {len(query):,} characters; the most is {QUERY_MAX_CHARS:,}. Search for "
            f"its distinctive part instead: one line of an error, a name, a few words (it began "
            f"{shown_query(query, 40)})."
        )
    if isinstance(max_results, bool) or not isinstance(max_results, int) or not (
        1 <= max_results <= MAX_RESULTS_LIMIT
    ):
        raise InvalidQuery(
            f"max_results must be a whole number from 1 to {MAX_RESULTS_LIMIT}, got {max_results!r}"
        )

    def work(corpus: _Corpus) -> tuple[dict[str, Origin], list[Ranked]]:
        origins, allowed = _refresh(store, corpus)
        return origins, corpus.index.search(query, max_results, allowed)

    origins, ranked = _run(store, work)
    # Scores as BM25 shows them (higher is better), a phrase match lifted above every other hit.
    lift = max((r.score for r in ranked if not r.phrase), default=0.0)
    return [
        Hit(
            doc_id=r.doc_id,
            heading=r.heading,
            snippet=snippet(_without_heading(r.body), query),
            origin=origins[r.doc_id],
            score=round(r.score + (lift if r.phrase else 0.0), 3),
        )
        for r in ranked
        if r.doc_id in origins
    ]


def warm_index(store: DocStore) -> int:
    """Bring the index up to date now, so the first search does not pay for it; returns the count
    of searchable docs.

    Optional: a server may run this in a worker thread at start-up. With the index kept on disk,
    only files changed since the last server read them are read.
    """
    return len(_run(store, lambda corpus: _refresh(store, corpus))[0])


QUERY_ECHO_CHARS = 80
"""How much of a query answers quote back: enough to recognise it, never the whole paste."""


def shown_query(query: str, limit: int = QUERY_ECHO_CHARS) -> str:
    """The query as answers quote it: repr'd, cut to about ``limit`` characters."""
    return repr(query) if len(query) <= limit else repr(query[: limit - 1]) + "…"
