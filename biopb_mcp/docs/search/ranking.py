"""How search orders the sections the index found: one score per section, from the query, the
section and the corpus alone, never from how many hits were asked for or which pass found it.

A score is a tier plus a relevance below 1, so a higher tier always comes first:
2 when the doc's title or index hook holds every word of the query (the doc is about it), plus 1
when the section holds the whole query as written (an error message, a config key), plus the
section's BM25 relevance to the query's terms, divided by the most any section could score, so it
reads the same from one query to the next.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from biopb_mcp.docs.search.fts import Section, TermStats, TooCostly
from biopb_mcp.docs.search.sections import atoms, compounds, fold

__all__ = ["TITLE_MAX_WORDS", "WEAK_BELOW", "Scored", "about_words", "names", "relevance", "score_all"]

K1 = 1.2
"""BM25's term-frequency saturation (FTS5's bm25() uses the same)."""

B = 0.75
"""BM25's length normalisation (FTS5's bm25() uses the same)."""

PREFIX_WEIGHT = 0.5
"""A word found only as the start of longer words ("checkpoint" in "checkpoints") counts this
much of an occurrence."""

TITLE_MAX_WORDS = 6
"""Longest query that can name a doc by its title or hook: a longer one is a pasted passage."""

SCAN_CHARS = 100_000
"""How much of a section its relevance is counted on; its length in words is scaled up from
there. Term counts saturate long before: the rest of a pasted megabyte would only cost time."""

TITLE_TIER = 2.0
PHRASE_TIER = 1.0

WEAK_BELOW = 0.25
"""A section scoring under this neither names its doc nor holds the query as written, and holds
under a quarter of the relevance a section with every term of the query would: it shares a few
common words. Over the shipped docs a pasted error no doc covers scored 0.12–0.20 at best, while
the top hit of a topic they cover ("watershed", "flatfield correction", "count spots") scored
0.37–0.44 and over."""


@dataclass(frozen=True)
class Scored:
    """A section and its score; ``phrase``: it holds the query as written; ``titled``: its doc's
    title or hook holds every word of the query."""

    section: Section
    score: float
    phrase: bool
    titled: bool


def about_words(title: str, hook: str) -> frozenset[str]:
    """The words a doc is about: those of its title and its index hook (or description)."""
    return frozenset(atoms(f"{title} {hook}"))


def names(words: Sequence[str], about: frozenset[str] | None) -> bool:
    """Whether a query of ``words`` names a doc about ``about`` (None: whether it could name any):
    a short query, every word of it in the doc's title or hook."""
    if not words or len(words) > TITLE_MAX_WORDS:
        return False
    return about is None or about.issuperset(words)


def relevance(body: str, words: Sequence[str], literals: Sequence[str], stats: TermStats) -> float:
    """BM25 of ``body`` for the query's words and literals, over the most any section could score
    with them (so 0 to 1). Each term is weighed by how few sections hold it, as FTS5 weighs it."""
    scanned = body[:SCAN_CHARS]
    tokens = atoms(scanned)
    counts = Counter(tokens)
    literal_counts = Counter(compounds(scanned)) if literals else Counter[str]()
    length = len(tokens) * (len(body) / len(scanned) if scanned else 1.0)
    mean = stats.mean_words or length or 1.0
    norm = K1 * (1 - B + B * length / mean)
    score = most = 0.0
    terms = [(w, counts[w] or PREFIX_WEIGHT * _starts(counts, w)) for w in words]
    terms += [(f"compound {c}", float(literal_counts[c])) for c in literals]
    for key, tf in terms:
        held = stats.holding.get(key, 0)
        # FTS5's idf, clamped the same way: a term in over half the sections weighs almost nothing.
        idf = math.log((stats.sections - held + 0.5) / (held + 0.5)) if stats.sections else 0.0
        idf = max(idf, 1e-6)
        most += idf * (K1 + 1)
        if tf:
            score += idf * tf * (K1 + 1) / (tf + norm)
    return score / most if most else 0.0


def _starts(counts: Counter[str], word: str) -> int:
    """Occurrences of longer words that start with ``word`` (only words long enough to say something)."""
    if len(word) < 4:
        return 0
    return sum(n for token, n in counts.items() if token.startswith(word) and token != word)


def score_all(
    sections: Iterable[Section], query: str, stats: TermStats, titled: set[tuple[str, str]], deadline: float = math.inf
) -> list[Scored]:
    """Every section scored, best first (ties in index order).

    Raises:
        TooCostly: ``deadline`` (time.monotonic()) passed.
    """
    words = list(dict.fromkeys(atoms(query)))
    literals = list(dict.fromkeys(compounds(query)))
    folded = fold(query)
    # A plain one-word query has no phrase to hold: every section holding the word holds it as written.
    phrased = not (len(words) == 1 and not literals and folded == words[0])
    out = []
    for section in sections:
        if time.monotonic() > deadline:
            raise TooCostly("the query's time is up")
        phrase = phrased and folded in fold(section.body)
        is_titled = (section.root, section.doc_id) in titled
        score = (TITLE_TIER if is_titled else 0.0) + (PHRASE_TIER if phrase else 0.0)
        score += relevance(section.body, words, literals, stats)
        out.append(Scored(section, score, phrase, is_titled))
    out.sort(key=lambda s: (-s.score, s.section.rowid))
    return out
