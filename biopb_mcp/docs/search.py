"""Full-text search over the docs store: `##` sections ranked by BM25 with an exact-phrase boost.

Search is a view over `DocStore`: the doc list, origins and texts come from the store's API. To
stay fast on a large local tier (10 MB / 5,000 docs) each process keeps, per store directory pair,
an inverted index over parsed sections. A doc's entry is keyed by its file's (path, inode,
mtime_ns, size), checked with one stat per query, so an edit (by write_doc, by hand, by another
server) is seen on the very next search; a doc modified within a second of being read is re-read
and compared until that is safe (see `filecache.is_settled`). Nothing is invalidated by time.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import logging
import math
import os
import re
import sys
import threading
import time
from array import array
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from biopb_mcp.docs.filecache import is_settled, stamp_of
from biopb_mcp.docs.frontmatter import heading_text
from biopb_mcp.docs.limits import QUERY_MAX_CHARS
from biopb_mcp.errors import DocError, DocNotFound, InvalidQuery

if TYPE_CHECKING:
    from biopb_mcp.docs.store import DocStore

__all__ = [
    "Hit",
    "SectionIndex",
    "search_docs",
    "shown_query",
    "snippet",
    "split_sections",
    "tokenize",
    "warm_index",
]

logger = logging.getLogger(__name__)

MAX_RESULTS_LIMIT = 50
"""Largest max_results a caller may ask for; more is noise for an agent's context."""

SNIPPET_CHARS = 200
"""Target length of a hit's snippet, in characters."""

_K1 = 1.2
"""BM25 term-frequency saturation."""

_B = 0.5
"""BM25 length normalization; light, since procedure sections differ a lot in length."""

_CACHED_CORPORA = 4
"""How many store directory pairs keep an index in this process (a server has one)."""

_ATOM = re.compile(r"[^\W_]+")
# Runs of word chars and dots: a run that is not plain alphanumeric is a literal an agent pastes
# whole (threshold_otsu, kernel.promote_after, skimage.filters.threshold_otsu), so it is indexed
# whole as well as by its parts.
_RUN = re.compile(r"[\w.]+")
_MARKUP_STARTS = frozenset("#`~ ")
"""First characters of the only lines split_sections must parse: headings and fences."""
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def tokenize(text: str) -> list[str]:
    """Lower-cased search tokens of ``text``: alphanumeric runs, plus `_`/dotted compounds whole."""
    low = text.lower()
    tokens: list[str] = _ATOM.findall(low)
    # Only runs that are not plain words need a look: filterfalse keeps the loop in C.
    for run in itertools.filterfalse(str.isalnum, _RUN.findall(low)):
        run = run.strip("._")
        if run and not run.isalnum():  # a compound, not a word at a sentence's end
            tokens.append(run)
            if "." in run:
                tokens.extend(p for p in run.split(".") if "_" in p.strip("_") and p.strip("_"))
    return tokens


def split_sections(doc_id: str, text: str) -> list[tuple[str, str]]:
    """Split a doc into ``(heading, text)`` sections at `##` headings outside code fences.

    Text before the first `##` is the lead section, headed by the doc's title (first H1, else the
    id); an empty lead is dropped. Each later section's text starts with its heading line, so the
    heading's words are searchable too.
    """
    title = ""
    sections: list[tuple[str, list[str]]] = [("", [])]
    fence = ""
    for line in text.splitlines():
        first = line[:1]
        if first not in _MARKUP_STARTS:  # most lines: prose or a list item, nothing to parse
            sections[-1][1].append(line)
            continue
        marker = _FENCE.match(line)
        if marker:
            if not fence:
                fence = marker.group(1)
            elif marker.group(1) == fence:
                fence = ""
        elif not fence:
            h2 = heading_text(line, 2)
            if h2 is not None:
                sections.append((h2, [line]))
                continue
            if not title and len(sections) == 1:
                title = heading_text(line, 1) or ""
        sections[-1][1].append(line)
    out: list[tuple[str, str]] = []
    for index, (heading, lines) in enumerate(sections):
        body = "\n".join(lines)
        if index == 0:
            if not body.strip():
                continue
            heading = title or doc_id
        out.append((heading, body))
    return out


@dataclass(frozen=True)
class Hit:
    """One matching section: where it is, a one-line snippet around the match, and its score."""

    doc_id: str
    heading: str
    snippet: str
    origin: str
    score: float


@dataclass
class _Section:
    doc_id: str
    heading: str
    text: str
    folded: str  # lower-cased, whitespace runs collapsed: what the phrase test runs on
    length: int  # token count, for length normalization


class SectionIndex:
    """An inverted index over doc sections that supports replacing one doc at a time.

    Postings are compact arrays of (slot, count) pairs per term; a replaced doc's slots become tombstones
    (length -1) that queries skip, and everything is rebuilt once tombstones outnumber live
    sections. Term statistics count tombstones too, which shifts idf slightly but keeps a query
    to one pass over each posting list.
    """

    def __init__(self) -> None:
        self._slots: list[_Section | None] = []
        self._lengths = array("i")  # token count per slot; -1 marks a tombstone
        self._doc_slots: dict[str, list[int]] = {}
        self._postings: dict[str, array[int]] = {}  # term -> slot, count, slot, count, ...
        self._live = 0
        self._total_length = 0
        # Every slot's folded text joined by NULs, for one fast substring scan per query;
        # rebuilt lazily after a change.
        self._joined: str | None = None
        self._starts: list[int] = []
        self._norm_cache: list[float] | None = None  # see _norms; dropped on every change

    def __contains__(self, doc_id: str) -> bool:
        return doc_id in self._doc_slots

    def doc_ids(self) -> list[str]:
        """Ids currently indexed."""
        return list(self._doc_slots)

    def set_doc(self, doc_id: str, sections: Iterable[tuple[str, str]]) -> None:
        """Index ``doc_id`` as ``sections`` (heading, text), replacing what it held before."""
        self.remove_doc(doc_id)
        slots: list[int] = []
        for heading, text in sections:
            slots.append(self._add_section(_Section(doc_id, heading, text, _fold(text), 0)))
        self._doc_slots[doc_id] = slots

    def remove_doc(self, doc_id: str) -> None:
        """Drop ``doc_id`` from the index (no-op when absent)."""
        for slot in self._doc_slots.pop(doc_id, []):
            section = self._slots[slot]
            if section is not None:
                self._slots[slot] = None
                self._lengths[slot] = -1
                self._live -= 1
                self._total_length -= section.length
                self._joined = self._norm_cache = None
        if len(self._slots) > 64 and len(self._slots) > 2 * self._live:
            self._compact()

    def _add_section(self, section: _Section) -> int:
        slot = len(self._slots)
        tokens = tokenize(section.text)
        section.length = len(tokens)
        postings = self._postings
        for token, count in Counter(tokens).items():
            posting = postings.get(token)
            if posting is None:
                posting = postings[sys.intern(token)] = array("i")
            posting.extend((slot, count))
        self._slots.append(section)
        self._lengths.append(section.length)
        self._live += 1
        self._total_length += section.length
        self._joined = self._norm_cache = None
        return slot

    def _compact(self) -> None:
        """Rebuild slots and postings from live sections (amortized over many replacements)."""
        old = [s for s in self._slots if s is not None]
        self._slots, self._lengths, self._postings, self._doc_slots = [], array("i"), {}, {}
        self._live = self._total_length = 0
        for section in old:
            self._doc_slots.setdefault(section.doc_id, []).append(self._add_section(section))

    def _phrase_slots(self, folded_query: str) -> list[int]:
        """Live slots whose folded text contains ``folded_query``."""
        if not folded_query or "\0" in folded_query:
            return []
        if self._joined is None:
            texts = [s.folded if s is not None else "" for s in self._slots]
            self._starts = [0, *itertools.accumulate(len(t) + 1 for t in texts)]
            self._joined = "\0".join(texts)
        joined, starts, found = self._joined, self._starts, []
        pos = joined.find(folded_query)
        while pos >= 0:
            slot = bisect.bisect_right(starts, pos) - 1
            found.append(slot)  # a tombstone's text is empty, so never matches
            pos = joined.find(folded_query, starts[slot + 1])
        return found

    def _norms(self) -> list[float]:
        """Per-slot BM25 length term (k1 * (1 - b + b * len / avg)); -1.0 marks a tombstone."""
        if self._norm_cache is None:
            avg = max(self._total_length / self._live, 1.0) if self._live else 1.0
            base, per_token = _K1 * (1.0 - _B), _K1 * _B / avg
            self._norm_cache = [base + per_token * n if n >= 0 else -1.0 for n in self._lengths]
        return self._norm_cache

    def search(self, query: str, max_results: int) -> list[tuple[_Section, float]]:
        """Best ``max_results`` sections for ``query``: phrase matches first, then BM25 order."""
        terms = list(dict.fromkeys(tokenize(query)))
        n = max(len(self._slots), 1)
        norms = self._norms()
        acc = [0.0] * len(norms)  # score per slot: a list beats a dict at this size
        best_possible = 0.0
        k1_plus = _K1 + 1.0
        for term in terms:
            posting = self._postings.get(term)
            if posting is None:
                continue
            df = len(posting) // 2
            weight = math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * k1_plus
            best_possible += weight
            pairs = iter(posting)
            for slot, count in zip(pairs, pairs):
                norm = norms[slot]
                if norm >= 0.0:
                    acc[slot] += weight * count / (count + norm)
        # Any phrase match outranks every non-match: its bonus exceeds the best BM25 possible.
        # Every section is tested, not only the scored ones: the literal may start or end
        # mid-token ("Error: operands" inside "ValueError: operands").
        bonus = best_possible + 1.0
        folded_query = _fold(query)
        # One plain word: every section holding it as a token holds it as a substring too, so
        # the bonus lifts all scored sections alike, and sections holding it only inside a longer
        # word (bonus alone) cannot reach the top: skip the scan, add the bonus at the end.
        uniform = 0.0
        if terms == [folded_query] and len(acc) - acc.count(0.0) >= max_results:
            uniform = bonus
        else:
            for slot in self._phrase_slots(folded_query):
                acc[slot] += bonus
        # Cut by score at C speed, then order the few survivors (ties included) by a stable key.
        floor = heapq.nlargest(max_results, acc)[-1] if acc else 0.0
        if floor <= 0.0:
            floor = min((v for v in acc if v > 0.0), default=1.0)
        slots = self._slots
        top = [(slots[i], v, i) for i, v in enumerate(acc) if v >= floor]
        top.sort(key=lambda t: (-t[1], t[0].doc_id if t[0] else "", t[2]))
        return [(section, score + uniform) for section, score, _ in top[:max_results] if section is not None]


def _without_heading(text: str) -> str:
    """A `##` section's text minus its heading line, which a hit already shows."""
    if text.startswith("##"):
        rest = text.partition("\n")[2]
        return rest if rest.strip() else text
    return text


def _fold(text: str) -> str:
    return " ".join(text.lower().split())


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
    positions = [m.start() for m in _ATOM.finditer(text.lower()) if m.group() in terms]
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
class _Entry:
    """What an indexed doc was read at: file key, a digest of its text, and whether it is racy."""

    key: tuple[str, int, int, int]  # (path, inode, mtime_ns, size)
    digest: int | None  # hash of the text; None when the doc could not be read
    racy: bool


@dataclass
class _Corpus:
    """One store's search state: the index plus what each doc was read at."""

    index: SectionIndex
    entries: dict[str, _Entry]
    lock: threading.Lock


_corpora: OrderedDict[tuple[str, str], _Corpus] = OrderedDict()
_corpora_lock = threading.Lock()


def _corpus_for(store: DocStore) -> _Corpus:
    key = (str(store.local_dir), str(store.shipped_dir))
    with _corpora_lock:
        corpus = _corpora.get(key)
        if corpus is None:
            corpus = _corpora[key] = _Corpus(SectionIndex(), {}, threading.Lock())
            while len(_corpora) > _CACHED_CORPORA:
                _corpora.popitem(last=False)
        _corpora.move_to_end(key)
        return corpus


def _refresh(store: DocStore, corpus: _Corpus) -> dict[str, str]:
    """Bring the corpus up to date with the store; returns id -> origin of the searchable docs."""
    origins: dict[str, str] = {}
    listed: set[str] = set()
    entries = corpus.entries
    # Taken before any stat or read, so a change landing after them shows on the next query.
    started = time.time_ns()
    walked = store.doc_entries()
    surfaced = store.surfaced_ids(walked)
    for doc_id, path, origin in walked:
        if doc_id not in surfaced:
            continue  # readable by id only; an indexed copy is dropped below
        listed.add(doc_id)
        try:
            st = os.stat(path)
        except OSError:
            continue  # vanished between listing and stat: dropped below like any gone doc
        key = (path, st.st_ino, st.st_mtime_ns, st.st_size)
        entry = entries.get(doc_id)
        if entry is not None and entry.key == key and not entry.racy:  # the fast path
            if entry.digest is not None:
                origins[doc_id] = origin
            continue
        racy = not is_settled(stamp_of(st), started)
        try:
            text, _ = store.doc_text(doc_id)
        except DocNotFound:
            continue
        except (DocError, OSError, UnicodeError) as exc:
            if entry is None or entry.key != key or entry.digest is not None:
                logger.warning("Search skips the unreadable doc %s: %s", doc_id, exc)
            entries[doc_id] = _Entry(key, None, racy)
            corpus.index.remove_doc(doc_id)
            continue
        digest = hash(text)
        if entry is None or entry.digest != digest:
            corpus.index.set_doc(doc_id, split_sections(doc_id, text))
        entries[doc_id] = _Entry(key, digest, racy)
        origins[doc_id] = origin
    for gone in set(entries) - origins.keys():
        if gone not in listed or entries[gone].digest is not None:
            del entries[gone]
            corpus.index.remove_doc(gone)
    return origins


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
    corpus = _corpus_for(store)
    with corpus.lock:
        origins = _refresh(store, corpus)
        ranked = corpus.index.search(query, max_results)
    return [
        Hit(
            doc_id=section.doc_id,
            heading=section.heading,
            snippet=snippet(_without_heading(section.text), query),
            origin=origins.get(section.doc_id, ""),
            score=round(score, 3),
        )
        for section, score in ranked
        if section.doc_id in origins
    ]


def warm_index(store: DocStore) -> int:
    """Read and index every doc now, so the first search does not pay for it; returns the count.

    Optional: a server may run this in a worker thread at start-up. On a 10 MB local tier the
    first search otherwise takes seconds; later ones re-read only what changed.
    """
    corpus = _corpus_for(store)
    with corpus.lock:
        return len(_refresh(store, corpus))


QUERY_ECHO_CHARS = 80
"""How much of a query answers quote back: enough to recognise it, never the whole paste."""


def shown_query(query: str, limit: int = QUERY_ECHO_CHARS) -> str:
    """The query as answers quote it: repr'd, cut to about ``limit`` characters."""
    return repr(query) if len(query) <= limit else repr(query[: limit - 1]) + "…"
