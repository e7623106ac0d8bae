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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from biopb_mcp.docs import index as index_mod
from biopb_mcp.docs.frontmatter import parse
from biopb_mcp.docs.ids import INDEX_ID
from biopb_mcp.docs.limits import QUERY_BUDGET_S, QUERY_MAX_CHARS
from biopb_mcp.docs.search.freshness import Freshness, Scope
from biopb_mcp.docs.search.fts import FtsIndex, IndexBusy, Indexed, Section, TooCostly, digest
from biopb_mcp.docs.search.ranking import WEAK_BELOW, about_words, names, score_all
from biopb_mcp.docs.search.sections import ATOM, atoms, compounds, split_sections, tokenize
from biopb_mcp.docs.views import Origin
from biopb_mcp.errors import DocError, DocProblem, InvalidQuery, SearchUnavailable
from biopb_mcp.fs.stamps import Stamp, is_settled, stamp_of

if TYPE_CHECKING:
    from biopb_mcp.docs.store import DocStore

__all__ = [
    "Hit",
    "Search",
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

POOL = 20
"""Sections gathered per kind of candidate (the query as written, its terms, docs it names) when
max_results is smaller: every one is scored alike, so the first 20 hits never depend on how many
were asked for."""

SNIPPET_CHARS = 200
"""Target length of a hit's snippet, in characters."""

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

    @property
    def weak(self) -> bool:
        """It shares only a few, common words with the query (see `ranking.WEAK_BELOW`)."""
        return self.score < WEAK_BELOW


def _without_heading(text: str) -> str:
    """A `##` section's text minus its heading line, which a hit already shows."""
    if text.startswith("##"):
        rest = text.partition("\n")[2]
        return rest if rest.strip() else text
    return text


SNIPPET_SCAN_CHARS = 100_000
"""How much of a section a snippet looks through for the match: a section longer than that (a
pasted megabyte on one line) would cost seconds to map word by word."""


def snippet(text: str, query: str, width: int = SNIPPET_CHARS) -> str:
    """One line of about ``width`` chars around the first exact match, else the densest term hits
    (within the first SNIPPET_SCAN_CHARS of ``text``)."""
    text = text[:SNIPPET_SCAN_CHARS]
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


class _Abouts:
    """What each surfaced doc is about, by word, for the docs a query names; brought up to date
    only when the rows or the doc list changed. A doc is about the words of its title and of
    its line in the rendered index: its entry's hook, or for a shipped doc in the New-shipped
    tail its description (a doc listed only through a folder line has no line of its own)."""

    def __init__(self) -> None:
        self._of: dict[tuple[str, str], tuple[str, str, frozenset[str]]] = {}
        self._by_word: dict[str, set[tuple[str, str]]] = {}
        self._seen: tuple[Scope, int] | None = None  # the scope itself: its id could be reused once freed

    def update(self, scope: Scope, rows: dict[tuple[str, str], Indexed], generation: int) -> None:
        if self._seen is not None and self._seen[0] is scope and self._seen[1] == generation:
            return
        live = set()
        for key, doc_id, _, origin in scope.targets:
            entry = rows.get(key)
            if entry is None:
                continue
            live.add(key)
            hook = scope.hooks.get(doc_id, entry.hook if origin == Origin.SHIPPED else "")
            known = self._of.get(key)
            if known is not None and known[:2] == (entry.title, hook):
                continue
            self._forget(key)
            words = about_words(entry.title, hook)
            self._of[key] = (entry.title, hook, words)
            for word in words:
                self._by_word.setdefault(word, set()).add(key)
        for key in [k for k in self._of if k not in live]:
            self._forget(key)
        self._seen = (scope, generation)

    def _forget(self, key: tuple[str, str]) -> None:
        known = self._of.pop(key, None)
        if known is not None:
            for word in known[2]:
                self._by_word[word].discard(key)

    def naming(self, words: list[str]) -> list[tuple[str, str]]:
        """The docs whose title and hook hold every one of ``words``, the most specific first."""
        if not names(words, None):
            return []
        holders = set.intersection(*(self._by_word.get(w, set()) for w in words))
        return sorted(holders, key=lambda key: (len(self._of[key][2]), key))


@dataclass
class _Corpus:
    """One store's search state: its index, what it knows of the docs' changes, and the lock
    that serialises this process's use of both."""

    index: FtsIndex
    lock: threading.Lock
    freshness: Freshness = field(default_factory=Freshness)
    abouts: _Abouts = field(default_factory=_Abouts)

    def close(self) -> None:
        self.index.close()
        self.freshness.close()


@dataclass(frozen=True)
class _View:
    """What a query searches: the surfaced docs (id -> origin), their index rows, and, when the
    index could not be written (another process held its lock), the fresh sections of the docs
    whose rows are stale (``direct``: left out of ``allowed``, read directly), with what each of
    those docs is about."""

    origins: dict[str, Origin]
    allowed: set[int]
    direct: tuple[Section, ...] = ()
    direct_about: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)


class Search:
    """One store's search: the index it keeps open and the lock under which it opens one.

    Owned by the :class:`~biopb_mcp.docs.store.DocStore` (``DocStore.search``); it holds no
    reference to the store, which passes itself to each call, so the store is freed (and its
    index and watch closed, see ``close``) as soon as nobody holds it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._corpus: _Corpus | None = None
        self._key: tuple[str, str, str] | None = None

    def corpus(self, store: DocStore) -> _Corpus:
        """The open index for the store's tiers and index file, opened on first use (again when
        the store was pointed at another index file)."""
        db = store.search_db
        key = (str(store.local_dir), str(store.shipped_dir), "" if db is None else os.fspath(db))
        with self._lock:
            corpus = self._corpus
            if corpus is None or self._key != key:
                if corpus is not None:
                    with corpus.lock:  # a search still running on it finishes first
                        corpus.close()
                corpus = self._corpus = _Corpus(_open_index(db), threading.Lock())
                self._key = key
            return corpus

    def close(self) -> None:
        """Close the index and stop following the change feed (a search running finishes first)."""
        with self._lock:
            corpus, self._corpus, self._key = self._corpus, None, None
        if corpus is not None:
            with corpus.lock:
                corpus.close()

    def run(self, store: DocStore, work: Callable[[_Corpus], _T]) -> _T:
        """Run ``work`` on the store's index under its lock; a corrupt index file is rebuilt once."""
        corpus = self.corpus(store)
        with corpus.lock:
            try:
                return work(corpus)
            except sqlite3.Error as exc:
                if not corpus.index.recover(exc):
                    raise SearchUnavailable(
                        f"The search index {store.search_db or '(in memory)'} failed: {exc}",
                        kind=DocProblem.INDEX_FAILED,
                        path=str(store.search_db or "(in memory)"),
                        error=str(exc),
                    ) from exc
            return work(corpus)


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


def _refresh(store: DocStore, corpus: _Corpus) -> _View:
    """Bring the index up to date with the store; what a query then searches."""
    index, freshness = corpus.index, corpus.freshness
    index.reopen_if_replaced()
    rows = index.rows()
    reloads = index.reloads
    try:
        view, scope = _refresh_rows(store, index, freshness, rows, reloads)
    except BaseException:
        freshness.failed()
        raise
    corpus.abouts.update(scope, index.rows(), index.generation)
    return view


def _about(text: str) -> tuple[str, str]:
    """(title, description) of a doc's text, as the index keeps them."""
    info = parse(text)
    return info.title or "", info.description or ""


Read = tuple[tuple[str, str], str, Stamp, bool, str | None]
"""((root, id), id, stamp, settled, text or None when unreadable) of a doc read for the index."""


def _refresh_rows(
    store: DocStore, index: FtsIndex, freshness: Freshness, rows: dict[tuple[str, str], Indexed], reloads: int
) -> tuple[_View, Scope]:
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
        return _View(answer[1], answer[2]), listing
    unwritten: list[Read] = []  # read, but another process holds the index's write lock
    for start in range(0, len(stale), _WRITE_BATCH):
        batch = _read_batch(store, rows, stale[start : start + _WRITE_BATCH], missing)
        unsettled = unsettled or not all(settled for _, _, _, settled, _ in batch)
        if unwritten:
            unwritten += batch
            continue
        try:
            with index.writing():
                for (root, doc_id), _, now, settled, text in batch:
                    index.put(
                        root,
                        doc_id,
                        now,
                        None if text is None else digest(text),
                        settled,
                        functools.partial(split_sections, doc_id, text or ""),
                        # the index is about nothing: its words must not name it for a query
                        functools.partial(_about, "" if doc_id == INDEX_ID else text or ""),
                    )
        except IndexBusy:
            unwritten = batch
    keys = {target[0] for target in listing.targets} - missing
    mine = {os.fspath(store.local_dir), os.fspath(store.shipped_dir)}
    gone = [key for key in index.rows() if key[0] in mine and key not in keys]
    if gone and not unwritten:
        try:
            with index.writing():
                index.drop(gone)
        except IndexBusy:
            pass  # gone docs are left out of `keys` all the same; the next refresh drops them
    rows = index.rows()
    fresh = {key: text for key, _, _, _, text in unwritten}
    origins: dict[str, Origin] = {}
    for key, doc_id, _, origin in listing.targets:
        entry = rows.get(key)
        if key in keys and (
            (entry is not None and entry.digest is not None and key not in fresh) or fresh.get(key) is not None
        ):
            origins[doc_id] = origin
    if unwritten:
        freshness.failed()  # nothing read now is in the index: the next query checks every file
        return _direct_view(index, origins, index.row_ids(keys - fresh.keys()), unwritten), listing
    allowed = index.row_ids(keys)
    listing.answer = (index.generation, origins, allowed)
    freshness.refreshed(index.generation, unsettled, others_wrote=index.reloads != reloads)
    return _View(origins, allowed), listing


def _read_batch(
    store: DocStore,
    rows: dict[tuple[str, str], Indexed],
    chunk: list[tuple[tuple[str, str], str, Stamp]],
    missing: set[tuple[str, str]],
) -> list[Read]:
    """Read a batch of stale docs (a doc gone meanwhile is added to ``missing``)."""
    read_at = time.time_ns()  # before any read: a change during one is never trusted
    texts = store.shelf.texts([doc_id for _, doc_id, _ in chunk if doc_id != INDEX_ID])
    if any(doc_id == INDEX_ID for _, doc_id, _ in chunk):
        texts[INDEX_ID] = index_mod.prose(store.listing.index_text()[0])
    batch: list[Read] = []
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
        batch.append((key, doc_id, now, is_settled(now, read_at), text))
    return batch


DIRECT_MAX_DOCS = 500
"""Most changed docs a query reads directly while another process holds the index's write lock;
past it the query is refused (search again once that process is done)."""


def _direct_view(index: FtsIndex, origins: dict[str, Origin], allowed: set[int], unwritten: list[Read]) -> _View:
    """The view when the index could not be written: the changed docs' rows are left out of
    ``allowed`` and their sections, split from the texts just read, are searched directly."""
    if len(unwritten) > DIRECT_MAX_DOCS:
        raise SearchUnavailable(
            f"The search index {index.path} is locked by another process, and {len(unwritten):,} docs "
            f"changed since it was written (at most {DIRECT_MAX_DOCS} are searched without it)",
            kind=DocProblem.INDEX_LOCKED,
            path=str(index.path),
            changed=len(unwritten),
            limit=DIRECT_MAX_DOCS,
        )
    logger.warning(
        "Search index %s is locked by another process: %d changed doc(s) searched directly", index.path, len(unwritten)
    )
    direct: list[Section] = []
    about: dict[tuple[str, str], frozenset[str]] = {}
    for (root, doc_id), _, _, _, text in unwritten:
        if text is None:
            continue
        about[(root, doc_id)] = about_words(*_about("" if doc_id == INDEX_ID else text))
        for heading, body in split_sections(doc_id, text):
            direct.append(Section(-1 - len(direct), root, doc_id, heading, body))  # ids no index row has
    return _View(origins, allowed, tuple(direct), about)


def search_docs(store: DocStore, query: str, max_results: int = 5) -> list[Hit]:
    """Search the sections of the docs the index surfaces for ``query``; best first, at most
    ``max_results``.

    Covers what `DocStore.surfaced_ids` names, both tiers with shadowing applied (a shadowed
    shipped doc is searched in its local text only); ignored, banked and unindexed local docs
    are readable by exact id only. Ordered as `biopb_mcp.docs.search.ranking` scores: a doc whose title
    or index hook holds every word of the query first, then a section holding the whole query as
    written (case-insensitive), then BM25 relevance; a hit's score never depends on
    ``max_results``.

    Raises:
        InvalidQuery: the query is empty or whitespace or over QUERY_MAX_CHARS, max_results is
            outside 1..50, or the query took longer than QUERY_BUDGET_S (kind QUERY_TOO_COSTLY).
        SearchUnavailable: this Python's sqlite3 lacks FTS5, or the index file cannot be used.
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidQuery("Search query is empty", kind=DocProblem.EMPTY_QUERY)
    if len(query) > QUERY_MAX_CHARS:
        raise InvalidQuery(
            f"Search query is {len(query):,} characters; the most is {QUERY_MAX_CHARS:,}.",
            kind=DocProblem.QUERY_TOO_LONG,
            count=len(query),
            limit=QUERY_MAX_CHARS,
            began=shown_query(query, 40),
        )
    if isinstance(max_results, bool) or not isinstance(max_results, int) or not (1 <= max_results <= MAX_RESULTS_LIMIT):
        raise InvalidQuery(f"max_results must be a whole number from 1 to {MAX_RESULTS_LIMIT}, got {max_results!r}")

    def work(corpus: _Corpus) -> list[Hit]:
        view = _refresh(store, corpus)
        deadline = time.monotonic() + QUERY_BUDGET_S  # the query's own cost, not the refresh's
        try:
            with corpus.index.budget(deadline):
                return _query(corpus, view, query, max_results, deadline)
        except TooCostly:
            shown = shown_query(query, 60)
            raise InvalidQuery(
                f"Search query {shown} was stopped after {QUERY_BUDGET_S:g} s: it matches too much of the "
                "docs to rank in time.",
                kind=DocProblem.QUERY_TOO_COSTLY,
                limit=QUERY_BUDGET_S,
                shown=shown,
            ) from None

    return store.search.run(store, work)


def _query(corpus: _Corpus, view: _View, query: str, max_results: int, deadline: float) -> list[Hit]:
    """The best ``max_results`` hits of ``view`` for ``query``, within ``deadline``."""
    index = corpus.index
    words = list(dict.fromkeys(atoms(query)))
    literals = list(dict.fromkeys(compounds(query)))
    pool = max(POOL, max_results)
    found = {s.rowid: s for s in index.candidates(query, view.allowed, pool, deadline)}
    rows = index.rows()
    named = [key for key in corpus.abouts.naming(words) if key in rows and rows[key].row in view.allowed]
    titled = set(named)
    for key in named[:pool]:  # the most specific first
        for section in index.sections_of(rows[key].row, query)[:pool]:
            found.setdefault(section.rowid, section)
    if view.direct:
        wanted = set(words) | {f"compound {c}" for c in literals}
        for section in view.direct:
            if wanted & (set(atoms(section.body)) | {f"compound {c}" for c in compounds(section.body)}):
                found[section.rowid] = section
        titled |= {key for key, about in view.direct_about.items() if names(words, about)}
    if time.monotonic() > deadline:
        raise TooCostly("the query's time is up")
    scored = score_all(found.values(), query, index.stats(words, literals), titled, deadline)
    hits = []
    for best in scored:
        section = best.section
        if section.doc_id not in view.origins:
            continue
        if time.monotonic() > deadline:
            raise TooCostly("the query's time is up")
        hits.append(
            Hit(
                doc_id=section.doc_id,
                heading=section.heading,
                snippet=snippet(_without_heading(section.body), query),
                origin=view.origins[section.doc_id],
                score=round(best.score, 3),
            )
        )
        if len(hits) == max_results:
            break
    return hits


def warm_index(store: DocStore) -> int:
    """Bring the index up to date now, so the first search does not pay for it; returns the count
    of searchable docs (the index's own prose, also searched, is not a doc).

    Optional: a server may run this in a worker thread at start-up. With the index kept on disk,
    only files changed since the last server read them are read.
    """
    return len(store.search.run(store, lambda corpus: _refresh(store, corpus)).origins.keys() - {INDEX_ID})


QUERY_ECHO_CHARS = 80
"""How much of a query answers quote back: enough to recognise it, never the whole paste."""


def shown_query(query: str, limit: int = QUERY_ECHO_CHARS) -> str:
    """The query as answers quote it: repr'd, cut to about ``limit`` characters."""
    return repr(query) if len(query) <= limit else repr(query[: limit - 1]) + "…"
